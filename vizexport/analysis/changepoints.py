"""Where a kernel's level stepped over a series of runs: optimal partitioning of the per-run levels (log medians)
into segments of constant mean, each new segment costing a penalty (as asv's step detection and PELT do), exact by
dynamic programming. The penalty is BIC-like with the noise estimated robustly from successive differences, and a
segment spans at least MIN_SEGMENT runs, so one slow run is noise, not two steps."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

MIN_SEGMENT = 3
PENALTY = 6.0  # × σ² × ln n per segment
CLIP = 4.0  # levels beyond median ± CLIP σ are pulled in for the partitioning (one wild run is not a step)
MAD_SD = 1.4826


@dataclass
class Step:
    at: int  # index of the first run of the new level
    ratio: float  # new level / old level


def change_points(levels: np.ndarray) -> list[Step]:
    """The steps of `levels` (log values, in run order)."""
    x = np.asarray(levels, np.float64)
    n = len(x)
    if n < 2 * MIN_SEGMENT:
        return []
    sigma = MAD_SD * float(np.median(np.abs(np.diff(x)))) / np.sqrt(2)
    if sigma == 0:
        sigma = float(np.std(x)) or 1.0
    beta = PENALTY * sigma ** 2 * np.log(n)
    med = float(np.median(x))
    y = np.clip(x, med - CLIP * sigma, med + CLIP * sigma)
    s1, s2 = np.concatenate(([0.0], np.cumsum(y))), np.concatenate(([0.0], np.cumsum(y * y)))
    best, last = np.full(n + 1, np.inf), np.zeros(n + 1, np.int64)
    best[0] = -beta
    for end in range(MIN_SEGMENT, n + 1):
        starts = np.arange(0, end - MIN_SEGMENT + 1)
        m = end - starts
        cost = s2[end] - s2[starts] - (s1[end] - s1[starts]) ** 2 / m
        total = best[starts] + cost + beta
        i = int(np.argmin(total))
        best[end], last[end] = total[i], starts[i]
    cuts, end = [], n
    while end > 0:
        cuts.append(int(last[end]))
        end = int(last[end])
    bounds = [*sorted(cuts)[1:], n]
    out, start = [], 0
    for a, b in pairwise(bounds):
        out.append(Step(a, float(np.exp(x[a:b].mean() - x[start:a].mean()))))
        start = a
    return out
