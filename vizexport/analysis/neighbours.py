"""What a kernel's launches moved by, beyond what the launches around them moved by: between two runs of one
workload, a stretch of a run can be slow as a whole (the machine busy for a second; a CPU's threads asleep, so that
every short launch in that stretch takes some 10 µs more), and every kernel launched in it moves by as much. A
kernel's own change is what its launches moved beyond the launches of other kernels beside them in time."""
from __future__ import annotations

import numpy as np

NEIGHBOURS = 4  # the launches of other kernels nearest in time that say what a launch's stretch moved by
WINDOW = 16  # launches looked at on either side for them (a kernel launched many times in a row hides the others)
BLOCK = 16_384  # launches whose neighbours are found at once: some MB of index arrays, however long the run


def own_moves(groups: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """Per group of launches (their start times in the later run and each launch's move, ns: paired launches, the
    run-wide shift set aside), the median of its launches' moves less the median move of their NEIGHBOURS nearest
    launches of other groups; a launch with no other group's launch within WINDOW keeps its move."""
    if not groups:
        return []
    ts = np.concatenate([t for t, _ in groups])
    moves = np.concatenate([m for _, m in groups]).astype(np.float64)
    which = np.concatenate([np.full(len(t), i) for i, (t, _) in enumerate(groups)])
    order = np.argsort(ts, kind="stable")
    ts, moves, which = ts[order], moves[order], which[order]
    local = _local(ts, moves, which)
    own = moves - local
    return [float(np.median(own[which == i])) for i in range(len(groups))]


def _local(ts: np.ndarray, moves: np.ndarray, which: np.ndarray) -> np.ndarray:
    """Each launch's stretch's move: the median move of the NEIGHBOURS launches of other groups nearest in time
    among the WINDOW on either side (0 where there are none); BLOCK launches at a time (bounded memory)."""
    out = np.zeros(len(ts))
    for start in range(0, len(ts), BLOCK):
        out[start:start + BLOCK] = _block(ts, moves, which, np.arange(start, min(start + BLOCK, len(ts))))
    return out


def _block(ts: np.ndarray, moves: np.ndarray, which: np.ndarray, rows: np.ndarray) -> np.ndarray:
    offsets = np.concatenate([np.arange(-WINDOW, 0), np.arange(1, WINDOW + 1)])
    at = rows[:, None] + offsets[None, :]
    inside = (at >= 0) & (at < len(ts))
    at = np.clip(at, 0, len(ts) - 1)
    other = inside & (which[at] != which[rows][:, None])
    distance = np.where(other, np.abs(ts[at] - ts[rows][:, None]).astype(np.float64), np.inf)
    nearest = np.argsort(distance, axis=1, kind="stable")[:, :NEIGHBOURS]
    line = np.arange(len(rows))[:, None]
    picked = np.where(np.isfinite(distance[line, nearest]), moves[at[line, nearest]], np.nan)
    counted = np.isfinite(picked).any(axis=1)
    out = np.zeros(len(rows))
    out[counted] = np.nanmedian(picked[counted], axis=1)
    return out
