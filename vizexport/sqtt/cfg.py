"""The control-flow graph of an AMD program's disassembly: basic blocks and their edges, with the cycles the SQTT
captures spent in each block.

A block starts at the first instruction, at every branch target and after every branch or program end; it ends at a
branch (`s_branch`: one `always` edge; `s_cbranch_*`: a `taken` edge to its target and a `not taken` edge to the next
block), at `s_endpgm`/`s_setpc`/`s_trap` (no edge: the program ends or jumps where the code does not say) or where
the next block starts (an `always` edge falling through). A SOPP branch's target is its address + 4 + 4 x simm16
(the signed low 16 bits of its word, ISA manuals "SOPP"). Cycles per instruction are those of the decoded issues of
traced waves: from an issue to the wave's next one (the stalls show there), summed over the program's launches.
"""
from __future__ import annotations

from collections import defaultdict

from ..records import ControlFlow
from .code import Instruction
from .launches import Launch

ALWAYS, TAKEN, NOT_TAKEN = "always", "taken", "not taken"
_ENDS = ("s_endpgm", "s_setpc", "s_trap", "s_rfe")  # no edge out: the program ends or jumps to a computed address


def branch_target(inst: Instruction) -> int | None:
    """Where a SOPP branch goes (None for any other instruction)."""
    if not inst.mnemonic.startswith(("s_branch", "s_cbranch")):
        return None
    simm = inst.word & 0xFFFF
    simm -= 1 << 16 if simm & 0x8000 else 0
    return inst.addr + 4 + 4 * simm


def control_flow(insts: dict[int, Instruction], cycles: dict[int, int] | None = None) -> ControlFlow:
    """Blocks (as index ranges into the address-ordered instructions), edges between them, cycles per block."""
    addrs = sorted(insts)
    starts = {addrs[0]} if addrs else set()
    for k, a in enumerate(addrs):
        i = insts[a]
        t = branch_target(i)
        if t is not None and t in insts:
            starts.add(t)
        if (t is not None or i.mnemonic.startswith(_ENDS)) and k + 1 < len(addrs):
            starts.add(addrs[k + 1])
    first = [k for k, a in enumerate(addrs) if a in starts]
    bounds = list(zip(first, [*first[1:], len(addrs)], strict=True))
    block_of = {addrs[s]: b for b, (s, _) in enumerate(bounds)}
    edges = []
    for b, (_, e) in enumerate(bounds):
        last = insts[addrs[e - 1]]
        t = branch_target(last)
        nxt = b + 1 if b + 1 < len(bounds) else None
        if t is not None:
            if t in block_of:
                edges.append((b, block_of[t], ALWAYS if last.mnemonic.startswith("s_branch") else TAKEN))
            if last.mnemonic.startswith("s_cbranch") and nxt is not None:
                edges.append((b, nxt, NOT_TAKEN))
        elif not last.mnemonic.startswith(_ENDS) and nxt is not None:
            edges.append((b, nxt, ALWAYS))
    per_pc = cycles or {}
    block_cycles = [sum(per_pc.get(addrs[k], 0) for k in range(s, e)) for s, e in bounds]
    return ControlFlow(bounds, edges, block_cycles, cycles is not None)


def pc_cycles(launches: list[Launch]) -> dict[int, int]:
    """Cycles per instruction address over the traced waves of these launches: issue to the wave's next issue."""
    out: dict[int, int] = defaultdict(int)
    for la in launches:
        for bt in la.blobs:
            for w in bt.waves:
                if not w.traced:
                    continue
                times = [i.time for i in w.issues] + [w.end if w.end is not None else bt.last_time]
                for k, issue in enumerate(w.issues):
                    if issue.pc is not None:
                        out[issue.pc] += max(times[k + 1] - issue.time, 0)
    return dict(out)
