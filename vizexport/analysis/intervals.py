"""Time intervals as numpy columns: the union of a device's slices, its gaps, and how two unions overlap."""
from __future__ import annotations

import numpy as np


def merge(st: np.ndarray, en: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals [st, en) as disjoint intervals in time order (touching ones joined)."""
    if not len(st):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(st, kind="stable")
    st, en = np.asarray(st, np.int64)[order], np.asarray(en, np.int64)[order]
    reach = np.maximum.accumulate(en)
    new = np.ones(len(st), bool)
    new[1:] = st[1:] > reach[:-1]  # an interval starting after everything before it has ended opens a new run
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(st)) - 1
    return st[starts], reach[ends]


def measure(st: np.ndarray, en: np.ndarray) -> int:
    """How long the union of [st, en) is, in the units of its columns."""
    a, b = merge(st, en)
    return int((b - a).sum())


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """How long both unions cover at once: |A ∩ B| = |A| + |B| − |A ∪ B|."""
    return measure(*a) + measure(*b) - measure(np.concatenate((a[0], b[0])), np.concatenate((a[1], b[1])))


def clip(st: np.ndarray, en: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The parts of [st, en) inside [lo, hi) (empty parts dropped)."""
    s, e = np.maximum(st, lo), np.minimum(en, hi)
    keep = e > s
    return s[keep], e[keep]
