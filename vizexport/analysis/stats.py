"""Did a kernel get slower? A noise-aware verdict over two sets of launch durations.

A change is significant only when all three agree: the Mann–Whitney U test (two-sided, over every launch) rejects
"same distribution" at `alpha`; the bootstrap confidence interval of the ratio of medians (percentile method,
seeded: the same inputs give the same interval) excludes 1; and the ratio of medians is at least `min_effect` away
from 1 — so a tiny shift that many launches make "significant" is still reported as unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
MIN_EFFECT = 0.05  # |after/before − 1| below this is never a change
MIN_LAUNCHES = 2  # per side
CONFIDENCE = 0.95
RESAMPLES = 2000
MAX_SAMPLE = 1000  # launches per side the bootstrap resamples (a seeded subsample beyond): its cost stays bounded
SEED = 19

SLOWER, FASTER, UNCHANGED, FEW = "slower", "faster", "unchanged", "too few launches"
METHOD = ("Mann–Whitney U (two-sided) over launch durations and a percentile bootstrap "
          f"{CONFIDENCE:.0%} interval of the ratio of medians ({RESAMPLES} resamples)")


@dataclass
class Change:
    """after vs before: ratio of medians (after / before), its bootstrap interval, the U test's p-value."""

    ratio: float
    low: float | None
    high: float | None
    p: float | None
    verdict: str

    @property
    def significant(self) -> bool:
        return self.verdict in (SLOWER, FASTER)


def reachable(n1: int, n2: int, alpha: float) -> bool:
    """Can the two-sided exact U test reject at `alpha` with samples this small (its smallest p is 2/C(n1+n2, n1)),
    with at least MIN_LAUNCHES a side (one launch shows no spread: a first call's warm-up would pass for a change)?"""
    return min(n1, n2) >= MIN_LAUNCHES and 2 / math.comb(n1 + n2, n1) < alpha


def compare(before: np.ndarray, after: np.ndarray, alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> Change:
    """The change of `after` launch durations against `before` (both non-empty, positive)."""
    ratio = float(np.median(after) / np.median(before))
    if not reachable(len(before), len(after), alpha):
        return Change(ratio, None, None, None, FEW)
    from scipy import stats  # here: importing scipy.stats takes a second, and most commands never need it

    p = float(stats.mannwhitneyu(after, before, alternative="two-sided").pvalue)
    low, high = _interval(before, after)
    beyond = abs(ratio - 1) >= min_effect and (low > 1 or high < 1)
    verdict = UNCHANGED if p >= alpha or not beyond else SLOWER if ratio > 1 else FASTER
    return Change(ratio, low, high, p, verdict)


def _interval(before: np.ndarray, after: np.ndarray) -> tuple[float, float]:
    from scipy import stats
    rng = np.random.default_rng(SEED)
    samples = tuple(x if len(x) <= MAX_SAMPLE else x[rng.permutation(len(x))[:MAX_SAMPLE]]
                    for x in (after.astype(np.float64), before.astype(np.float64)))
    res = stats.bootstrap(samples, _ratio_of_medians, n_resamples=RESAMPLES, vectorized=True, method="percentile",
                          confidence_level=CONFIDENCE, rng=rng)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _ratio_of_medians(after: np.ndarray, before: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(after, axis=axis) / np.median(before, axis=axis)
