"""A run against the last N runs of its branch: each kernel's verdict (the words of analysis.stats).

Launches within one run share the run's conditions (the machine's load, its clocks, a runner of another kind), so
they are not independent evidence about another run; runs are. Each launch is taken as its log deviation from the
earlier runs' typical value — launch by launch where every run launches the kernel alike (the same count, programs
in the same order: a cold first launch against first launches), else against the median of all their launches — and
each run's level is the median of its deviations. The run-wide shift (a busier machine moves all kernels alike) is
told for each kernel by the other kernels only (the median of their levels: a kernel's own change would move a
shift it is part of), with its uncertainty (how far those others scatter in the run: four kernels that disagree tell
a poor shift). Two tests must both reject, and the larger p-value counts:
- runs: the new level against the N earlier levels, Student's t for one new observation (the spread between runs is
  the noise, its uncertainty counted), which also gives the interval of the change; the levels are taken less the
  shift, its uncertainty in the new run beyond the earlier runs' added to the variance, or as they are, whichever
  predicts the new level with the smaller variance (from the earlier runs' spread and the shift's uncertainty, not
  from the kernel's new level): a CPU's 0.5 ms kernel does not follow the shift its short kernels' jitter makes;
- launches: single launches have heavy tails (a launch preempted on a shared machine takes many times as long), so
  the chance that three quarters of the new run's launches deviate as far as they do beyond the shift, with each
  launch deviating as often as the kernel's launches in the earlier runs do (their deviations: an empirical null);
  a kernel the new run launched once is never slower or faster (one launch is no evidence against that), and is
  left out of the count of the adjustment below (it cannot reject, whatever its launch: independent filtering).
The p-values of all kernels are adjusted together (Benjamini–Hochberg, weighted half evenly and half by the kernels'
device time in the earlier runs: the weights do not depend on the new run); slower or faster also needs the change
beyond the shift past Z standard errors of the new run's shift, the interval past no change with the new run's
shift kept (analysis.stats.verdict: a run where all other kernels moved does not flag the one that stayed), and the
median moved by more than one step of the durations (stats.resolution: whole-µs timings). A kernel fewer than
MIN_RUNS earlier runs launched has too few launches to say anything.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from .stats import ALPHA, CONFIDENCE, FEW, INCONCLUSIVE, MAD_SD, MIN_EFFECT, MIN_KERNELS, Change, Z, adjust, resolution

MIN_RUNS = 3  # earlier runs that launched the kernel: fewer give no spread worth the name
MIN_NEW_LAUNCHES = 2  # launches of the new run that can show a change (one can be a preempted launch)
BY_TIME = 0.5  # the part of the adjustment's weights given by device time (_weights)
MOST = 0.75  # the share of a run's launches a change must move (the launch test)
BY_LAUNCH, BY_RUN = "runs, launch by launch", "runs"
METHOD = ("each run one observation per kernel (the median log deviation of its launches from the earlier runs', "
          "launch by launch where all launch it alike), the run-wide shift (told by the other kernels, its "
          "uncertainty counted) set aside where it predicts the kernel better; the new run against the "
          f"earlier runs by Student's t for a new observation (with its {CONFIDENCE:.0%} interval), and against how "
          "often the kernel's single launches deviated that far in the earlier runs; p-values adjusted for the "
          "number of kernels (Benjamini–Hochberg, weighted half by the kernels' device time)")

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
    table = _centred(kernels, len(earlier))
    weights = _weights(earlier, list(kernels))
    out = {}
    for k, launches in new.items():
        before = [r[k][0] for r in earlier if k in r]
        moved = _moved(before, launches[0])
        if k not in kernels:
            out[k] = Change(moved, None, None, None, FEW, None, None, moved)
            continue
        row = list(kernels).index(k)
        shift = _Shift(*_others(np.delete(table, row, axis=0)))
        out[k] = _change(kernels[k], shift, moved)
        out[k].stands_out = out[k].stands_out and _stands_out(before, launches[0])
        out[k].weight = float(weights[row])
    adjust(list(out.values()), alpha, min_effect)
    shifts = _run_shifts(table)
    return out, float(np.exp(shifts[-1] - np.median(shifts[:-1]))) if len(shifts) > 1 else 1.0


@dataclass
class _Shift:
    """A kernel's run-wide shift in each run (log; the new run last), from the other kernels only, and its variance
    (how far the others scatter in that run)."""
    log: np.ndarray
    var: np.ndarray


def _change(k: _Kernel, shift: _Shift, moved: float) -> Change:
    """The kernel's levels tested with the run-wide shift set aside, or as they are, whichever predicts the new
    run's level with the smaller variance (chosen from the earlier runs' spread and the new run's shift's
    uncertainty, not from the kernel's new level: a kernel that does not follow the shift — a CPU's 0.5 ms kernel
    beside short kernels that jitter — is not made noisier by it). Either way its own change (less the shift) must
    pass Z times the new run's shift's standard error (stands_out): four kernels scattering tell a poor shift."""
    extra = max(0.0, float(shift.var[-1] - shift.var[k.runs[:-1]].mean()))
    shifted = k.levels - shift.log[k.runs]
    aside = _variance(shifted[:-1]) + extra <= _variance(k.levels[:-1])
    logs = shift.log if aside else np.zeros_like(shift.log)
    levels = k.levels - logs[k.runs]
    c = _predict(levels[:-1], float(levels[-1]), extra if aside else 0.0)
    launch_p = _launch_p(k.deviations[-1] - shift.log[-1], float(shifted[-1]), _pool(k, shift.log))
    c.p = max(c.p or 0.0, launch_p)
    c.decides = len(k.deviations[-1]) >= MIN_NEW_LAUNCHES
    ratio = float(np.exp(shift.log[-1] - shift.log[k.runs[:-1]].mean()))
    kept = float(np.exp(logs[-1] - logs[k.runs[:-1]].mean()))
    c.ratio, c.low, c.high = c.ratio * kept, (c.low or 0) * kept, (c.high or 0) * kept
    c.method, c.median_ratio, c.shift = BY_LAUNCH if k.aligned else BY_RUN, moved, ratio
    c.stands_out = abs(float(shifted[-1] - shifted[:-1].mean())) > Z * math.sqrt(float(shift.var[-1]))
    return c


def _variance(earlier: np.ndarray) -> float:
    """The variance of one more draw's deviation from the mean of `earlier` (Student's prediction, s²·(1 + 1/n))."""
    return float(earlier.var(ddof=1)) * (1 + 1 / len(earlier))


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


def _centred(kernels: dict[Hashable, _Kernel], n: int) -> np.ndarray:
    """Per kernel (rows) and run (columns, the new run last) the run's level less the kernel's median level over
    the earlier runs; NaN where the run did not launch it."""
    table = np.full((len(kernels), n + 1), np.nan)
    for row, k in enumerate(kernels.values()):
        levels = k.levels
        table[row, k.runs] = levels - np.median(levels[:-1])
    return table


def _run_shifts(table: np.ndarray) -> np.ndarray:
    """Each run's run-wide shift (log): the median over its kernels of the centred levels; 0 where fewer than
    MIN_KERNELS kernels tell."""
    counts = (~np.isnan(table)).sum(axis=0)
    with warnings.catch_warnings():  # a run without any of the kernels: the median of nothing warns
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(table, axis=0) if len(table) else np.zeros(table.shape[1])
    return np.where(counts >= MIN_KERNELS, np.nan_to_num(med), 0.0)


def _others(others: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The run-wide shift of each run as the kernels other than `row` tell it (the median of their centred levels:
    a kernel's own change would move a shift it is part of — with four kernels, by half of it), and the variance
    of that median: π/2 · σ² / m, σ from the others' median absolute deviation about it. 0 and 0 where fewer than
    MIN_KERNELS − 1 others tell."""
    counts = (~np.isnan(others)).sum(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(others, axis=0) if len(others) else np.zeros(others.shape[1])
        sigma = MAD_SD * np.nanmedian(np.abs(others - med), axis=0) if len(others) else med
    told = counts >= MIN_KERNELS - 1
    var = np.where(told, np.nan_to_num(math.pi / 2 * sigma ** 2 / np.maximum(counts, 1)), 0.0)
    return np.where(told, np.nan_to_num(med), 0.0), var


def _weights(earlier: list[dict[Hashable, Launches]], keys: list[Hashable]) -> np.ndarray:
    """Each kernel's weight in the adjustment (weighted Benjamini–Hochberg, Genovese, Roeder & Wasserman 2006; the
    weights average 1 over the kernels adjust counts): half of it even, half by the kernel's share of the device
    time of the earlier runs (a slowdown of the kernel that takes most of the time is what a check is for). From
    the earlier runs only, so independent of the new run's p-values."""
    time = np.array([np.mean([float(r[k][0].sum()) if k in r else 0.0 for r in earlier]) for k in keys])
    share = time / time.sum() if len(keys) and time.sum() > 0 else np.full(len(keys), 1.0 / max(1, len(keys)))
    return (1 - BY_TIME) + BY_TIME * len(keys) * share


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


def _predict(earlier: np.ndarray, new: float, extra: float = 0.0) -> Change:
    """`new` against `earlier` as one more draw: t = (new − mean) / √(s²·(1 + 1/n) + extra), n − 1 degrees of
    freedom. `extra`: variance the new observation has beyond the earlier ones' (its run-wide shift told less
    surely than theirs, on average, were)."""
    from scipy import stats  # here: importing scipy.stats takes a second, and most commands never need it
    n = len(earlier)
    delta = float(new - earlier.mean())
    se = math.sqrt(float(earlier.var(ddof=1)) * (1 + 1 / n) + extra)
    ratio = float(np.exp(delta))
    if se == 0:  # earlier runs all alike (copies of one run): any move is certain, none is no change
        return Change(ratio, ratio, ratio, 1.0 if delta == 0 else 0.0, INCONCLUSIVE)
    p = float(2 * stats.t.sf(abs(delta) / se, n - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * se
    return Change(ratio, float(np.exp(delta - half)), float(np.exp(delta + half)), p, INCONCLUSIVE)
