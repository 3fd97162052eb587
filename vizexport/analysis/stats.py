"""Did a kernel get slower? Verdicts a CI can act on, over launch durations.

Each kernel gets a test and an interval of its change (after / before), then one verdict:
- *slower* / *faster* only with evidence: its p-value, adjusted for the many kernels of one comparison
  (Benjamini–Hochberg), is below `alpha`, its interval excludes 1 (with and without the run-wide shift), the change
  is at least `min_effect`, and it stands out from what kernels move anyway between runs;
- *unchanged* only where the evidence bounds the change: the interval lies inside 1 ± `min_effect` (an
  equivalence test by interval) and so does the change of the median;
- *inconclusive* otherwise (not significant is not unchanged), with the estimate and its interval;
- *too few launches* where no test can say anything.

Two runs (`diff`): where both launch a kernel the same number of times in the same order (a deterministic workload),
launch i is compared with launch i — paired: the log ratios by Student's t and by the Wilcoxon signed-rank test,
Bonferroni over the two (under "no change" the two runs are exchangeable, so each log ratio is symmetric about 0:
the t-test is then conservative even for heavy tails, Efron 1969, and can reject with a few launches; the ranks are
not thrown by one outlier), the estimate the median paired ratio with its percentile-bootstrap interval. Otherwise
unpaired: the Mann–Whitney U test and the bootstrap interval of the ratio of medians. Bootstraps are seeded (same
inputs, same interval). What every kernel of the run shares is set aside (run_wide): a change all kernels make (a
busier machine, other clocks), how far kernels scatter between runs anyway by a factor (heavy on a shared machine)
and by an amount (the jitter: a CPU's short launches take microseconds more or less from run to run): slower or
faster is what a kernel moved beyond all three.
Many runs (`history check`): see analysis.history.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

ALPHA = 0.05
CONFIDENCE = 0.95
MIN_EFFECT = 0.05  # |after/before − 1| below this is never a change; an interval inside ±this is "unchanged"
MIN_LAUNCHES = 2  # per side, unpaired
MIN_PAIRS = 3  # paired launches: fewer show no spread of their ratios
MIN_KERNELS = 3  # kernels whose changes give the run-wide shift and spread (fewer: none is set aside; the median of
# three is not moved by one kernel's regression)
JITTER_QUANTILE = 0.9  # a kernel's own move passes what 90% of the kernels move anyway (a tenth may truly change)
STEPS = (1000, 100, 10)  # ns: the steps durations may come in (tinygrad's JIT graph timings are whole µs on NULL)
MAD_SD = 1.4826  # median absolute deviation → standard deviation, for normal data
Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
RESAMPLES = 2000
MAX_SAMPLE = 1000  # launches per side the bootstrap resamples (a seeded subsample beyond): its cost stays bounded
SEED = 19

SLOWER, FASTER, UNCHANGED, INCONCLUSIVE, FEW = "slower", "faster", "unchanged", "inconclusive", "too few launches"
VERDICTS = (SLOWER, FASTER, UNCHANGED, INCONCLUSIVE, FEW)
PAIRED, UNPAIRED = "paired", "unpaired"
METHOD = (f"launch by launch where both runs launch a kernel alike (paired: Student's t and Wilcoxon's signed-rank "
          f"test on the log ratios, Bonferroni over the two; the "
          f"median paired ratio with its percentile-bootstrap {CONFIDENCE:.0%} interval), else the Mann–Whitney U "
          f"test and the bootstrap {CONFIDENCE:.0%} interval of the ratio of medians ({RESAMPLES} resamples); "
          "p-values adjusted for the number of kernels (Benjamini–Hochberg)")


@dataclass
class Change:
    """after vs before: the change (ratio), its interval, the test's p-value and, once the kernels of one comparison
    are adjusted together, the adjusted p-value (q) and the verdict."""

    ratio: float
    low: float | None
    high: float | None
    p: float | None
    verdict: str
    method: str | None = None  # PAIRED, UNPAIRED, or analysis.history's
    q: float | None = None
    median_ratio: float | None = None  # median after / median before (the change of the median itself)
    shift: float = 1.0  # the run-wide change the test set aside (RunWide): ratio / shift is the kernel's own
    stands_out: bool = True  # beyond what kernels move by an amount anyway between runs (diff: RunWide.jitter)
    decides: bool = True  # False: never slower or faster whatever the launches (history: one new launch), so left
    # out of the Benjamini–Hochberg count (independent filtering, Bourgon, Gentleman & Huber 2010), its q 1
    weight: float = 1.0  # its weight in the adjustment (weighted Benjamini–Hochberg; history: by device time)

    @property
    def significant(self) -> bool:
        return self.verdict in (SLOWER, FASTER)


def reachable(n1: int, n2: int, alpha: float) -> bool:
    """Can the two-sided exact U test reject at `alpha` with samples this small (its smallest p is 2/C(n1+n2, n1)),
    with at least MIN_LAUNCHES a side (one launch shows no spread: a first call's warm-up would pass for a change)?"""
    return min(n1, n2) >= MIN_LAUNCHES and 2 / math.comb(n1 + n2, n1) < alpha


@dataclass(frozen=True)
class RunWide:
    """What every kernel of one comparison shares: the run-wide change (`shift`, a ratio) and how far kernels move
    apart between runs anyway (`spread`, τ: a standard deviation of log changes)."""

    shift: float = 1.0
    spread: float = 0.0
    jitter: float = 0.0  # ns: how far kernels' medians move by an amount (not a factor) between runs anyway


def run_wide(estimates: list[tuple[float, float]], moves: list[tuple[float, float]] | None = None) -> RunWide:
    """From each kernel's (log change, its standard error; NaN for a single launch a side): the shift is the median
    change (a run on a busier machine, or with its clocks elsewhere, moves every kernel alike; one kernel's regression
    barely moves the median), the spread what the kernels' changes scatter beyond their own noise (robust: 1.4826 ×
    their median absolute deviation, less the median squared standard error; as a meta-analysis' between-study
    variance). `moves`: each kernel's median before and its median after less that (ns, the shift set aside); the
    jitter (see `jitter`) is what a kernel's own move must pass: a device whose short launches take some
    microseconds more or less from run to run (a CPU waking its threads) moves small kernels by factors that say
    nothing.
    Fewer than MIN_KERNELS kernels tell neither: none is set aside."""
    if len(estimates) < MIN_KERNELS:
        return RunWide()
    x, se = np.array(estimates).T
    g = float(np.median(x))
    mad = MAD_SD * float(np.median(np.abs(x - g)))
    noise = float(np.median(se[np.isfinite(se)] ** 2)) if np.isfinite(se).any() else 0.0
    return RunWide(float(np.exp(g)), math.sqrt(max(0.0, mad ** 2 - noise)), jitter(moves) if moves else 0.0)


def jitter(moves: list[tuple[float, float]]) -> float:
    """The JITTER_QUANTILE of the kernels' absolute moves (ns): what most kernels move by anyway. All kernels count:
    on a CPU the slow state catches short and longer kernels alike (narrowed to the short ones, the jitter missed
    the 10 µs jumps of other kernels and flagged them)."""
    return float(np.quantile(np.abs([m for _, m in moves]), JITTER_QUANTILE))


def resolution(durations: np.ndarray) -> int:
    """The step of the durations (ns): the largest of STEPS that divides at least half of them (a duration timed to
    the ns is a whole µs one time in a thousand), else 1. A move smaller than that is no evidence of a change."""
    for step in STEPS:
        if len(durations) and 2 * int(np.count_nonzero(durations % step == 0)) >= len(durations):
            return step
    return 1


def compare(before: np.ndarray, after: np.ndarray, alpha: float = ALPHA, min_effect: float = MIN_EFFECT,
            paired: bool = False, wide: RunWide = RunWide()) -> Change:
    """The change of `after` launch durations against `before` (both non-empty, positive), its test and interval;
    `paired`: launch i of one run against launch i of the other (same counts); `wide`: what all kernels of the
    comparison share (run_wide). The verdict is provisional until `adjust` has seen every kernel of the comparison."""
    moved = float(np.median(after) / np.median(before))
    b, a = before.astype(np.float64), after.astype(np.float64) / wide.shift
    if not testable(len(b), len(a), paired, alpha):
        return Change(moved, None, None, None, FEW, None, None, moved)
    c = _paired(b, a) if paired and len(b) == len(a) >= MIN_PAIRS else _unpaired(b, a)
    if wide.spread > 0:
        _widen(c, wide.spread)
    c.ratio, c.low, c.high = c.ratio * wide.shift, (c.low or 0) * wide.shift, (c.high or 0) * wide.shift
    c.median_ratio, c.shift = moved, wide.shift
    c.stands_out = beyond(float(np.median(a) - np.median(b)), wide.jitter, min_effect)
    c.verdict = verdict(c, c.p, alpha, min_effect)
    return c


def beyond(move: float, jitter: float, min_effect: float = MIN_EFFECT) -> bool:
    """Whether a move (ns) passes the jitter (RunWide.jitter) by at least `min_effect` of it: kernels that jump by
    the same amount (a CPU's short launches, some 10 µs up or down) scatter by a few percent about it."""
    return abs(move) >= jitter * (1 + min_effect)


def _widen(c: Change, tau: float) -> None:
    """Count the kernels' scatter between runs (τ) as noise too: the change must also stand out from it (a normal
    test of log change / √(se² + τ²), se from the interval; p is the larger of the two tests', both must reject),
    and the interval widens by it in quadrature."""
    x, lo, hi = math.log(c.ratio), math.log(c.low or c.ratio), math.log(c.high or c.ratio)
    se = (hi - lo) / (2 * Z)
    p = math.erfc(abs(x) / math.sqrt(se ** 2 + tau ** 2) / math.sqrt(2))
    c.p = max(c.p or 0.0, p)
    c.low, c.high = math.exp(x - math.hypot(x - lo, Z * tau)), math.exp(x + math.hypot(hi - x, Z * tau))


def testable(n_before: int, n_after: int, paired: bool, alpha: float = ALPHA) -> bool:
    """Whether `compare` can test launches this many: paired with MIN_PAIRS a side, else when U can reject."""
    return (paired and n_before == n_after >= MIN_PAIRS) or reachable(n_before, n_after, alpha)


def estimate(before: np.ndarray, after: np.ndarray, paired: bool) -> tuple[float, float]:
    """A quick log change and its standard error, for run_wide: the median log ratio of paired launches (se of
    their mean), or the difference of median logs (se as of means)."""
    lb, la = np.log(before.astype(np.float64)), np.log(after.astype(np.float64))
    if paired and len(lb) == len(la) >= MIN_PAIRS:
        d = la - lb
        return float(np.median(d)), float(d.std(ddof=1) / math.sqrt(len(d)))
    if min(len(lb), len(la)) < 2:
        return float(np.median(la) - np.median(lb)), math.nan
    return float(np.median(la) - np.median(lb)), math.sqrt(lb.var(ddof=1) / len(lb) + la.var(ddof=1) / len(la))


def _paired(before: np.ndarray, after: np.ndarray) -> Change:
    from scipy import stats  # here: importing scipy.stats takes a second, and most commands never need it
    d = np.log(after) - np.log(before)
    ratio = float(np.exp(np.median(d)))
    if np.ptp(d) == 0:  # every launch moved by the same factor: no spread, the t statistic is 0/0 or ±∞
        return Change(ratio, ratio, ratio, 1.0 if d[0] == 0 else 0.0, INCONCLUSIVE, PAIRED)
    with warnings.catch_warnings():  # ratios nearly alike (a copy rewritten by a factor): t is huge, p tiny — right
        warnings.simplefilter("ignore", RuntimeWarning)
        p_t = float(stats.ttest_1samp(d, 0.0).pvalue)
        p_w = float(stats.wilcoxon(d).pvalue) if np.any(d) else 1.0
    p = min(1.0, 2 * min(p_t, p_w))  # either test, Bonferroni over the two: t for few launches, ranks for outliers
    res = stats.bootstrap((_subsample(d),), np.median, n_resamples=RESAMPLES, vectorized=True, method="percentile",
                          confidence_level=CONFIDENCE, rng=np.random.default_rng(SEED))
    low, high = _finite(res.confidence_interval, d)
    return Change(ratio, float(np.exp(low)), float(np.exp(high)), p, INCONCLUSIVE, PAIRED)


def _unpaired(before: np.ndarray, after: np.ndarray) -> Change:
    from scipy import stats
    p = float(stats.mannwhitneyu(after, before, alternative="two-sided").pvalue)
    rng = np.random.default_rng(SEED)
    res = stats.bootstrap((_subsample(after, rng), _subsample(before, rng)), _ratio_of_medians, n_resamples=RESAMPLES,
                          vectorized=True, method="percentile", confidence_level=CONFIDENCE, rng=rng)
    low, high = _finite(res.confidence_interval, after / np.median(before))
    return Change(float(np.median(after) / np.median(before)), low, high, p, INCONCLUSIVE, UNPAIRED)


def _finite(ci: object, values: np.ndarray) -> tuple[float, float]:
    """The bootstrap interval, or where every resample gave one value (a few launches, most of them alike) and
    scipy gives none, the range of the values: no narrower than the data."""
    low, high = float(ci.low), float(ci.high)  # type: ignore[attr-defined]
    return (low, high) if math.isfinite(low) and math.isfinite(high) else (float(values.min()), float(values.max()))


def _subsample(x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    rng = np.random.default_rng(SEED) if rng is None else rng
    return x if len(x) <= MAX_SAMPLE else x[rng.permutation(len(x))[:MAX_SAMPLE]]


def _ratio_of_medians(after: np.ndarray, before: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(after, axis=axis) / np.median(before, axis=axis)


def verdict(c: Change, q: float | None, alpha: float, min_effect: float) -> str:
    """The verdict of a change whose (adjusted) p-value is `q`: see the module's docstring. Slower or faster: the
    kernel moved, beyond the run-wide shift and by itself (both intervals exclude no change), and stands out from
    what kernels move anyway; unchanged: the change itself is bounded."""
    if c.p is None or c.low is None or c.high is None:
        return FEW
    moved = c.median_ratio if c.median_ratio is not None else c.ratio
    own, low, high = c.ratio / c.shift, c.low / c.shift, c.high / c.shift
    beyond = (min(abs(own - 1), abs(c.ratio - 1)) >= min_effect and (low > 1 or high < 1)
              and (c.low > 1 or c.high < 1) and c.stands_out)
    if q is not None and q < alpha and beyond and (own > 1) == (low > 1) == (c.ratio > 1):  # all on one side
        return SLOWER if c.ratio > 1 else FASTER
    if 1 - min_effect <= c.low and c.high <= 1 + min_effect and abs(moved - 1) < min_effect:
        return UNCHANGED
    return INCONCLUSIVE


def adjust(changes: list[Change], alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> None:
    """Benjamini–Hochberg over the tested changes of one comparison (false flags controlled over its many kernels):
    sets each one's q and final verdict. Changes that cannot decide (Change.decides) do not count. Weighted
    (Change.weight, averaging 1 over the counted changes; all 1: the plain procedure): q from p / weight."""
    tested = [c for c in changes if c.p is not None and c.decides]
    w = np.array([c.weight for c in tested])
    w = w * len(w) / w.sum() if len(w) and w.sum() > 0 else w  # weights average 1 over the tested changes
    for c, q in zip(tested, bh(np.array([c.p for c in tested]) / np.maximum(w, 1e-12)), strict=True):
        c.q = float(q)
    for c in changes:
        if c.p is not None and not c.decides:
            c.q = 1.0
        c.verdict = verdict(c, c.q, alpha, min_effect)


def bh(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q), in the order of `p`."""
    n = len(p)
    if not n:
        return p
    order = np.argsort(p)
    q = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(q[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return out
