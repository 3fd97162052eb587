"""What the history keeps of a run: per kernel (name and device; its program keys kept) the durations of its launches
in time order and which program each was, per device its launches, launch time and busy time, and the run's
metadata (commit, branch, time, labels, file, tinygrad release)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis.diff import busy_ns, launch_order
from ..analysis.launches import Runs, kernel_runs
from ..analysis.report import time_range
from ..timeline import Timeline

Key = tuple[str, str]  # (device, name)


@dataclass
class KernelRecord:
    device: str
    name: str
    category: str
    programs: list[str]  # program keys by first launch ("" for launches without one); `pattern` numbers index it
    durations: np.ndarray  # int64 ns, in time order
    pattern: np.ndarray  # which program each launch is (analysis.diff.launch_order)

    @property
    def key(self) -> Key:
        return self.device, self.name

    @property
    def launches(self) -> int:
        return len(self.durations)

    @property
    def total_ns(self) -> int:
        return int(self.durations.sum())


@dataclass
class DeviceRecord:
    device: str
    launches: int
    total_ns: int
    busy_ns: int


@dataclass
class RunMeta:
    commit: str
    branch: str
    time: str  # ISO 8601, UTC (store.normal_time): text order is time order
    labels: dict[str, str]
    file: str
    release: str
    launches: int
    launch_ns: int
    span_ns: int
    id: int | None = None  # given by the store


@dataclass
class RunRecord:
    meta: RunMeta
    kernels: list[KernelRecord]
    devices: list[DeviceRecord] = field(default_factory=list)

    def launches(self) -> dict[Key, tuple[np.ndarray, np.ndarray]]:
        """Each kernel's (durations, pattern), as analysis.history compares them."""
        return {k.key: (k.durations, k.pattern) for k in self.kernels}


def run_record(tl: Timeline, meta: RunMeta) -> RunRecord:
    """A run's record from its timeline (its launch table); `meta`'s launch figures are filled in here."""
    t0, t1 = time_range(tl)
    meta.span_ns = t1 - t0
    return launches_record(kernel_runs(tl), meta)


def launches_record(launches: list[Runs], meta: RunMeta) -> RunRecord:
    """A run's record from its launches (analysis.launches.kernel_runs); `meta`'s launch counts are filled in."""
    groups: dict[Key, list[Runs]] = {}
    for r in launches:
        groups.setdefault((r.kernel.device, r.kernel.name), []).append(r)
    kernels = [_kernel(runs) for runs in groups.values()]
    by_device: dict[str, list[Runs]] = {}
    for runs in groups.values():
        by_device.setdefault(runs[0].kernel.device, []).extend(runs)
    devices = [DeviceRecord(d, sum(r.count for r in rs), sum(r.total_ns for r in rs), busy_ns(rs))
               for d, rs in by_device.items()]
    meta.launches, meta.launch_ns = sum(k.launches for k in kernels), sum(k.total_ns for k in kernels)
    return RunRecord(meta, kernels, devices)


def _kernel(runs: list[Runs]) -> KernelRecord:
    durations, pattern = launch_order(runs)
    by_first = sorted(range(len(runs)), key=lambda i: (int(runs[i].ts[0]), i))  # as launch_order numbers them
    first = runs[0]
    return KernelRecord(first.kernel.device, first.kernel.name, first.category,
                        [runs[i].kernel.program or "" for i in by_first], durations.astype(np.int64),
                        pattern.astype(np.int64))
