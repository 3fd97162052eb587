"""Per-instruction tables of instruction-traced waves (tinygrad's `sqtt-insts`): for each instruction of the program,
how often a wave ran it and, per run, when (Clk), after how long a gap (Idle), for how long (Dur) and how much of that
was stall, from our own decoded packets (RDNA and CDNA).

tinygrad fills these tables from AMD's rocprof-trace-decoder; its rules, as the fixtures show them (test_insts.py
checks every row of every traced wave against tinygrad's tables):
  * an instruction is ready at the first WAVERDY of its slot after the wave's previous issue (RDNA3 reports WAVERDY
    one cycle late), else when its packet says it issued; IMMEDIATE packets (s_waitcnt, s_nop, s_clause: reported
    when done) and barriers are ready no later than the previous instruction ended (the wave's first issue aside);
  * Clk is that ready time, Stall the cycles from it to the packet, Dur the category's own cycles (the _N of
    VALUB_4, WMMA_16, SGMEM_WR_2, ...; else 1) plus the stall, Idle the gap since the previous instructions ended;
  * RDNA4's s_barrier_wait (no packet) runs from the previous end to the next instruction, without stall, and
    s_endpgm (no packet either) from the previous end to the wave's end;
  * a row's Type is its first run's category, Cycles and Stall the sums over its runs.

CDNA (gfx9): the walk gives rocprof's rows (PC, instruction, hits, type), but not its cycles: rocprof's gfx950 rows
are a model (back-to-back issues 4 cycles apart, stalls placed on the instruction that waits), 0–92 cycles off the
packets' own times. Ours are the packets': Clk when CDNA_INST says it issued, Dur one issue (4 cycles: a wave64 on a
SIMD16), a packet-less s_waitcnt/s_nop from the previous end to the next issue, all of it stall, s_endpgm (whose
packet comes when the wave is done) from the previous end to the wave's.
"""
from __future__ import annotations

import re

from ..records import InstRow, WaveInsts
from .cfg import branch_target
from .code import Instruction
from .launches import Launch
from .pcmap import silent
from .waves import Issue, Wave

RDNA3_READY_LAG = 1  # cycles from an RDNA3 wave being ready to its WAVERDY packet
CDNA_ISSUE_CYCLES = 4  # a wave64 instruction on a 16-lane SIMD
_COST = re.compile(r"_(\d+)$")  # an INST category's own cycles: VALUB_4, WMMA_16, LDS_WR_2, ...
_WAIT_FIRST = ("IMMEDIATE", "BARRIER")  # reported when done: ready when the previous instruction ended
BARRIER_WAIT, ENDPGM = "s_barrier_wait", "s_endpgm"
# rocprof's instruction categories of our INST / VALUINST / IMMEDIATE / CDNA_INST ones (by name prefix, first match)
_TYPES = (("IMMEDIATE", "IMMED"), ("BARRIER_SIGNAL", "MESSAGE"), ("BARRIER_JOIN", "MESSAGE"), ("BARRIER", "IMMED"),
          ("MESSAGE", "MESSAGE"), ("OTHER_MSG", "MESSAGE"), ("JUMP_NO", "NEXT"), ("NEXT", "NEXT"), ("JUMP", "JUMP"),
          ("CALL", "JUMP"), ("SALU", "SALU"), ("SMEM", "SMEM"), ("VALU", "VALU"), ("WMMA", "VALU"),
          ("VINTERP", "VALU"), ("SGMEM", "VMEM"), ("VMEM", "VMEM"), ("BUF", "VMEM"), ("FLAT", "FLAT"), ("LDS", "LDS"))


def inst_type(category: str) -> str:
    """rocprof's category name for one of ours (unknown ones as they are)."""
    return next((t for prefix, t in _TYPES if category.startswith(prefix)), category)


def _cost(category: str) -> int:
    m = _COST.search(category)
    return int(m.group(1)) if m else 1


class _Table:
    """Rows of one wave, filled run by run; `end` is when the wave's instructions so far have ended."""

    def __init__(self, wave: Wave, insts: dict[int, Instruction]) -> None:
        self.base = min(insts)
        self.rows = {a: InstRow(a - self.base, i.text, 0, 0, 0, "") for a, i in sorted(insts.items())}
        self.end = wave.start

    def run(self, pc: int, clk: int, dur: int, stall: int, typ: str) -> None:
        row = self.rows[pc]
        row.runs.append((row.hits, clk, max(0, clk - self.end), dur, stall))
        row.hits, row.cycles, row.stall, row.type = row.hits + 1, row.cycles + dur, row.stall + stall, row.type or typ
        self.end = max(self.end, clk + dur)


def _next_pc(issue: Issue, insts: dict[int, Instruction]) -> int:
    inst = insts[issue.pc]
    target = branch_target(inst) if issue.category == "JUMP" else None
    return target if target is not None else issue.pc + inst.size


def _skipped(pc: int | None, stop: int | None, insts: dict[int, Instruction], arch: str) -> list[int]:
    """The packet-less instructions from pc on, up to `stop` (None: as many as there are)."""
    out = []
    while pc is not None and pc != stop and pc in insts and silent(insts[pc].mnemonic, arch):
        out.append(pc)
        pc += insts[pc].size
    return out


def wave_table(wave: Wave, insts: dict[int, Instruction], arch: str, launch: str) -> WaveInsts:
    """The per-instruction table of one traced wave whose issues have PCs (pcmap.walk_pcs)."""
    if arch == "cdna":
        return _cdna_table(wave, insts, launch)
    table, lag = _Table(wave, insts), RDNA3_READY_LAG if arch == "rdna3" else 0
    ready, k, last, pc = wave.ready, 0, wave.start, min(insts)
    for n, issue in enumerate(wave.issues):
        if issue.pc is None:  # the walk lost its way: later issues have no instruction
            break
        while k < len(ready) and ready[k] <= last:
            k += 1
        clk = ready[k] - lag if k < len(ready) and ready[k] <= issue.time else issue.time
        for a in _skipped(pc, issue.pc, insts, arch):
            if insts[a].mnemonic == BARRIER_WAIT:
                table.run(a, table.end, max(clk - table.end, 0), 0, "IMMED")
        if n and issue.category in _WAIT_FIRST:
            clk = min(clk, table.end)
        table.run(issue.pc, clk, _cost(issue.category) + issue.time - clk, issue.time - clk, inst_type(issue.category))
        last, pc = issue.time, _next_pc(issue, insts)
    else:
        _end(table, wave, insts, pc, arch)
    return _wave_insts(table, wave, launch)


def _cdna_table(wave: Wave, insts: dict[int, Instruction], launch: str) -> WaveInsts:
    """A CDNA wave's table, timed by its packets (see the module's docstring)."""
    table, pc = _Table(wave, insts), min(insts)
    for issue in wave.issues:
        if issue.pc is None:
            break
        _waits(table, _skipped(pc, issue.pc, insts, "cdna"), issue.time)
        if issue.mnemonic == ENDPGM:  # reported when the wave is done
            _endpgm(table, issue.pc, max(issue.time + CDNA_ISSUE_CYCLES, wave.end or 0), inst_type(issue.category))
            break
        table.run(issue.pc, issue.time, CDNA_ISSUE_CYCLES, 0, inst_type(issue.category))
        pc = _next_pc(issue, insts)
    else:
        _waits(table, _skipped(pc, None, insts, "cdna"), table.end)  # before s_endpgm: no packet to wait for
        _end(table, wave, insts, pc, "cdna")
    return _wave_insts(table, wave, launch)


def _waits(table: _Table, pcs: list[int], until: int) -> None:
    """CDNA's packet-less s_waitcnt/s_nop: the first from the previous end to `until`, all of it stall."""
    for a in pcs:
        wait = max(until - table.end, 0)
        table.run(a, table.end, wait, wait, "IMMED")


def _wave_insts(table: _Table, wave: Wave, launch: str) -> WaveInsts:
    return WaveInsts(launch, wave.se, wave.cu, wave.simd, wave.slot, wave.start,
                     (wave.end if wave.end is not None else wave.start) - wave.start, list(table.rows.values()))


def _end(table: _Table, wave: Wave, insts: dict[int, Instruction], pc: int, arch: str) -> None:
    """s_endpgm, which sends no packet: from the last instruction's end to the wave's."""
    skipped = _skipped(pc, None, insts, arch)
    at = skipped[-1] + insts[skipped[-1]].size if skipped else pc
    if wave.end is not None and at in insts and insts[at].mnemonic == ENDPGM:
        _endpgm(table, at, wave.end, "MESSAGE")


def _endpgm(table: _Table, pc: int, until: int, typ: str) -> None:
    """s_endpgm runs from the previous instruction's end to the wave's end, without stall."""
    table.run(pc, table.end, max(until - table.end, 0), 0, typ)


def launch_tables(la: Launch) -> list[WaveInsts]:
    """A table per instruction-traced wave of a decoded launch with a PC walk (none without a listing)."""
    if not la.insts:
        return []
    label = f"n{la.run} (exec {la.exec_tag})"
    return [wave_table(w, la.insts, la.arch, label) for b in la.blobs for w in b.waves
            if w.traced and w.issues and w.issues[0].pc is not None]
