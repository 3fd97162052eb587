"""JIT graph batches over the run: each batch (a Role.GRAPH slice) told apart by the launches it holds, and its time
call after call — the first calls against the steady state. Read from the launch table (batches and the launches
inside them are its rows)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..timeline import Role, Timeline, Track

SHOWN_NAMES = 3  # kernel names in a batch's label
MAX_CALLS = 1000  # durations kept per batch (the first ones)


@dataclass
class Batch:
    """The calls of one JIT graph batch: a graph track's slices of one name holding the same launches."""

    track: str
    name: str  # e.g. "batched 4"
    label: str  # the name and its first launches' names
    launches: int  # launches per call
    calls: int
    first_ns: int
    steady_ns: float | None  # median of the calls after the first
    total_ns: int
    durations: list[int] = field(default_factory=list)  # the first MAX_CALLS calls, in order


def batches(tl: Timeline) -> list[Batch]:
    groups: dict[tuple[str, str, tuple[str, ...]], list[int]] = {}
    tab = tl.launches
    for t in tl.tracks:
        if t.role != Role.GRAPH or t.kind != "slice":
            continue
        inner = _inner(tl, t)
        rows = tab.rows(t.uuid)
        ts, dur, names = tab.ts[rows], tab.dur[rows], tab.name[rows]
        for i in np.flatnonzero(dur > 0).tolist():
            key = (t.name, tl.strings[names[i]], inner(int(ts[i]), int(ts[i] + dur[i])))
            groups.setdefault(key, []).append(int(dur[i]))
    out = []
    for (track, name, held), durs in groups.items():
        shown = ", ".join(held[:SHOWN_NAMES]) + (", …" if len(held) > SHOWN_NAMES else "")
        steady = float(np.median(durs[1:])) if len(durs) > 1 else None
        out.append(Batch(track, name, f"{name}: {shown}" if held else name, len(held), len(durs), durs[0], steady,
                         sum(durs), durs[:MAX_CALLS]))
    return sorted(out, key=lambda b: -b.total_ns)


def _inner(tl: Timeline, graph: Track) -> Callable[[int, int], tuple[str, ...]]:
    """A function: (start, end) → names of the launches on the graph track's sibling device tracks inside it."""
    cols, tab = [], tl.launches
    for t in tl.children(next((x for x in tl.tracks if x.uuid == graph.parent), None)):
        if t.role in (Role.QUEUE, Role.COPY):
            rows = tab.rows(t.uuid)
            ts = tab.ts[rows]
            cols.append((ts, ts + tab.dur[rows], tab.name[rows]))

    def inside(st: int, en: int) -> tuple[str, ...]:
        found = []
        for ts, ends, names in cols:
            lo, hi = np.searchsorted(ts, st, "left"), np.searchsorted(ts, en, "right")
            found += [(int(ts[k]), tl.strings[names[k]]) for k in range(lo, hi) if ts[k] < ends[k] <= en]
        return tuple(n for _, n in sorted(found))
    return inside
