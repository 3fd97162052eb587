"""The kernel table of `vizexport top`: per kernel program and device, launches and duration statistics, share of
the device's time, achieved GFLOPS and GB/s, and the kind of work (categories).

A kernel program is its `profile_key` where the profile has one (0.14+), else its name; a device is a tinygrad device
string (`NULL`, `NULL:1`, `AMD:SDMA:0`). Launches are the slices with a duration (as tinygrad's viewer draws them)
of device queue and copy-engine tracks, and of `<device> Graph` tracks: a JIT graph batch (`batched N`) is a row of
that track, as in tinygrad's `viz.cli -t`, with a share of that track's time (its entries are rows of their own
device too, so the batches are kept out of the device's share).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..timeline import Role, Timeline
from .launches import Runs, by_total, device_ns, group_launches, labels, launch_tracks

P90 = 90  # the high percentile shown (numpy's default linear interpolation between launches)


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


def kernel_table(tl: Timeline, between: tuple[str, str] | None = None, device: str | None = None) -> KernelTable:
    """The kernel table of a timeline (its launch table). `between`: two marker names, keeping launches that start
    at or after the first and at or before the second; `device`: a device string or root device to keep."""
    window = marker_window(tl, *between) if between else None
    runs = group_launches(tl, True, launch_tracks(tl, device), window)
    totals = device_ns(runs)  # devices in the order of their first launching track
    runs.sort(key=by_total)
    names = labels([r.kernel for r in runs])
    rows = [_stats(r, totals[r.kernel.device], label) for r, label in zip(runs, names, strict=True)]
    all_devices = sorted({t.name for t in launch_tracks(tl) if len(t)})
    return KernelTable(rows, totals, window, between, all_devices)


def _stats(r: Runs, device_ns: int, label: str) -> KernelStats:
    k, d, total = r.kernel, r.dur, r.total_ns
    return KernelStats(k.name, k.device, k.program, label, r.category, r.count, total, total / r.count,
                       float(np.median(d)), float(np.percentile(d, P90)), int(d.min()), int(d.max()),
                       100.0 * total / device_ns if device_ns else 0.0, r.gflops, r.gbs)
