"""Which host launch (an `exec` point event) started each piece of device work.

tinygrad records an `exec` point on the host for every kernel run, copy and JIT graph batch, dated to the call's
start (master back-dates it: realize.py), and the work itself as a device range. Neither names the other, so the
link is made as tinygrad's viewer makes it for a kernel's variables: the latest exec at or before the work starts
on the host clock (device ranges are already shifted by their device's clock offset). Two refinements keep a
launch from being credited with another one's work:
- a kernel takes an exec of its own name on its own device (names compared as tinygrad turns a display name into a
  function name: `r_(j*32)` launches `r_28j2A3229`), so two execs queued before either kernel ran link correctly;
- a copy takes a copy exec (`copy 256 B, NULL:1 <- NULL`, recorded on the destination device) with the same source
  and destination as the range (`NULL -> NULL:1`, on the source's copy engine); `TINY` in a range name is the host
  memory that the exec calls `PYTHON` or `CPU`;
- a JIT graph batch takes the latest exec on the batch's device before its first entry, and so do its entries,
  unless one has an exec of its own name since then (0.14's HCQ2 batches gather kernels launched one by one).
Because only execs at or before the start are taken, launch latency (device start - host launch) is never negative;
a device range the clock offset places before its own exec links to an earlier launch of the same name, as in the
viewer, or to none.
"""
from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from ..devices import HOST
from ..records import Alloc, Exec, Profile, SpanTable
from ..timeline import ARG_BYTES, ARG_EXEC, ARG_GBS, ARG_LAUNCH_LATENCY, ARG_METADATA, FLOW_LAUNCH, Timeline, Track

LAUNCH_PREFIX = "launch "  # launch instants are not named as the kernel: a query for a kernel's name finds its runs
LAUNCHES = "TINY"  # the host root whose `Launches` track holds the exec events (tinygrad's runtime runs there)

_COPY_EXEC = re.compile(r"^copy\b[^,]*,\s*(\S+)\s*<-\s*(\S+)\s*$")  # "copy 256 B, NULL:1 <- NULL": dest, src
_COPY_RANGE = re.compile(r"^(\S+)\s*->\s*(\S+)$")  # "NULL -> NULL:1": src, dest
_HOST_MEMORY = "TINY"  # how copy ranges name host memory; execs say PYTHON (or CPU for the host device)
_CHUNK = 1 << 16  # launches handled at a time where a column of all of them would cost a long run tens of MB
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@lru_cache(maxsize=65536)  # a run launches a few hundred kernels, each many times
def function_name(name: str) -> str:
    """A kernel's display name as the function name tinygrad compiles (and names device ranges by): every character
    outside [A-Za-z0-9_] as two hex digits."""
    return "".join(c if c in _WORD else f"{ord(c):02X}" for c in name)


def copy_ends(exec_name: str) -> tuple[str, str] | None:
    """(source, destination) a copy exec names, None for a kernel's."""
    m = _COPY_EXEC.match(exec_name)
    return (m.group(2), m.group(1)) if m else None


def _same_end(range_end: str, exec_end: str) -> bool:
    return range_end in (exec_end, _HOST_MEMORY)


@dataclass(frozen=True)
class LaunchLinks:
    """Index into Profile.points of the exec that launched each device span (by index into Profile.spans) and each
    graph batch (by index into Profile.graphs)."""

    spans: dict[int, int]
    graphs: dict[int, int]


class Placed:
    """Where the timeline put the device work: each device span (by index into Profile.spans) and each graph batch
    (by index into Profile.graphs) → (its track, its event's index there). Spans are kept as columns per track (a
    long run places a million: a dict entry and a tuple each would cost ~100 MB)."""

    def __init__(self) -> None:
        self.batches: dict[int, tuple[Track, int]] = {}
        self.tracks: list[Track] = []  # the tracks that hold spans, by code
        self._rows: list[np.ndarray] = []  # the spans on each, in event order
        self._index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # rows sorted, their track and event

    def add_spans(self, track: Track, rows: np.ndarray) -> None:
        """Spans `rows` (indexes into Profile.spans) are events 0, 1, … of `track` (a span placed again moves)."""
        self.tracks.append(track)
        self._rows.append(np.asarray(rows, np.int64))
        self._index = None

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of `rows` were placed (bool), and for each its track's code and its event's index (where placed)."""
        if self._index is None:
            placed = np.concatenate(self._rows or [np.zeros(0, np.int64)])
            tracks = np.repeat(np.arange(len(self._rows), dtype=np.int32), [len(r) for r in self._rows])
            events = np.concatenate([np.arange(len(r), dtype=np.int64) for r in self._rows] or [placed])
            order = np.argsort(placed, kind="stable")  # the last placing of a row is the one found
            self._index = placed[order], tracks[order], events[order]
        placed, tracks, events = self._index
        at = np.searchsorted(placed, rows, "right") - 1
        found = (at >= 0) & (placed[np.maximum(at, 0)] == rows) if len(placed) else np.zeros(len(rows), np.bool_)
        return found, tracks[at[found]], events[at[found]]


class _Execs:
    """Exec points of a profile, sorted by time, grouped for the three kinds of look-up."""

    def __init__(self, prof: Profile) -> None:
        self.named: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # (device, function name)
        self.kernels: dict[str, list[tuple[int, int]]] = defaultdict(list)  # device → any non-copy exec
        self.copies: list[tuple[int, int, str, str]] = []  # (ts, point index, source, destination)
        names: dict[str, tuple[str, str] | str] = {}  # exec name → the ends it copies between, or its function name
        for i, pt in enumerate(prof.points):
            if pt.kind != "exec" or not isinstance(pt.arg, Exec):
                continue
            kind = names.get(pt.arg.name)
            if kind is None:
                kind = names[pt.arg.name] = copy_ends(pt.arg.name) or function_name(pt.arg.name)
            row = (pt.ts, i)
            if type(kind) is tuple:
                self.copies.append((pt.ts, i, *kind))
            else:
                self.named[(pt.device, kind)].append(row)
            self.kernels[pt.device].append(row)
        for rows in (*self.named.values(), *self.kernels.values(), self.copies):
            rows.sort()
        self.copy_ts = [c[0] for c in self.copies]

    def named_columns(self, groups: dict[tuple[str, str], int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The execs of these (device, function name) groups as columns sorted by (group code, time, index): each
        one's group code, time and point index."""
        parts = [self.named.get(key, []) for key in groups]  # in code order, each sorted by (time, index)
        sizes = [len(part) for part in parts]
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(parts)), np.int64, 2 * sum(sizes)).reshape(-1, 2)
        return np.repeat(np.arange(len(parts), dtype=np.int64), sizes), flat[:, 0].copy(), flat[:, 1].copy()

    @staticmethod
    def latest(rows: list[tuple[int, int]], st: int) -> int | None:
        k = bisect.bisect_right(rows, (st, 1 << 62)) - 1
        return rows[k][1] if k >= 0 else None

    def copy(self, name: str, st: int) -> int | None:
        m = _COPY_RANGE.match(name)
        if m is None:
            return None
        src, dst = m.groups()
        for k in range(bisect.bisect_right(self.copy_ts, st) - 1, -1, -1):
            _, i, esrc, edst = self.copies[k]
            if _same_end(src, esrc) and _same_end(dst, edst):
                return i
        return None


def _latest_named(execs: _Execs, table: SpanTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `table`: the latest exec of its own name on its own device at or before its start (index into
    Profile.points), -1 where none; with that exec's time (0 where none). All rows are looked up at once, however
    many names they have: rows and execs are keyed by (their (device, function name) group, their time's rank)."""
    hit, at = np.full(len(rows), -1, np.int64), np.zeros(len(rows), np.int64)
    if not len(rows):
        return hit, at
    n_keys = max(len(table.keys), 1)
    pairs, pair_of = np.unique(table.device[rows].astype(np.int64) * n_keys + table.key[rows], return_inverse=True)
    groups: dict[tuple[str, str], int] = {}  # (device, function name) → its code, in order of first use
    group = np.array([groups.setdefault((table.devices[d], function_name(table.keys[k].name)), len(groups))
                      for d, k in (divmod(u, n_keys) for u in pairs.tolist())], np.int64)[pair_of.reshape(-1)]
    ex_group, ex_ts, ex_point = execs.named_columns(groups)
    times, rank = np.unique(np.concatenate((ex_ts, table.st[rows])), return_inverse=True)
    rank = rank.reshape(-1)
    ex_key = ex_group * (len(times) + 1) + rank[:len(ex_ts)]  # sorted: execs are sorted by (group, time, index)
    last = np.searchsorted(ex_key, group * (len(times) + 1) + rank[len(ex_ts):], "right") - 1
    found = (last >= 0) & (ex_group[np.maximum(last, 0)] == group) if len(ex_key) else np.zeros(len(rows), np.bool_)
    hit[found], at[found] = ex_point[last[found]], ex_ts[last[found]]
    return hit, at


def _graph_links(prof: Profile, execs: _Execs, spans: dict[int, int], graphs: dict[int, int]) -> None:
    """Each JIT graph batch's exec (the latest on its device before its first entry), and each entry's: one of its
    own name recorded since its batch's (HCQ2 batches gather kernels launched one by one), else the batch's."""
    batches = [g for g, batch in enumerate(prof.graphs) if batch.entries]
    starts = prof.spans.batch_extents([prof.graphs[g].entries for g in batches])[0].tolist()
    linked, entries = [], []
    for g, st in zip(batches, starts, strict=True):
        hit = execs.latest(execs.kernels.get(prof.graphs[g].device, []), st)
        if hit is not None:
            graphs[g] = hit
            linked.append(hit)
            entries.append(prof.graphs[g].entries)
    if not entries:
        return
    sizes = [len(e) for e in entries]
    rows = np.fromiter(chain.from_iterable(entries), np.int64, sum(sizes))
    if rows.min() < -len(prof.spans) or rows.max() >= len(prof.spans):
        raise IndexError("span row out of range")
    batch = np.repeat(np.array(linked, np.int64), sizes)
    batch_ts = np.repeat(np.array([prof.points[i].ts for i in linked], np.int64), sizes)
    own, own_ts = _latest_named(execs, prof.spans, rows)
    hits = np.where((own >= 0) & (own_ts >= batch_ts), own, batch)
    for at in range(0, len(rows), _CHUNK):
        spans.update(zip(rows[at:at + _CHUNK].tolist(), hits[at:at + _CHUNK].tolist(), strict=True))


def link_launches(prof: Profile, device_spans: Iterable[int] | None = None) -> LaunchLinks:
    """The exec point that launched each device range, graph batch and graph entry (where one can be told).
    `device_spans`: the indexes of the spans not on a host device, in order, if known (most spans are host spans)."""
    execs = _Execs(prof)
    spans: dict[int, int] = {}
    graphs: dict[int, int] = {}
    if not execs.kernels:
        return LaunchLinks(spans, graphs)
    _graph_links(prof, execs, spans, graphs)
    if device_spans is None:
        device_spans = prof.spans.where_device(lambda d: d not in HOST)
    table = prof.spans
    rows = np.asarray(device_spans, np.int64)
    rows = rows[table.graph[rows] < 0]
    hits, copies = _latest_named(execs, table, rows)[0], table.copies(rows)
    for at in range(0, len(rows), _CHUNK):
        part = slice(at, at + _CHUNK)
        for i, hit, copy in zip(rows[part].tolist(), hits[part].tolist(), copies[part].tolist(), strict=True):
            if hit < 0 and copy:
                hit = execs.copy(table.keys[table.key[i]].name, int(table.st[i]))
                hit = -1 if hit is None else hit
            if hit >= 0:
                spans[i] = hit
    return LaunchLinks(spans, graphs)


class ExecArgs:
    """A launch's arguments, made once per exec event (its Launches instant, its device slice and its JIT batch's
    entries share them): its exec key, buffers (key, mode, and from their allocations bytes and dtype), variables
    and the Tensor calls that led to it."""

    def __init__(self, buffers: dict[Any, Alloc]) -> None:
        self.buffers = buffers  # buffer key → its allocation
        self.made: dict[int, dict] = {}  # id(exec) → its arguments (never changed once made)

    def __call__(self, key: Any, e: Exec) -> dict:
        args = self.made.get(id(e))
        if args is None:
            args = self.made[id(e)] = self._make(key, e)
        return args

    def _make(self, key: Any, e: Exec) -> dict:
        bufs = []
        for n, b in enumerate(e.bufs):
            buf = {"buf": b, "mode": e.mode(n)}
            a = self.buffers.get(b)
            if a:
                buf["bytes"], buf["dtype"] = a.nbytes, a.dtype
            bufs.append(buf)
        args: dict = {ARG_EXEC: key, "buffers": bufs}
        if e.var_vals:
            args["var_vals"] = dict(e.var_vals)
        if e.metadata:
            args[ARG_METADATA] = ", ".join(e.metadata)
        return args


def add_launches(tl: Timeline, track: Track, prof: Profile, links: LaunchLinks, placed: Placed, exec_args: ExecArgs
                 ) -> None:
    """Every exec that launched something as an instant on `track` (the host's `Launches`), with a flow to each
    device slice it started; those slices get the launch latency (in the launch table, and in their args for
    display), a JIT graph entry its batch's buffers, a copy the bytes its destination buffer holds (and the
    bandwidth) when its range does not say. Flows are numbered by their slices' time, track and index."""
    execs, instant, copies = _add_instants(tl, track, prof, links, exec_args)
    t = _targets(prof, links, placed)
    ts, dur = (np.concatenate([np.frombuffer(getattr(d, c), np.int64) for d in t.tracks] or [np.zeros(0, np.int64)])
               for c in ("ts", "dur"))
    at = np.cumsum([0] + [len(d) for d in t.tracks])[t.track] + t.event  # each target's slice in ts and dur
    uuid = np.array([d.uuid for d in t.tracks], np.int64)[t.track]
    order = np.lexsort((t.event, uuid, ts[at]))
    track_of, event, point, at = t.track[order], t.event[order], t.point[order], at[order]
    which = np.searchsorted(execs.point, point)  # each target's exec among the instants' execs
    latency = ts[at] - execs.ts[which]
    first = np.zeros(len(t.tracks), np.int64)  # each target track's first row in the launch table
    used = np.unique(track_of)
    first[used] = [tl.launches.row(t.tracks[k].uuid, 0) for k in used.tolist()]
    tl.launches.link(first[track_of] + event, point, latency)
    graph, copy = t.graph[order], copies[which]
    for part in (slice(k, k + _CHUNK) for k in range(0, len(order), _CHUNK)):  # the lists of a part are reused
        dst, events = [t.tracks[k] for k in track_of[part].tolist()], event[part].tolist()
        tl.flows([track] * len(dst), instant[which[part]].tolist(), dst, events, FLOW_LAUNCH)
        slice_args = [d.args.setdefault(j, {}) for d, j in zip(dst, events, strict=True)]
        for args, lat in zip(slice_args, latency[part].tolist(), strict=True):
            args[ARG_LAUNCH_LATENCY] = lat
        mine, spans_at = point[part], at[part]
        for k in np.flatnonzero(graph[part]).tolist():
            if "buffers" not in slice_args[k]:
                pt = prof.points[mine[k]]
                slice_args[k].update(exec_args(pt.key, pt.arg))
        for k in np.flatnonzero(copy[part]).tolist():
            if ARG_BYTES not in slice_args[k]:
                _copy_bytes(slice_args[k], prof.points[mine[k]].arg, exec_args.buffers, int(dur[spans_at[k]]))


class _Targets(NamedTuple):
    """Where the linked launches went, a column each: the device slice's track (an index into `tracks`) and event,
    the exec's index into Profile.points, and whether the slice is in a JIT graph."""

    tracks: list[Track]
    track: np.ndarray
    event: np.ndarray
    point: np.ndarray
    graph: np.ndarray


def _targets(prof: Profile, links: LaunchLinks, placed: Placed) -> _Targets:
    """Where each linked launch went: device spans (as placed), then graph batches."""
    rows = np.fromiter(links.spans.keys(), np.int64, len(links.spans))
    found, track, event = placed.spans(rows)
    batches = [(placed.batches[g], i) for g, i in links.graphs.items() if g in placed.batches]
    batch_tracks = list({id(d): d for (d, _), _ in batches}.values())
    code = {id(d): len(placed.tracks) + k for k, d in enumerate(batch_tracks)}
    n = len(batches)
    return _Targets(placed.tracks + batch_tracks,
                    np.concatenate((track, np.fromiter((code[id(d)] for (d, _), _ in batches), np.int32, n))),
                    np.concatenate((event, np.fromiter((j for (_, j), _ in batches), np.int64, n))),
                    np.concatenate((np.fromiter(links.spans.values(), np.int64, len(rows))[found],
                                    np.fromiter((i for _, i in batches), np.int64, n))),
                    np.concatenate((prof.spans.graph[rows[found]] >= 0, np.ones(n, np.bool_))))


class _Instants(NamedTuple):
    """The execs that launched something (indexes into Profile.points, ascending) and their times."""

    point: np.ndarray
    ts: np.ndarray


def _add_instants(tl: Timeline, track: Track, prof: Profile, links: LaunchLinks, exec_args: ExecArgs
                  ) -> tuple[_Instants, np.ndarray, np.ndarray]:
    """The instants of the execs that launched something, by time: those execs, and per exec its instant's index
    and whether it is a copy."""
    execs = np.unique(np.fromiter(chain(links.spans.values(), links.graphs.values()), np.int64))
    points = [prof.points[i] for i in execs.tolist()]
    ts = np.fromiter((pt.ts for pt in points), np.int64, len(points))
    by_time = np.lexsort((execs, ts))
    instant, copies = np.empty(len(execs), np.int64), np.zeros(len(execs), np.bool_)
    instant[by_time] = np.arange(len(track), len(track) + len(execs))
    names: dict[str, tuple[int, bool]] = {}  # exec name → (its instant's name id, is it a copy)
    for k in by_time.tolist():
        pt = points[k]
        named = names.get(pt.arg.name)
        if named is None:  # padded for DEBUG lines
            named = names[pt.arg.name] = (tl.intern(LAUNCH_PREFIX + " ".join(pt.arg.name.split())),
                                          copy_ends(pt.arg.name) is not None)
        copies[k] = named[1]
        track.args[len(track)] = {"device": pt.device, **exec_args(pt.key, pt.arg)}
        track.ts.append(pt.ts)
        track.dur.append(-1)
        track.names.append(named[0])
    return _Instants(execs, ts), instant, copies


def _copy_bytes(args: dict, e: Exec, buffers: dict[Any, Alloc], dur: int) -> None:
    """A copy's bytes from its buffers' allocations (exec bufs are [destination, source])."""
    a = next((buffers[b] for b in e.bufs if b in buffers), None)
    if a is None:
        return
    args[ARG_BYTES] = a.nbytes
    if dur > 0:
        args[ARG_GBS] = round(a.nbytes / dur, 3)
