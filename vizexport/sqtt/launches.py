"""Profile → kernel launches with their decoded SQTT blobs, PMC record, program and kernel slice.

A launch is identified by (device, kern, exec_tag): `kern` is the program's `tag`, `exec_tag` the device's running
launch counter (sqtt-format.md §1.1), shared by all SQTT blobs and the PMC record of one launch. Its kernel slice is
found among the device's own kernel spans (not copies, not graph entries), in time order: the exec_tag-th one when its
name (or profile_key) agrees with the program, else the run-th span of that program, where run counts this program's
launches in exec_tag order.
"""
from __future__ import annotations

import logging
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ..devices import device_root, is_copy
from ..records import Capture, Profile, Program, Span
from ..summary import SQTTLaunch
from .code import CodeObject, Instruction, arch_of_target, disassemble, read_code_object, target_name
from .decode import arch_of_layout, decode
from .pcmap import walk_pcs
from .waves import BlobTrace, analyze

log = logging.getLogger(__name__)
MARKER_WRAP = 1 << 35  # a marker this much below the last is the 36-bit counter wrapping (RDNA3), not going back


class SQTTWarning(UserWarning):
    """A blob that could not be decoded to its end (named by kernel and SE)."""


@dataclass
class Launch:
    device: str
    kern: Any
    exec_tag: Any
    run: int  # 1-based: the n-th launch of this program
    name: str
    program: Program | None = None
    span: Span | None = None  # the kernel slice on the device's track
    span_row: int | None = None  # … its row in the profile's spans
    target: str | None = None  # LLVM processor, e.g. gfx1100
    arch: str = ""  # rdna3 | rdna4 | cdna
    tdiff_ns: int = 0  # the device's clock offset (GPU → host)
    sqtt: list[Capture] = field(default_factory=list)
    pmc: Capture | None = None
    blobs: list[BlobTrace] = field(default_factory=list)  # decoded sqtt, in SE order
    code: CodeObject | None = None
    insts: dict[int, Instruction] | None = None  # disassembly, None without llvm-objdump for the target

    @property
    def label(self) -> str:
        return f"{self.name} n{self.run} (kern {self.kern}, exec {self.exec_tag})"


def find_launches(prof: Profile, root: str | None = None) -> list[Launch]:
    """Every launch that has SQTT or PMC records (optionally only devices under one root), not yet decoded."""
    groups: dict[tuple, list[Capture]] = defaultdict(list)
    for c in prof.captures:
        if c.kind in ("sqtt", "pmc") and (root is None or device_root(c.device) == root):
            groups[(c.device, c.kern, c.exec_tag)].append(c)
    programs = {(p.device, p.tag): p for p in prof.programs if p.tag is not None}
    programs_any = {p.tag: p for p in prof.programs if p.tag is not None}
    runs: dict[tuple, int] = defaultdict(int)
    out = []
    for (dev, kern, tag), caps in sorted(groups.items(), key=lambda kv: (kv[0][0], _num(kv[0][2]), _num(kv[0][1]))):
        runs[(dev, kern)] += 1
        prog = programs.get((dev, kern)) or programs_any.get(kern)
        la = Launch(dev, kern, tag, runs[(dev, kern)], prog.name if prog else f"kernel {kern}", prog)
        la.sqtt = sorted((c for c in caps if c.kind == "sqtt"), key=lambda c: _num(c.se))
        la.pmc = next((c for c in caps if c.kind == "pmc"), None)
        _device(prof, la)
        out.append(la)
    _match_spans(prof, out)
    return out


def _num(x: Any) -> tuple:
    return (0, x) if isinstance(x, int) else (1, str(x))


def _device(prof: Profile, la: Launch) -> None:
    info = next((d for d in prof.devices if d.device == la.device), None)
    if info is None:
        return
    la.tdiff_ns = info.tdiff_ns
    version = (info.props or {}).get("gfx_target_version")
    if isinstance(version, int) and version > 0:
        la.target = target_name(version)
        la.arch = arch_of_target(la.target)


def kernel_spans(prof: Profile, device: str) -> list[int]:
    """Indexes into prof.spans of a device's own kernel launches (not copies, not graph entries), in time order."""
    rows = prof.spans.where_device(lambda d: d == device)
    idx = [i for i, s in zip(rows.tolist(), prof.spans.rows(rows), strict=True) if s.graph < 0 and not is_copy(s)]
    return sorted(idx, key=lambda i: prof.spans.st[i])


def _same_kernel(s: Span, la: Launch) -> bool:
    p = la.program
    if p is not None and p.profile_key is not None and s.profile_key is not None:
        return p.profile_key == s.profile_key
    return s.key.name == la.name


def _match_spans(prof: Profile, launches: list[Launch]) -> None:
    by_dev: dict[str, list[tuple[int, Span]]] = {}
    for la in launches:
        rows = by_dev.get(la.device)
        if rows is None:
            idx = kernel_spans(prof, la.device)
            rows = by_dev[la.device] = list(zip(idx, prof.spans.rows(idx), strict=True))
        tag = la.exec_tag
        if isinstance(tag, int) and 1 <= tag <= len(rows) and _same_kernel(rows[tag - 1][1], la):
            la.span_row, la.span = rows[tag - 1]
            continue
        mine = [row for row in rows if _same_kernel(row[1], la)]
        if la.run <= len(mine):
            la.span_row, la.span = mine[la.run - 1]


def decode_launch(la: Launch, strict: bool = True, disasm: bool = True) -> Launch:
    """Decode every SQTT blob of the launch (warning, never raising, on bad ones) and walk the PCs of traced waves."""
    la.blobs = [decode_blob(c, la, strict) for c in la.sqtt]
    if not la.arch:
        la.arch = next((b.arch for b in la.blobs if b.arch), "")
    if la.program is not None and la.program.lib:
        la.code = read_code_object(la.program.lib)
        if la.code.error:
            log.info("%s: %s", la.label, la.code.error)
        elif disasm and la.target:
            la.insts = disassemble(la.code, la.target)
            for b in la.blobs:
                walk_pcs(b.waves, la.insts or {}, la.arch)
    return la


def decode_blob(c: Capture, la: Launch, strict: bool = True) -> BlobTrace:
    p = decode(c.blob or b"", strict)
    if p.arch and la.arch and p.arch != la.arch and p.layout is not None:
        p.truncate(0, f"layout {p.layout} ({arch_of_layout(p.layout)}) does not match the device ({la.target})")
    bt = analyze(p, c.se if isinstance(c.se, int) else 0, bool(c.itrace))
    problems = [p.error] if p.error else []
    if not c.blob:
        problems.append("the blob is empty")
    ticks = [t for _, t in bt.markers]
    if back := sum(0 < a - b < MARKER_WRAP for a, b in pairwise(ticks)):
        problems.append(f"{back} clock marker(s) earlier than the one before (a repeated or corrupt stream)")
    header = 8 if p.arch == "cdna" else 0  # tinygrad's synthetic gfx9 header
    if p.arch and (len(p.data) - header) % 32:
        problems.append(f"{len(p.data)} bytes is not a whole number of 32-byte lines (cut short?)")
    if unended := sum(w.end is None for w in bt.waves):
        problems.append(f"{unended} wave(s) without an end")
    if problems:
        warnings.warn(SQTTWarning(f"SQTT {la.label} SE {c.se}: {'; '.join(problems)}; kept {len(p)} packets, "
                                  f"{len(bt.waves)} waves"), stacklevel=3)
    return bt


def load_launches(prof: Profile, root: str | None = None, strict: bool = True, disasm: bool = True) -> list[Launch]:
    """find_launches + decode_launch for each."""
    return [decode_launch(la, strict, disasm) for la in find_launches(prof, root)]


def launch_figures(launches: list[Launch]) -> list[SQTTLaunch]:
    """The summary's row of each launch with SQTT blobs: shader engines, waves, traced waves, instruction issues."""
    rows = []
    for la in launches:
        waves = [w for b in la.blobs for w in b.waves]
        if la.blobs:
            rows.append(SQTTLaunch(la.device, la.name, la.run, len(la.blobs), len(waves),
                                   sum(w.traced for w in waves), sum(len(w.issues) for w in waves)))
    return rows
