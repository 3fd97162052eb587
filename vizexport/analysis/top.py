"""The kernel table of `vizexport top`: per kernel program and device, launches and duration statistics, share of
the device's time, achieved GFLOPS and GB/s, and the kind of work (categories).

A kernel program is its `profile_key` where the profile has one (0.14+), else its name; a device is a tinygrad device
string (`NULL`, `NULL:1`, `AMD:SDMA:0`). Launches are the slices with a duration (as tinygrad's viewer draws them)
of device queue and copy-engine tracks, and of `<device> Graph` tracks: a JIT graph batch (`batched N`) is a row of
that track, as in tinygrad's `viz.cli -t`, with a share of that track's time (its entries are rows of their own
device too, so the batches are kept out of the device's share).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..records import Context
from ..timeline import ARG_GBS_MEM, ARG_GFLOPS, ARG_PROGRAM, Role, Timeline, Track
from .categories import category
from .programs import ProgramIndex

P90 = 90  # the high percentile shown (numpy's default linear interpolation between launches)
KEY_TEXT = 8  # hex digits of a program key shown beside a name that several programs share
LAUNCH_ROLES = (Role.QUEUE, Role.COPY, Role.GRAPH)


@dataclass
class KernelStats:
    name: str
    device: str
    program: str | None  # the program's key (hex), where the profile has one
    label: str  # the name, with the program's short key where several programs on the device share it
    category: str
    launches: int
    total_ns: int
    mean_ns: float
    median_ns: float | None  # None for the row summing the rest
    p90_ns: float | None
    min_ns: int
    max_ns: int
    share: float  # % of the device's time (the sum of its launches' durations)
    gflops: float | None  # achieved, time-weighted over the launches that have estimates
    gbs: float | None


@dataclass
class KernelTable:
    kernels: list[KernelStats]  # longest total first
    device_ns: dict[str, int]  # per device: the sum of its launches' durations
    window: tuple[int, int] | None = None  # (start, end) ns of --between: launches starting inside, ends included
    markers: tuple[str, str] | None = None
    devices: list[str] = field(default_factory=list)  # every device with launches, before --device

    def top(self, n: int | None) -> tuple[list[KernelStats], KernelStats | None]:
        """The first `n` rows (all for None or a negative n) and one row summing the rest (None if nothing is left)."""
        if n is None or n < 0 or n >= len(self.kernels):
            return self.kernels, None
        rest = self.kernels[n:]
        total, launches = sum(k.total_ns for k in rest), sum(k.launches for k in rest)
        busy = sum(self.device_ns.values())
        other = KernelStats("Other", "", None, "Other", "", launches, total, total / launches, None, None,
                            min(k.min_ns for k in rest), max(k.max_ns for k in rest),
                            100.0 * total / busy if busy else 0.0, None, None)
        return self.kernels[:n], other


@dataclass
class _Group:
    name: str
    device: str
    program: str | None
    role: Role
    durs: list[int] = field(default_factory=list)
    flops_ns: float = 0.0  # Σ GFLOPS·dur over launches with estimates
    mem_ns: float = 0.0
    weighted_ns: int = 0


def marker_window(tl: Timeline, start: str, end: str) -> tuple[int, int]:
    """(time of the first marker named `start`, time of the first named `end`), as tinygrad's `viz.cli --interval`
    picks them."""
    first: dict[str, int] = {}
    for t in tl.tracks:
        if t.role == Role.MARKERS:
            for i in range(len(t)):
                name = tl.strings[t.names[i]]
                first[name] = min(first.get(name, t.ts[i]), t.ts[i])
    for m in (start, end):
        if m not in first:
            known = ", ".join(repr(x) for x in sorted(first, key=first.__getitem__)) or "none"
            raise InputError(f"{tl.title}: no marker named {m!r} (markers: {known})")
    if first[end] < first[start]:
        raise InputError(f"{tl.title}: marker {end!r} comes before marker {start!r}")
    return first[start], first[end]


def launch_tracks(tl: Timeline, device: str | None = None) -> list[Track]:
    """Device queue, copy-engine and graph-batch tracks; `device`: only those of that device string or of its root
    device."""
    out = [t for t in tl.tracks if t.role in LAUNCH_ROLES]
    if device is None:
        return out
    roots = {t.uuid: t.name for t in tl.tracks if not t.parent}
    return [t for t in out if device in (t.name, roots.get(t.parent))]


def kernel_table(tl: Timeline, contexts: Sequence[Context] | None = None, between: tuple[str, str] | None = None,
                 device: str | None = None) -> KernelTable:
    """The kernel table of a timeline. `contexts`: the rewrites trace's, to find each program's UOps (a WMMA makes
    a tensor-core kernel); `between`: two marker names, keeping launches that start at or after the first and at or
    before the second; `device`: a device string or root device to keep."""
    window = marker_window(tl, *between) if between else None
    groups: dict[tuple[str, str], _Group] = {}
    device_ns: dict[str, int] = defaultdict(int)
    for t in launch_tracks(tl, device):
        _collect(tl, t, window, groups, device_ns)
    index = ProgramIndex(contexts) if contexts else None
    shared = defaultdict(set)
    for g in groups.values():
        shared[(g.device, g.name)].add(g.program)
    rows = [_stats(g, device_ns[g.device], len(shared[(g.device, g.name)]) > 1, contexts, index)
            for g in groups.values()]
    rows.sort(key=lambda k: (-k.total_ns, k.device, k.name, k.program or ""))
    all_devices = sorted({t.name for t in launch_tracks(tl) if len(t)})
    return KernelTable(rows, dict(device_ns), window, between, all_devices)


def _collect(tl: Timeline, t: Track, window: tuple[int, int] | None, groups: dict[tuple[str, str], _Group],
             device_ns: dict[str, int]) -> None:
    ts, dur = np.frombuffer(t.ts, np.int64), np.frombuffer(t.dur, np.int64)
    keep = dur > 0
    if window is not None:
        keep &= (ts >= window[0]) & (ts <= window[1])
    for i in np.flatnonzero(keep).tolist():
        name, args, d = tl.strings[t.names[i]], t.args.get(i, {}), int(dur[i])
        program = args.get(ARG_PROGRAM)
        g = groups.get((t.name, program or name))
        if g is None:
            g = groups[(t.name, program or name)] = _Group(name, t.name, program, t.role)
        g.durs.append(d)
        device_ns[t.name] += d
        if ARG_GFLOPS in args:
            g.flops_ns += args[ARG_GFLOPS] * d
            g.mem_ns += args.get(ARG_GBS_MEM, 0.0) * d
            g.weighted_ns += d


def _stats(g: _Group, device_ns: int, shared: bool, contexts: Sequence[Context] | None,
           index: ProgramIndex | None) -> KernelStats:
    d = np.array(g.durs, np.int64)
    total = int(d.sum())
    found = index.find(g.program, g.name) if index is not None else None
    uops = contexts[found].program if contexts is not None and found is not None else None
    label = f"{g.name} [{g.program[:KEY_TEXT]}]" if shared and g.program else g.name
    w = g.weighted_ns
    return KernelStats(g.name, g.device, g.program, label, category(g.name, g.role, uops), len(d), total,
                       total / len(d), float(np.median(d)), float(np.percentile(d, P90)), int(d.min()), int(d.max()),
                       100.0 * total / device_ns if device_ns else 0.0, g.flops_ns / w if w else None,
                       g.mem_ns / w if w else None)
