"""A run against the last N runs of its branch: per kernel (name and device) the verdict of analysis.history, with
the fields a diff's kernels have in JSON (name, device, verdict, ratio, interval, p), and per device its launch time
against the earlier runs' median."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..analysis.history import METHOD, MIN_RUNS, check_kernels
from ..analysis.stats import ALPHA, FASTER, MIN_EFFECT, SLOWER
from .records import Key, RunMeta, RunRecord

NEW = "new"  # a kernel no earlier run launched
PROGRAM, PROGRAM_CHANGED = "same", "program changed"


@dataclass
class KernelVerdict:
    name: str
    device: str
    category: str
    match: str  # PROGRAM: the program keys of the latest earlier run that launched it; PROGRAM_CHANGED; NEW
    programs: list[str]
    launches: int
    runs: int  # earlier runs that launched it
    total_ns: int
    median_ns: float
    earlier_median_ns: float | None  # the median of the earlier runs' medians
    ratio: float | None  # the change (analysis.history), run-wide shift included
    interval: list[float] | None
    p: float | None
    q: float | None  # p adjusted over the check's kernels (Benjamini–Hochberg)
    method: str | None
    verdict: str


@dataclass
class DeviceTotal:
    device: str
    launches: int
    total_ns: int
    busy_ns: int
    earlier_total_ns: float | None  # the median over the earlier runs that used the device
    earlier_busy_ns: float | None


@dataclass
class Check:
    run: RunMeta
    earlier: list[RunMeta]  # oldest first
    method: str
    alpha: float
    min_effect: float
    min_runs: int
    shift: float  # the run-wide change against the typical earlier run (set aside for the verdicts)
    verdicts: dict[str, int]
    kernels: list[KernelVerdict]  # significant changes first, then by total time
    devices: list[DeviceTotal] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)  # kernels (name on device) the last earlier run had, not this

    def slowdowns(self, pct: float) -> list[KernelVerdict]:
        """Significant slowdowns whose change is more than `pct` percent."""
        return [k for k in self.kernels if k.verdict == SLOWER and k.ratio is not None and k.ratio - 1 > pct / 100]


def check_run(run: RunRecord, earlier: list[RunRecord], alpha: float = ALPHA, min_effect: float = MIN_EFFECT
              ) -> Check:
    """`run` against the `earlier` runs (oldest first)."""
    changes, shift = check_kernels([r.launches() for r in earlier], run.launches(), alpha, min_effect)
    programs = _last_programs(earlier)
    index = [{k.key: k for k in r.kernels} for r in earlier]
    kernels = []
    for k in run.kernels:
        c = changes[k.key]
        medians = [float(np.median(ks[k.key].durations)) for ks in index if k.key in ks]
        before = programs.get(k.key)
        match = NEW if before is None else PROGRAM if sorted(before) == sorted(k.programs) else PROGRAM_CHANGED
        kernels.append(KernelVerdict(
            k.name, k.device, k.category, match, k.programs, k.launches, len(medians), k.total_ns,
            float(np.median(k.durations)), float(np.median(medians)) if medians else None,
            c.ratio if medians else None, [c.low, c.high] if c.low is not None and c.high is not None else None,
            c.p, c.q, c.method, NEW if not medians else c.verdict))
    kernels.sort(key=lambda k: (k.verdict not in (SLOWER, FASTER), -k.total_ns, k.device, k.name))
    vanished = sorted(f"{k.name} on {k.device}" for k in (earlier[-1].kernels if earlier else [])
                      if k.key not in changes)
    return Check(run.meta, [r.meta for r in earlier], METHOD, alpha, min_effect, MIN_RUNS, shift,
                 dict(Counter(k.verdict for k in kernels)), kernels, _devices(run, earlier), vanished)


def _last_programs(earlier: list[RunRecord]) -> dict[Key, list[str]]:
    """Each kernel's program keys in the latest earlier run that launched it."""
    out: dict[Key, list[str]] = {}
    for r in earlier:
        out.update({k.key: k.programs for k in r.kernels})
    return out


def _devices(run: RunRecord, earlier: list[RunRecord]) -> list[DeviceTotal]:
    out = []
    for d in run.devices:
        seen = [x for r in earlier for x in r.devices if x.device == d.device]
        out.append(DeviceTotal(d.device, d.launches, d.total_ns, d.busy_ns,
                               float(np.median([x.total_ns for x in seen])) if seen else None,
                               float(np.median([x.busy_ns for x in seen])) if seen else None))
    return sorted(out, key=lambda t: -t.total_ns)
