"""The PC walk (sqtt-format.md §10): which instruction of .text each issue of a traced RDNA wave was.

A traced wave starts at the first instruction of .text. Each INST (not OTHER_*), VALUINST or IMMEDIATE issue first
steps over `s_delay_alu`, `s_wait_alu` and `s_barrier_wait` (they never produce packets), then is the instruction at
the PC; the PC moves by the instruction's size, or for a taken branch (op JUMP) also by 4·simm16. An IMMEDIATE_MASK
issue is the instruction at the PC, without the skipping. A branch instruction must meet a JUMP or JUMP_NO packet.

When the walk loses its way (a PC outside .text, a branch without a JUMP packet), that wave's remaining issues keep
their category name and no pc; nothing raises. CDNA gets no walk (§10).
"""
from __future__ import annotations

from .code import Instruction
from .waves import SRC_IMM_MASK, SRC_INST, Wave

SILENT = frozenset(("s_delay_alu", "s_wait_alu", "s_barrier_wait"))


def walk_pcs(waves: list[Wave], insts: dict[int, Instruction]) -> int:
    """Set `pc` and `mnemonic` on the issues of traced waves; returns how many issues got a pc."""
    if not insts:
        return 0
    entry = min(insts)
    return sum(_walk_wave(w, insts, entry) for w in waves if w.traced and w.issues)


def _walk_wave(wave: Wave, insts: dict[int, Instruction], pc: int) -> int:
    done = 0
    for issue in wave.issues:
        inst = insts.get(pc)
        if issue.source != SRC_IMM_MASK:
            while inst is not None and inst.mnemonic in SILENT:
                pc += inst.size
                inst = insts.get(pc)
        if inst is None:
            return done
        is_jump = issue.source == SRC_INST and issue.category.startswith("JUMP")
        if "branch" in inst.mnemonic and not is_jump:
            return done
        issue.pc, issue.mnemonic = pc, inst.mnemonic
        done += 1
        pc += inst.size
        if is_jump and issue.category == "JUMP":
            simm16 = inst.word & 0xFFFF
            pc += 4 * (simm16 - 0x10000 if simm16 & 0x8000 else simm16)
    return done
