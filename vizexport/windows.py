"""A run too big for one browser tab, as traces that each open: windows of the timeline, and an overview.

The Perfetto UI holds a whole trace in browser memory (~175 bytes per slice in its trace processor, more in the page):
a 20M-event run needs ~5 GB and minutes, and more than a 32-bit engine has. So a big timeline is written as
- windows: consecutive time ranges, each with every track (descriptors even where empty) and the events that start
  in it — a slice that crosses a cut goes, whole, to the window where it starts; a counter's window opens with its
  value at the cut. Cuts fall at natural boundaries where one is near: the start of a JIT graph batch or a marker.
- an overview of the whole run: each track's longest slices stay (its share of `slices`; among equally long ones,
  any: a synthetic run's slices may all last the same); the others, and instants but markers, are folded, per
  track and interval, into a summary slice on a sibling track `<track> · folded` (count, busy time, top names, and
  the window that holds them); counters keep each interval's maximum; buffer lifetimes are left to the windows (the
  Memory counters show the live bytes).
Both are plain Timelines: every trace writer writes them.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np

from .timeline import Role, Timeline, Track
from .units import duration_text

# events per window: in the Perfetto UI here, 2.4M-event windows took 20-25 s and ~0.6 GB to open, 2M ones 16.5-20.2 s,
# 1.6M ones 13.8-15.7 s and +370-400 MB (the target is 20 s; this machine's speed drifts by 10 % and more)
WINDOW_EVENTS = 1_600_000
OVERVIEW_SLICES = 200_000  # slices an overview keeps whole
OVERVIEW_BINS = 2_000  # intervals short slices are folded into, and counters reduced to
NATURAL = (Role.GRAPH, Role.MARKERS)  # tracks whose event starts make good cuts
# Left out of the overview: a run's thousands of long, overlapping buffer lifetimes make the UI lay out one merged
# track for seconds (a 20M-event overview: 20.8 s to open with them, 7.0 s without); the Memory counters stay.
OVERVIEW_LEFT_OUT = (Role.BUFFERS,)
TOP_NAMES = 3


@dataclass(frozen=True)
class Window:
    index: int
    start: int  # ns: the window holds events that start in [start, end)
    end: int
    events: int

    @property
    def name(self) -> str:
        return f"w{self.index:04d}"

    def label(self, t0: int) -> str:
        return f"{self.name} ({duration_text(self.start - t0)} – {duration_text(self.end - t0)})"


def _times(tl: Timeline) -> np.ndarray:
    parts = [np.asarray(t.ts) for t in tl.tracks if len(t)]
    times = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    # each track is in time order: a stable sort (timsort) merges the runs, 4x faster than quicksort on 20M events;
    # in place, as this is the peak of a big conversion's memory (np.sort's copy cost the 20M-event one 0.16 GiB)
    times.sort(kind="stable")
    return times


def plan(tl: Timeline, budget: int = WINDOW_EVENTS) -> list[Window]:
    """Windows of at most about `budget` events (more only where more events share one timestamp), cut at the
    latest natural boundary in the second half of a full window, else where the budget runs out."""
    times = _times(tl)
    n = len(times)
    if n == 0:
        return []
    nat = np.unique(np.concatenate([np.asarray(t.ts) for t in tl.tracks if t.role in NATURAL and len(t)] or
                                   [np.zeros(0, np.int64)]))
    cuts, a = [], 0
    while n - a > budget:
        limit = int(times[a + budget])  # events at this time or later do not fit
        j = int(np.searchsorted(nat, limit, "right")) - 1
        cut = int(nat[j]) if j >= 0 and nat[j] > times[a + budget // 2] else limit
        b = int(np.searchsorted(times, cut, "left"))
        if b <= a:  # more than a window's worth of events at one time: they stay together
            cut = int(times[a]) + 1
            b = int(np.searchsorted(times, cut, "left"))
        cuts.append(cut)
        a = b
    bounds = [int(times[0]), *cuts, int(times[-1]) + 1]
    counts = np.diff(np.searchsorted(times, bounds, "left"))
    return [Window(i, bounds[i], bounds[i + 1], int(counts[i])) for i in range(len(bounds) - 1)]


def _col(like: array, values: np.ndarray) -> array:
    """`values` as a column of the model (an array of `like`'s type)."""
    out = array(like.typecode)
    out.frombytes(np.ascontiguousarray(values, dtype=np.dtype(like.typecode)).tobytes())
    return out


def _bare(t: Track) -> Track:
    """The track without its events."""
    return Track(t.uuid, t.name, t.parent, t.rank, t.kind, t.role, t.description, t.unit)


def _subdict(d: dict[int, Any], keys: np.ndarray, a: int, b: int) -> dict:
    lo, hi = np.searchsorted(keys, [a, b])
    return {k - a: d[k] for k in keys[lo:hi].tolist()}


class Cutter:
    """Cuts a window's Timeline out of a timeline, one window at a time (the forked writers each cut the windows they
    write: a 20M-event run holds one window per writer besides itself)."""

    def __init__(self, tl: Timeline) -> None:
        for t in tl.tracks:
            _in_time_order(t)
        self.tl = tl
        self.keys = {id(t): [np.sort(np.fromiter(d, np.int64, len(d)), kind="stable")  # mostly in order already
                             for d in (t.args, t.flows_out, t.flows_in, t.stacks)] for t in tl.tracks}

    def __call__(self, w: Window) -> Timeline:
        out = self.tl.empty_like()  # a window names what the run names
        flows: list[tuple[Track, set[int], set[int]]] = []
        for t in self.tl.tracks:
            ts = np.asarray(t.ts)
            a, b = (int(x) for x in np.searchsorted(ts, [w.start, w.end], "left")) if len(t) else (0, 0)
            x = _bare(t)
            if t.kind == "slice":
                x.ts, x.dur, x.names = t.ts[a:b], t.dur[a:b], t.names[a:b]
                args_k, out_k, in_k, stacks_k = self.keys[id(t)]
                x.args, x.stacks = _subdict(t.args, args_k, a, b), _subdict(t.stacks, stacks_k, a, b)
                x.flows_out, x.flows_in = _subdict(t.flows_out, out_k, a, b), _subdict(t.flows_in, in_k, a, b)
                flows.append((x, {f for v in x.flows_out.values() for f in v}, {f for v in x.flows_in.values()
                                                                                  for f in v}))
            elif t.kind == "counter":
                values = np.asarray(t.values)
                lead = a > 0 and (b == a or ts[a] > w.start)  # the value in force at the cut
                x.ts, x.values = t.ts[a:b], t.values[a:b]
                if lead:
                    x.ts.insert(0, w.start)
                    x.values.insert(0, int(values[a - 1]))
            out.tracks.append(x)
        _keep_whole_flows(flows)
        return out


def _in_time_order(t: Track) -> None:
    ts = np.asarray(t.ts)
    if len(ts) > 1 and bool(np.any(ts[1:] < ts[:-1])):  # the timeline builds tracks in time order
        raise ValueError(f"track {t.name}: events out of time order")


def _keep_whole_flows(tracks: list[tuple[Track, set[int], set[int]]]) -> None:
    """Flows with both ends in the window stay; a flow cut by the window's edge is dropped at both ends."""
    starts = set().union(*(s for _, s, _ in tracks)) if tracks else set()
    ends = set().union(*(e for _, _, e in tracks)) if tracks else set()
    whole = starts & ends
    for t, s, e in tracks:
        if s - whole:
            t.flows_out = {i: kept for i, v in t.flows_out.items() if (kept := [f for f in v if f in whole])}
        if e - whole:
            t.flows_in = {i: kept for i, v in t.flows_in.items() if (kept := [f for f in v if f in whole])}


# ---- overview ----

def overview(tl: Timeline, plan_: list[Window], slices: int = OVERVIEW_SLICES, bins: int = OVERVIEW_BINS
             ) -> Timeline:
    """The whole run in a trace that always opens (see the module's docstring). Each slice track may keep an equal
    share of `slices` (its longest ones), markers all."""
    times = [np.asarray(t.ts) for t in tl.tracks if len(t)]
    t0 = min(int(x[0]) for x in times) if times else 0
    t1 = max(int(x[-1]) for x in times) + 1 if times else 1
    edges = np.linspace(t0, t1, bins + 1).astype(np.int64)
    cut = np.array([w.start for w in plan_[1:]], np.int64)
    tracks = [t for t in tl.walk() if t.role not in OVERVIEW_LEFT_OUT]
    share = slices // max(1, sum(1 for t in tracks if t.kind == "slice" and len(t) and t.role != Role.MARKERS))
    out = tl.empty_like()
    out.title = f"{tl.title} (overview)".strip()
    next_uuid = max((t.uuid for t in tl.tracks), default=0) + 1
    for t in tracks:
        x = _bare(t)
        x.rank = 2 * t.rank  # room for its folded sibling right after it
        out.tracks.append(x)
        if t.kind == "counter":
            ts, values = _counter_maxima(np.asarray(t.ts), np.asarray(t.values), edges)
            x.ts, x.values = _col(t.ts, ts), _col(t.values, values)
            if len(t) > len(x.ts):
                x.description = (t.description + " " if t.description else "") + "(overview: each interval's maximum)"
        elif t.kind == "slice" and len(t):
            dur = np.asarray(t.dur)
            # instants have no length to rank by: they are counted in the folded row (markers all stay)
            keep = _longest(dur, share) & (dur >= 0) if t.role != Role.MARKERS else np.ones(len(t), bool)
            _take(t, x, np.flatnonzero(keep))
            if not keep.all():
                shortest = duration_text(int(dur[keep].min()) if keep.any() else 0)
                folded = Track(next_uuid, f"{t.name} · folded", t.parent, 2 * t.rank + 1, "slice", t.role,
                               f"{t.name}: the slices not among its {share:,} longest (kept: {shortest} or "
                               "longer), folded per interval")
                next_uuid += 1
                _fold(tl, t, np.flatnonzero(~keep), edges, cut, plan_, folded, t0)
                out.tracks.append(folded)
    return out


def _longest(dur: np.ndarray, n: int) -> np.ndarray:
    """A mask of the `n` longest durations (all of them, if they are that few)."""
    if len(dur) <= n:
        return np.ones(len(dur), bool)
    keep = np.zeros(len(dur), bool)
    keep[np.argpartition(dur, len(dur) - n)[len(dur) - n:]] = True
    return keep


def _take(t: Track, x: Track, idx: np.ndarray) -> None:
    x.ts, x.dur, x.names = (_col(c, np.asarray(c)[idx]) for c in (t.ts, t.dur, t.names))
    kept = list(enumerate(idx.tolist()))
    x.args = {k: t.args[i] for k, i in kept if i in t.args}
    x.stacks = {k: t.stacks[i] for k, i in kept if i in t.stacks}


def _counter_maxima(ts: np.ndarray, values: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(ts) <= len(edges):
        return ts, values
    b = np.clip(np.searchsorted(edges, ts, "right") - 1, 0, len(edges) - 2)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    return edges[b[starts]], np.maximum.reduceat(values, starts)


def _fold(tl: Timeline, t: Track, idx: np.ndarray, edges: np.ndarray, cut: np.ndarray, plan_: list[Window],
          out: Track, t0: int) -> None:
    """One summary slice per interval with folded slices: from the first start to the last end (within the
    interval), named by the count, with busy time, the top names and the window."""
    ts, dur, names = np.asarray(t.ts)[idx], np.maximum(np.asarray(t.dur)[idx], 0), np.asarray(t.names)[idx]
    b = np.clip(np.searchsorted(edges, ts, "right") - 1, 0, len(edges) - 2)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], len(b)]
    first = ts[starts]
    last = np.maximum.reduceat(ts + dur, starts)
    stop = np.minimum(np.maximum(last, first + 1), edges[b[starts] + 1])
    busy = np.add.reduceat(dur, starts)
    out.ts, out.dur = _col(t.ts, first), _col(t.dur, stop - first)
    out.names = array(t.names.typecode, [tl.intern(f"{e - s:,} slices") for s, e in zip(starts.tolist(),
                                                                                         ends.tolist(), strict=True)])
    win = np.searchsorted(cut, first, "right")
    for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        top = _top_names(tl, names[s:e], dur[s:e])
        w = plan_[int(win[k])] if plan_ else None
        out.args[k] = {"count": e - s, "busy": duration_text(int(busy[k])), "top": top,
                       **({"window": w.label(t0)} if w else {})}


def _top_names(tl: Timeline, names: np.ndarray, dur: np.ndarray) -> str:
    ids, inv = np.unique(names, return_inverse=True)
    total = np.bincount(inv, weights=dur)
    top = np.argsort(-total, kind="stable")[:TOP_NAMES]
    return ", ".join(f"{tl.strings[int(ids[i])]} ({duration_text(int(total[i]))})" for i in top)
