"""A run against the last N runs of its branch: each kernel's verdict (the words of analysis.stats).

Launches within one run share the run's conditions (the machine's load, its clocks, a runner of another kind), so
they are not independent evidence about another run; runs are. Each launch is taken as its log deviation from the
earlier runs' typical value — launch by launch where every run launches the kernel alike (the same count, programs
in the same order: a cold first launch against first launches), else against the median of all their launches — and
each run's level is the median of its deviations, less the run-wide shift (the median level over the run's
kernels: a busier machine moves all alike). Two tests must both reject, and the larger p-value counts:
- runs: the new level against the N earlier levels, Student's t for one new observation (the spread between runs is
  the noise, its uncertainty counted), which also gives the interval of the change;
- launches: single launches have heavy tails (a launch preempted on a shared machine takes many times as long), so
  the chance that three quarters of the new run's launches deviate as far as they do, with each launch deviating
  as often as the kernel's launches in the earlier runs do (their deviations: an empirical null); a kernel the new
  run launched once is never slower or faster (one launch is no evidence against that), and is left out of the
  count of the adjustment below (it cannot reject, whatever its launch: independent filtering).
The p-values of all kernels are adjusted together (Benjamini–Hochberg); slower or faster also needs the interval
past no change with the new run's shift kept (analysis.stats.verdict: a run where all other kernels moved does not
flag the one that stayed), and the median moved by more than one step of the durations (stats.resolution: whole-µs
timings). A kernel fewer than MIN_RUNS earlier runs launched has too few launches to say anything.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from .stats import ALPHA, CONFIDENCE, FEW, INCONCLUSIVE, MIN_EFFECT, MIN_KERNELS, Change, adjust, resolution

MIN_RUNS = 3  # earlier runs that launched the kernel: fewer give no spread worth the name
MIN_NEW_LAUNCHES = 2  # launches of the new run that can show a change (one can be a preempted launch)
MOST = 0.75  # the share of a run's launches a change must move (the launch test)
BY_LAUNCH, BY_RUN = "runs, launch by launch", "runs"
METHOD = ("each run one observation per kernel (the median log deviation of its launches from the earlier runs', "
          "launch by launch where all launch it alike), the run-wide shift set aside; the new run against the "
          f"earlier runs by Student's t for a new observation (with its {CONFIDENCE:.0%} interval), and against how "
          "often the kernel's single launches deviated that far in the earlier runs; p-values adjusted for the "
          "number of kernels (Benjamini–Hochberg)")

Launches = tuple[np.ndarray, np.ndarray]  # durations in time order, and which program each is (analysis.diff)


@dataclass
class _Kernel:
    runs: np.ndarray  # indices in `earlier` of the runs that launched it, the new run last (−1)
    deviations: list[np.ndarray]  # per such run, each launch's log deviation from the earlier runs' typical
    aligned: bool

    @property
    def levels(self) -> np.ndarray:
        return np.array([np.median(d) for d in self.deviations])


def check_kernels(earlier: list[dict[Hashable, Launches]], new: dict[Hashable, Launches], alpha: float = ALPHA,
                  min_effect: float = MIN_EFFECT) -> tuple[dict[Hashable, Change], float]:
    """Each kernel of `new` against its launches in the `earlier` runs (oldest first); and the run-wide shift of
    `new` against the typical earlier run."""
    kernels = {k: v for k in new if (v := _kernel([r.get(k) for r in earlier], new[k])) is not None}
    shifts = _shifts(kernels, len(earlier))
    out = {}
    for k, launches in new.items():
        before = [r[k][0] for r in earlier if k in r]
        moved = _moved(before, launches[0])
        out[k] = _change(kernels[k], shifts, moved) if k in kernels else Change(moved, None, None, None, FEW, None,
                                                                                None, moved)
        if k in kernels:
            out[k].stands_out = _stands_out(before, launches[0])
    adjust(list(out.values()), alpha, min_effect)
    return out, float(np.exp(shifts[-1] - np.median(shifts[:-1]))) if len(shifts) > 1 else 1.0


def _change(k: _Kernel, shifts: np.ndarray, moved: float) -> Change:
    levels = k.levels - shifts[k.runs]
    c = _predict(levels[:-1], float(levels[-1]))
    c.p = max(c.p or 0.0, _launch_p(k.deviations[-1] - shifts[-1], float(levels[-1]), _pool(k, shifts)))
    c.decides = len(k.deviations[-1]) >= MIN_NEW_LAUNCHES
    shift = float(np.exp(shifts[-1] - shifts[k.runs[:-1]].mean()))
    c.ratio, c.low, c.high = c.ratio * shift, (c.low or 0) * shift, (c.high or 0) * shift
    c.method, c.median_ratio, c.shift = BY_LAUNCH if k.aligned else BY_RUN, moved, shift
    return c


def _stands_out(earlier: list[np.ndarray], new: np.ndarray) -> bool:
    """Whether the new run's median moved from the earlier runs' by more than one step of their durations
    (stats.resolution: a kernel of 3 µs timed in whole µs moves by a third in one step)."""
    typical = float(np.median([np.median(d) for d in earlier]))
    return abs(float(np.median(new)) - typical) > resolution(np.concatenate(earlier))


def _moved(earlier: list[np.ndarray], new: np.ndarray) -> float:
    """The change of the median: the new run's median against the median of the earlier runs' medians."""
    return float(np.median(new) / np.median([np.median(d) for d in earlier])) if earlier else float("nan")


def _kernel(earlier: list[Launches | None], new: Launches) -> _Kernel | None:
    """A kernel's launches as log deviations from the earlier runs' typical launch, where MIN_RUNS runs have it."""
    runs = [i for i, r in enumerate(earlier) if r is not None and len(r[0])]
    if len(runs) < MIN_RUNS:
        return None
    kept = [earlier[i] for i in runs]
    aligned = all(len(r[0]) == len(new[0]) and np.array_equal(r[1], new[1]) for r in kept)  # type: ignore[index]
    logs = [np.log(r[0].astype(np.float64)) for r in kept] + [np.log(new[0].astype(np.float64))]  # type: ignore
    reference = np.median(np.stack(logs[:-1]), axis=0) if aligned else np.median(np.concatenate(logs[:-1]))
    return _Kernel(np.array([*runs, -1]), [x - reference for x in logs], aligned)


def _shifts(kernels: dict[Hashable, _Kernel], n: int) -> np.ndarray:
    """Each earlier run's run-wide shift (log), the new run's last: the median over the kernels of the run's level
    less that kernel's median level over the earlier runs; 0 where fewer than MIN_KERNELS kernels tell."""
    table = np.full((len(kernels), n + 1), np.nan)
    for row, k in enumerate(kernels.values()):
        levels = k.levels
        table[row, k.runs] = levels - np.median(levels[:-1])
    counts = (~np.isnan(table)).sum(axis=0)
    with warnings.catch_warnings():  # a run without any of the kernels: the median of nothing warns
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(table, axis=0) if len(kernels) else np.zeros(n + 1)
    return np.where(counts >= MIN_KERNELS, np.nan_to_num(med), 0.0)


def _pool(k: _Kernel, shifts: np.ndarray) -> np.ndarray:
    """The kernel's launch deviations in the earlier runs (each run's shift set aside), sorted: how far its single
    launches stray without a change."""
    return np.sort(np.concatenate([d - shifts[r] for r, d in zip(k.runs[:-1], k.deviations[:-1], strict=True)]))


def _launch_p(deviations: np.ndarray, level: float, pool: np.ndarray) -> float:
    """Two-sided: the chance that at least MOST of the len(deviations) launches stray as far as the least far of
    them (the ⌈3n/4⌉-th farthest, on the side of `level`), each launch as often as the pool's launches do (the count
    plus one over the pool plus one: never 0). A change of the code moves (nearly) every launch; what strays on its
    own does so now and then — a CPU's preempted launches (a sixth of one kernel's launches took 3–15× as long: half
    of six launches past 2× is no rarity, five of six is), or the launches in a stretch of a run that the machine
    slowed as a whole (half of a kernel's 14 launches 1.5× as long, the rest as ever). A quarter may stray the other
    way (a cold launch, a preempted one). A single launch is no evidence (1): one preempted launch can take any
    time."""
    from scipy import stats
    n = len(deviations)
    if n < MIN_NEW_LAUNCHES:
        return 1.0
    up = level >= 0
    far = np.sort(deviations)[::-1] if up else np.sort(deviations)
    most = math.ceil(MOST * n)
    return float(min(1.0, 2 * stats.binom.sf(most - 1, n, _as_often(pool, float(far[most - 1]), up))))


def _as_often(pool: np.ndarray, x: float, up: bool) -> float:
    """How often the sorted pool's launches stray as far as `x` upwards (`up`) or downwards, plus one over the pool
    plus one."""
    far = len(pool) - np.searchsorted(pool, x, "left") if up else np.searchsorted(pool, x, "right")
    return float((far + 1) / (len(pool) + 1))


def _predict(earlier: np.ndarray, new: float) -> Change:
    """`new` against `earlier` as one more draw: t = (new − mean) / (s·√(1 + 1/n)), n − 1 degrees of freedom."""
    from scipy import stats  # here: importing scipy.stats takes a second, and most commands never need it
    n = len(earlier)
    delta = float(new - earlier.mean())
    se = float(earlier.std(ddof=1)) * np.sqrt(1 + 1 / n)
    ratio = float(np.exp(delta))
    if se == 0:  # earlier runs all alike (copies of one run): any move is certain, none is no change
        return Change(ratio, ratio, ratio, 1.0 if delta == 0 else 0.0, INCONCLUSIVE)
    p = float(2 * stats.t.sf(abs(delta) / se, n - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * se
    return Change(ratio, float(np.exp(delta - half)), float(np.exp(delta + half)), p, INCONCLUSIVE)
