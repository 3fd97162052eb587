"""How busy each device was: busy and idle time, the largest gaps, copies hidden behind compute, time per category."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..devices import natural
from ..launchtable import CATEGORIES, COPY
from .intervals import merge, overlap
from .launches import Runs

MAX_GAPS = 5
TIME_BINS = 100
ALL = "all devices"


@dataclass
class Gap:
    """An idle stretch of a device between two launches: start relative to the run's start (ns)."""

    start_ns: int
    dur_ns: int
    after: str  # the launch that ended when the gap began
    before: str  # the launch that ended it


@dataclass
class DeviceUse:
    """One device (track name, its lanes together) between its first launch's start and its last launch's end."""

    device: str
    launches: int
    start_ns: int  # relative to the run's start
    active_ns: int  # last end − first start
    busy_ns: int  # the union of its launches
    idle_ns: int
    busy_pct: float
    gaps: list[Gap] = field(default_factory=list)  # the longest, longest first
    busy_over_time: list[float] = field(default_factory=list)  # busy share of TIME_BINS equal stretches of the run


@dataclass
class Overlap:
    """Copies against compute on a device root (or all devices): how much copy time ran while compute ran."""

    device: str
    compute_ns: int
    copy_ns: int
    both_ns: int
    hidden_pct: float  # of the copy time, the share that overlapped compute


@dataclass
class CategoryUse:
    device: str
    category: str
    launches: int
    total_ns: int
    pct: float  # of the device's summed launch time


def device_use(runs: list[Runs], t0: int, t1: int, max_gaps: int = MAX_GAPS) -> list[DeviceUse]:
    """Busy time = the length of the union of a device's launches; idle = its active window minus that. The run
    [t0, t1) is cut in TIME_BINS stretches for the busy share over time."""
    out = []
    for device, mine in _by_device(runs).items():
        st = np.concatenate([r.ts for r in mine])
        en = np.concatenate([r.ts + r.dur for r in mine])
        names = np.concatenate([np.full(r.count, r.kernel.label(), object) for r in mine])
        a, b = merge(st, en)
        busy, active = int((b - a).sum()), int(b[-1] - a[0])
        out.append(DeviceUse(device, len(st), int(a[0] - t0), active, busy, active - busy,
                             100.0 * busy / active if active else 100.0, _gaps(a, b, st, en, names, t0, max_gaps),
                             _over_time(a, b, t0, t1)))
    return out


def _over_time(a: np.ndarray, b: np.ndarray, t0: int, t1: int) -> list[float]:
    """The busy share of each of TIME_BINS equal stretches of [t0, t1), from the merged busy intervals [a, b)."""
    edges = np.linspace(t0, max(t1, t0 + TIME_BINS), TIME_BINS + 1)
    busy = np.cumsum(np.concatenate(([0], b - a)))  # busy time up to each interval's end

    def upto(x: np.ndarray) -> np.ndarray:  # busy time before each x
        k = np.searchsorted(a, x, "right")  # intervals started by x
        return busy[k] - np.maximum(b[np.maximum(k - 1, 0)] - x, 0) * (k > 0)
    return (np.diff(upto(edges)) / np.diff(edges)).round(4).tolist()


def _gaps(a: np.ndarray, b: np.ndarray, st: np.ndarray, en: np.ndarray, names: np.ndarray, t0: int, n: int
          ) -> list[Gap]:
    """The n longest gaps between merged runs, each named by the launch ending at its start and the one after."""
    if len(a) < 2:
        return []
    length = a[1:] - b[:-1]
    longest = np.argsort(-length, kind="stable")[:n]
    by_end, by_start = np.argsort(en, kind="stable"), np.argsort(st, kind="stable")
    out = []
    for g in longest.tolist():
        last = by_end[np.searchsorted(en[by_end], b[g], "right") - 1]
        nxt = by_start[np.searchsorted(st[by_start], a[g + 1], "left")]
        out.append(Gap(int(b[g] - t0), int(length[g]), str(names[last]), str(names[nxt])))
    return out


def copy_overlap(runs: list[Runs], root_of: dict[str, str]) -> list[Overlap]:
    """Per device root (a device with its copy engines) and for all devices together."""
    groups: dict[str, list[Runs]] = defaultdict(list)
    for r in runs:
        groups[root_of.get(r.kernel.device, r.kernel.device)].append(r)
    out = [_overlap(root, mine) for root, mine in groups.items()]
    if len(groups) > 1:
        out.append(_overlap(ALL, runs))
    return [o for o in out if o.copy_ns and o.compute_ns]


def _overlap(device: str, runs: list[Runs]) -> Overlap:
    def union(rs: list[Runs]) -> tuple[np.ndarray, np.ndarray]:
        st = np.concatenate([r.ts for r in rs]) if rs else np.zeros(0, np.int64)
        return merge(st, np.concatenate([r.ts + r.dur for r in rs]) if rs else st)
    copies, compute = union([r for r in runs if r.category == COPY]), union([r for r in runs if r.category != COPY])
    copy_ns, compute_ns = int((copies[1] - copies[0]).sum()), int((compute[1] - compute[0]).sum())
    both = overlap(copies, compute)
    return Overlap(device, compute_ns, copy_ns, both, 100.0 * both / copy_ns if copy_ns else 0.0)


def category_use(runs: list[Runs]) -> list[CategoryUse]:
    """Launches and summed time per device and category, categories in CATEGORIES order."""
    out = []
    for device, mine in _by_device(runs).items():
        total = sum(r.total_ns for r in mine)
        for cat in CATEGORIES:
            rs = [r for r in mine if r.category == cat]
            if rs:
                ns = sum(r.total_ns for r in rs)
                out.append(CategoryUse(device, cat, sum(r.count for r in rs), ns, 100.0 * ns / total if total else 0))
    return out


def _by_device(runs: list[Runs]) -> dict[str, list[Runs]]:
    out: dict[str, list[Runs]] = defaultdict(list)
    for r in runs:
        out[r.kernel.device].append(r)
    return dict(sorted(out.items(), key=lambda kv: natural(kv[0])))
