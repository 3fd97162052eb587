"""The PC walk (sqtt-format.md §10): which instruction of .text each issue of a traced wave was.

A traced wave starts at the first instruction of .text. Each INST (not OTHER_*), VALUINST or IMMEDIATE issue first
steps over `s_delay_alu`, `s_wait_alu` and `s_barrier_wait` (they never produce packets), then is the instruction at
the PC; the PC moves by the instruction's size, or for a taken branch (op JUMP) also by 4·simm16. An IMMEDIATE_MASK
issue is the instruction at the PC, without the skipping. A branch instruction must meet a JUMP or JUMP_NO packet.

CDNA (gfx9), which tinygrad does not walk: every CDNA_INST is the instruction at the PC after stepping over those that
send no packet (`s_waitcnt*`, `s_nop`: rocprof's own gfx950 tables show them with hits but no packet stands for
them); a branch meets op JUMP (taken) or NEXT (not taken). The rows this gives equal rocprof's in PC, instruction,
hits and type (tests/test_insts.py).

When the walk loses its way (a PC outside .text, a branch without a JUMP packet), that wave's remaining issues keep
their category name and no pc; nothing raises.
"""
from __future__ import annotations

from .code import Instruction
from .waves import SRC_CDNA, SRC_IMM_MASK, SRC_INST, Wave

SILENT = frozenset(("s_delay_alu", "s_wait_alu", "s_barrier_wait"))
CDNA_SILENT = ("s_waitcnt", "s_nop")  # mnemonic prefixes (s_waitcnt_vmcnt, s_waitcnt_lgkmcnt, ...)
BRANCH_OPS = {"rdna3": ("JUMP", "JUMP_NO"), "rdna4": ("JUMP", "JUMP_NO"), "cdna": ("JUMP", "NEXT")}  # taken, not


def silent(mnemonic: str, arch: str) -> bool:
    """Whether the instruction sends no packet of its own (the walk steps over it)."""
    return mnemonic.startswith(CDNA_SILENT) if arch == "cdna" else mnemonic in SILENT


def walk_pcs(waves: list[Wave], insts: dict[int, Instruction], arch: str = "rdna3") -> int:
    """Set `pc` and `mnemonic` on the issues of traced waves; returns how many issues got a pc."""
    if not insts:
        return 0
    entry = min(insts)
    return sum(_walk_wave(w, insts, entry, arch) for w in waves if w.traced and w.issues)


def _walk_wave(wave: Wave, insts: dict[int, Instruction], pc: int, arch: str) -> int:
    done, branch_ops = 0, BRANCH_OPS.get(arch, BRANCH_OPS["rdna3"])
    for issue in wave.issues:
        inst = insts.get(pc)
        if issue.source != SRC_IMM_MASK:
            while inst is not None and silent(inst.mnemonic, arch):
                pc += inst.size
                inst = insts.get(pc)
        if inst is None:
            return done
        is_jump = issue.source in (SRC_INST, SRC_CDNA) and issue.category in branch_ops
        if "branch" in inst.mnemonic and not is_jump:
            return done
        issue.pc, issue.mnemonic = pc, inst.mnemonic
        done += 1
        pc += inst.size
        if is_jump and issue.category == "JUMP":
            simm16 = inst.word & 0xFFFF
            pc += 4 * (simm16 - 0x10000 if simm16 & 0x8000 else simm16)
    return done
