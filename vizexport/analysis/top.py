"""The kernel table of `vizexport top`: per kernel program (or name, `--by name`) and device, launches and duration
statistics, share of the device's time, achieved GFLOPS and GB/s, and the kind of work (categories).

A kernel program is its `profile_key` where the profile has one (0.14+), else its name; a device is a tinygrad device
string (`NULL`, `NULL:1`, `AMD:SDMA:0`). Launches are the slices with a duration (as tinygrad's viewer draws them)
of device queue and copy-engine tracks. JIT graph batches (`batched N` on a `<device> Graph` track) are a table of
their own: each entry of a batch is a launch of its device too, so a batch among the kernels would count its time
twice and take a share of a track that is not the device's. `--host` tables the host's spans (TINY, USER, GC)
instead, as tinygrad's `viz.cli -t` lists them: nested spans each count whole, so a track's shares are of the sum.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..records import Profile
from ..timeline import Role, Timeline, Track
from .launches import DEVICE_ROLES, Runs, by_total, device_ns, group_launches, labels, launch_tracks

P90 = 90  # the high percentile shown (numpy's default linear interpolation between launches)
BY_PROGRAM, BY_NAME = "program", "name"  # rows per program key (a name's programs apart), or per name as tinygrad
GROUPINGS = (BY_PROGRAM, BY_NAME)


@dataclass
class KernelStats:
    name: str
    device: str
    program: str | None  # the program's key (hex), where the profile has one and rows are by program
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
    gflops: float | None  # achieved: Σ rate × duration over the launches with estimates / Σ duration of all
    gbs: float | None  # memory GB/s, alike
    gbs_lds: float | None = None  # local (shared) memory GB/s, alike


@dataclass
class KernelTable:
    kernels: list[KernelStats]  # longest total first
    device_ns: dict[str, int]  # per device: the sum of its launches' durations
    window: tuple[int, int] | None = None  # (start, end) ns of --between: launches starting inside, ends included
    markers: tuple[str, str] | None = None
    devices: list[str] = field(default_factory=list)  # every device with launches, before --device
    batches: list[KernelStats] = field(default_factory=list)  # JIT graph batches, longest total first
    batch_ns: dict[str, int] = field(default_factory=dict)  # per graph track: the sum of its batches' durations
    by: str = BY_PROGRAM
    host: bool = False  # rows are the host's spans (TINY, USER, GC), not device launches

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


def kernel_table(tl: Timeline, between: tuple[str, str] | None = None, device: str | None = None,
                 by: str = BY_PROGRAM, host: bool = False) -> KernelTable:
    """The kernel table of a timeline (its launch table). `between`: two marker names, keeping launches that start
    at or after the first and at or before the second; `device`: a device string or root device to keep; `by`:
    BY_PROGRAM or BY_NAME; `host`: the host's spans (TINY, USER, GC; `device` one of them) instead of device
    launches."""
    if by not in GROUPINGS:
        raise ValueError(f"no grouping {by!r} (groupings: {', '.join(GROUPINGS)})")
    window = marker_window(tl, *between) if between else None
    if host:
        tracks = [t for t in tl.tracks if t.role == Role.HOST and t.kind == "slice"]
        kept = [t for t in tracks if device is None or t.name == device]
        rows, totals = _rows(tl, kept, BY_NAME, window)
        return KernelTable(rows, totals, window, between, sorted({t.name for t in tracks if len(t)}), by=by, host=True)
    launching = launch_tracks(tl, device)
    rows, totals = _rows(tl, [t for t in launching if t.role in DEVICE_ROLES], by, window)
    batches, batch_ns = _rows(tl, [t for t in launching if t.role == Role.GRAPH], BY_NAME, window)
    all_devices = sorted({t.name for t in launch_tracks(tl) if len(t) and t.role in DEVICE_ROLES})
    return KernelTable(rows, totals, window, between, all_devices, batches, batch_ns, by)


def _rows(tl: Timeline, tracks: list[Track], by: str, window: tuple[int, int] | None
          ) -> tuple[list[KernelStats], dict[str, int]]:
    """The rows of `tracks`' slices grouped per (track name, name[, program]), longest total first, and each track
    name's summed time."""
    runs = group_launches(tl, by == BY_PROGRAM, tracks, window)
    totals = device_ns(runs)  # devices in the order of their first launching track
    runs.sort(key=by_total)
    names = labels([r.kernel for r in runs])
    return [_stats(r, totals[r.kernel.device], label) for r, label in zip(runs, names, strict=True)], totals


def _stats(r: Runs, device_ns: int, label: str) -> KernelStats:
    k, d, total = r.kernel, r.dur, r.total_ns
    gflops, gbs, lds = _rates(r)
    return KernelStats(k.name, k.device, k.program, label, r.category, r.count, total, total / r.count,
                       float(np.median(d)), float(np.percentile(d, P90)), int(d.min()), int(d.max()),
                       100.0 * total / device_ns if device_ns else 0.0, gflops, gbs, lds)


def _rates(r: Runs) -> tuple[float | None, float | None, float | None]:
    """GFLOPS, GB/s and LDS GB/s over all the kernel's launches, as tinygrad's `viz.cli -t` sums them: the work of the
    launches with an estimate (unrounded, the launch table's) over the summed duration of all (FLOPs per ns are
    GFLOPS); None where no launch has the figure."""
    total = r.total_ns
    g, m, lds = (None if s is None or not total else s / total for s in r.work)
    return g, m, lds


def untimed_launches(prof: Profile, table: KernelTable) -> dict[str, int]:
    """Per device the host launched work on (its exec events) with no launch timed on the device (whatever the
    --between window and --device): how many exec events it has."""
    n = Counter(pt.device for pt in prof.points if pt.kind == "exec")
    return {d: c for d, c in sorted(n.items()) if d not in table.devices}


def launches_note(prof: Profile, table: KernelTable) -> str | None:
    """Why launches the host made are missing from a device table (None where none is, or for host spans)."""
    if table.host:
        return None
    untimed = untimed_launches(prof, table)
    if not untimed:
        return None if table.devices else "no device launches: the profile holds no work timed on a device"
    listed = ", ".join(f"{d} {n}" for d, n in untimed.items())
    whys = [prof.untimed_why[r] for r in dict.fromkeys(d.split(":")[0] for d in untimed) if r in prof.untimed_why]
    why = whys[0] if whys else "the device recorded no time for them"  # the reader knows the release
    return f"not timed on the device: launches the host made (exec events: {listed}); {why}"
