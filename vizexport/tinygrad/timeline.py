"""records.Profile (+ optional RewriteLog) → Timeline: the track layout users and scripts rely on, and its launch
table (launchtable: each device launch's program, category, estimates, exec link and latency, as columns).

Roots, in order: host tracks (TINY, USER, GC), devices in natural order (NULL, NULL:1, AMD, AMD:1, …), Markers.
Under TINY: its spans, then `Launches` (the exec events, each with flows to the device work it started).
Under a device root: its own queue track, `<root> Graph`, engines (`<root>:SDMA:0`, …), then `<device> Memory` and
`<device> Buffers` (a slice per buffer lifetime, on as many lanes as overlaps need), SQTT launches, PMA captures.

A build may be partial (`stages`): the device queue, copy-engine and `<root> Graph` tracks are always there, each stage
adds its part. Every trace and the site show the full build (ALL_STAGES); an analysis asks only for what it reads
(`vizexport top`: no stage, or MARKERS for --between: the device slices' times, names and launch table, without the
args they show), and what it reads is the same as in the full build.
"""
from __future__ import annotations

import bisect
from array import array
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..devices import HOST, device_root, is_copy_engine, natural
from ..forks import SERIAL, Executor, Later
from ..launchtable import CATEGORIES, GRAPH, LaunchRows, LaunchTableBuilder
from ..limits import TEXT_CAP, capped
from ..pma import add_pma_tracks
from ..programs import ProgramIndex
from ..records import Alloc, Exec, Marker, Profile, RewriteLog, Span, SpanTable
from ..timeline import (
    ARG_BYTES,
    ARG_GBS,
    ARG_METADATA,
    ARG_PROGRAM,
    ARG_TB,
    META_NAME,
    META_RELEASE,
    Frame,
    Role,
    Timeline,
    Track,
    slice_events,
)
from .buffers import Lifetimes, lifetimes, slice_name, slices
from .categories import category
from .estimates import LaunchEstimates, LaunchFigures, rate_args
from .launches import LAUNCHES, ExecArgs, LaunchLinks, Placed, add_launches, link_launches

if TYPE_CHECKING:
    from ..sqtt import Launch

FORK_SPANS = 300_000  # spans from which _beside works in a forked process (below, forking costs more)
_GATHER = 1 << 16  # spans of the biggest host track made at a time (the columns made meanwhile stay small)
# the stages of a build (see the module's docstring)
HOST_SPANS = "host spans"  # the host roots' tracks (TINY, USER, GC): Python-side spans
CALLSTACKS = "callstacks"  # every slice's Python callstack
SLICE_ARGS = "slice args"  # what device slices show beside their names and times: callstack text, metadata, program
#                            key, estimated rates, copy bytes (the launch table holds the figures analyses read)
LAUNCH_LINKS = "launches"  # the host's `Launches` track: each exec event, its flows to the device work it started, the
#                            launch latency and the exec's arguments (buffers, variables) on that work's slices (on a
#                            launch outside a JIT graph: with SLICE_ARGS)
GRAPH_FLOWS = "graph flows"  # JIT graph dependencies between entries
MEMORY = "memory"  # `<device> Memory` counters and `<device> Buffers` lifetimes
CAPTURES = "captures"  # decoded AMD SQTT/PMC launches and PMA captures: their tracks and (with SLICE_ARGS) the PMC
#                        args of kernel slices
MARKERS = "markers"
ALL_STAGES = frozenset({HOST_SPANS, CALLSTACKS, SLICE_ARGS, LAUNCH_LINKS, GRAPH_FLOWS, MEMORY, CAPTURES, MARKERS})


def _nested(st: np.ndarray, en: np.ndarray) -> bool:
    """Do slices sorted by (start, -end) nest without partial overlaps, so that one lane holds them all? Opened and
    closed as a track emits them (slice_events), exactly when at every depth each END closes the slice the BEGIN
    before it opened."""
    idx, is_end = slice_events(st, en - st)[1:]
    level = np.cumsum(np.where(is_end, np.int8(-1), np.int8(1)), dtype=np.int32) + is_end
    small = level.max(initial=0) < 1 << 15  # levels of up to 16 bits sort in linear time (a radix sort)
    by_level = idx[np.argsort(level.astype(np.int16) if small else level, kind="stable")]
    return bool((by_level[0::2] == by_level[1::2]).all())


def _lanes(st: list[int], en: list[int]) -> list[int]:
    """Lane of each slice (sorted by (start, -end)) when some overlap: the first whose open slices it nests in."""
    stacks: list[list[int]] = []
    out = []
    for s, e in zip(st, en, strict=True):
        lane = next((k for k, stack in enumerate(stacks) if _fits(stack, s, e)), len(stacks))
        if lane == len(stacks):
            stacks.append([])
        stacks[lane].append(e)
        out.append(lane)
    return out


def _fits(stack: list[int], st: int, en: int) -> bool:
    """Can a slice [st, en] go on a lane whose open slices end at `stack`? (closes those ended by st)"""
    while stack and stack[-1] <= st:
        stack.pop()
    return not stack or en <= stack[-1]


def build_timeline(prof: Profile, rewrites: RewriteLog | None = None, launches: list[Launch] | None = None,
                   stages: frozenset[str] = ALL_STAGES, executor: Executor = SERIAL) -> Timeline:
    """The profile's tracks (and, with its rewrites trace, kernel estimates and codegen names). `launches`: the
    profile's SQTT/PMC launches, decoded (sqtt.load_launches) unless given (or CAPTURES is not a stage). `stages`:
    what to build besides the device tracks (ALL_STAGES: everything). `executor`: where a big profile's launch links,
    counters, buffer lifetimes and host span order are made meanwhile (_Builder._beside; SERIAL: here, in turn)."""
    unknown = stages - ALL_STAGES
    if unknown:
        raise ValueError(f"no timeline stage {', '.join(sorted(unknown))} (stages: {', '.join(sorted(ALL_STAGES))})")
    if HOST_SPANS in stages and not prof.host_spans:
        raise ValueError("the profile was read without its host spans (load_profile(host=False))")
    if CAPTURES not in stages:
        launches = []
    elif launches is None:
        from ..sqtt import load_launches  # the SQTT decoder (and ELF reader) only for a profile with captures
        launches = load_launches(prof) if prof.captures else []
    builder = _Builder(prof, rewrites, launches, stages, executor)
    tl, deferred = builder.build()
    del builder  # what it read (launch links, exec events, counters) goes before the biggest host track is filled
    if deferred is not None:  # (the build's memory peak)
        deferred.place(tl, prof.spans)
    return tl


@dataclass
class _Launches:
    """What a device's spans add to the launch table besides their times and names, per span in track order."""

    keys: np.ndarray  # the launched program's key (bytes or None), object
    figures: np.ndarray  # (FLOPs, mem bytes, lds bytes) estimates, NaN where none: float64, n × 3


@dataclass
class _TrackColumns:
    """One device string's spans as its tracks hold them (sorted, each with its lane), before any is placed: rows
    give each span's name, args and callstack. Made apart from placing and interned only when placed, so that ids
    come in the order placing uses them."""

    idx: np.ndarray | None  # the profile's index of each device span (host spans are not looked up by it)
    st: np.ndarray
    dur: np.ndarray  # -1: an instant
    lanes: np.ndarray
    rows: np.ndarray  # each span's row of names, args and frames (int32: host columns travel between processes)
    names: list[str]  # rows in order of first use
    args: np.ndarray  # dict per row (shared by the spans of a row)
    frames: list[tuple[Frame, ...] | None]  # the row's callstack, outermost frame first
    launches: _Launches | None = None  # a device's spans (rows are spans then)


def _sorted_spans(spans: SpanTable, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of spans in track order, (start, -end) (a never-ended one has zero length): that order of `idx`,
    starts, durations (-1: instant) and lanes (one, unless a vectorized check finds partial overlaps)."""
    st, en = spans.st[idx], spans.en[idx]
    order = np.lexsort((-np.where(en == 0, st, en), st))  # as sorted() by (st, -(en or st)): stable
    st, en = st[order], np.maximum(en[order], st[order])
    lanes = np.zeros(len(idx), np.int8) if _nested(st, en) else np.array(_lanes(st.tolist(), en.tolist()))
    return order, st, _durations(st, en), lanes


def _durations(st: np.ndarray, en: np.ndarray) -> np.ndarray:
    """Slice durations of spans: -1 (an instant) where a span ends at or before it starts (or never ended: 0)."""
    return np.where(en > st, en - st, -1)


def _launch_rows(track: Track, keys: np.ndarray, categories: np.ndarray, figures: np.ndarray) -> LaunchRows:
    """A launch track's rows of the launch table: its events' times and names, and per event the rest."""
    return LaunchRows(np.array(track.ts, np.int64), np.array(track.dur, np.int64), np.array(track.names, np.int32),
                      keys.tolist(), categories, figures[:, 0].copy(), figures[:, 1].copy(), figures[:, 2].copy())


class _Once:
    """fn(x), worked out once per object x (kept alive, so that its id stays its own): Keys share a traceback or
    keys where the pickle shared them (profile._Payloads), and a span that shares one must not cost its size again
    (a 100,000-frame traceback behind 1,000 spans)."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.seen = fn, {}

    def __call__(self, x: Any) -> Any:
        hit = self.seen.get(id(x))
        if hit is None or hit[0] is not x:
            hit = self.seen[id(x)] = (x, self.fn(x))
        return hit[1]


def _frames(tb: Any) -> tuple[Frame, ...] | None:
    """A Python traceback (innermost frame first) as a callstack."""
    return tuple(Frame(f, line, fn) for f, line, fn, _ in reversed(tb)) if tb else None


def _tb_text(tb: Any) -> str:
    """"file:line function\n    code" per frame, innermost first, up to TEXT_CAP characters: whole frames, then a
    line saying how many more the slice's callstack has."""
    lines, size = [], 0
    for i, (f, line, fn, code) in enumerate(tb):
        frame = f"{f}:{line} {fn}\n    {code}"
        size += len(frame) + 1
        if size > TEXT_CAP:
            lines.append(capped(frame, TEXT_CAP) if not lines else
                         f"… {len(tb) - i:,} more frames (the slice's callstack holds them all)")
            break
        lines.append(frame)
    return "\n".join(lines)


def _first_text(keys: tuple) -> str | None:
    return next((capped(x) for x in keys if isinstance(x, str)), None)


class _KeyParts:
    """What spans show of their Keys' shared parts, each worked out once per object."""

    def __init__(self) -> None:
        self.tb_text, self.frames, self.context = _Once(_tb_text), _Once(_frames), _Once(_first_text)


def _key_args(k: Any, parts: _KeyParts) -> tuple[str, dict]:
    args = {}
    if k.tb:
        args[ARG_TB] = parts.tb_text(k.tb)
    if isinstance(k.ret, str) and k.ret:
        args[ARG_METADATA] = capped(k.ret, TEXT_CAP)
    ctx = parts.context(k.keys)
    if ctx is not None:
        args["rewrite_context"] = ctx
    return k.name, args


def _biggest_host(by_dev: dict[str, np.ndarray]) -> str | None:
    """The host device with the most spans (the last of the most, in by_device's order)."""
    host = sorted((d for d in by_dev if d in HOST), key=lambda d: len(by_dev[d]))
    return host[-1] if host else None


def _key_rows(spans: SpanTable, first: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray, list]:
    """Rows of a host track, one per Key code in `first` (in order): each code's row, and per row its name, args
    (a dict shared by the spans of the row) and callstack."""
    row = np.zeros(len(spans.keys), np.int32)
    row[first] = np.arange(len(first), dtype=np.int32)
    keys = [spans.keys[c] for c in first.tolist()]
    parts = _KeyParts()
    named = [_key_args(k, parts) for k in keys]
    return (row, [name for name, _ in named], np.fromiter((a for _, a in named), object, len(named)),
            [parts.frames(k.tb) for k in keys])


def _host_columns(spans: SpanTable, by_dev: dict[str, np.ndarray], skip: str | None) -> dict[str, _TrackColumns]:
    """Host devices' spans but `skip`'s (the biggest: _host_order): a row per shared Key, its name and args made
    once."""
    out = {}
    for dev in (d for d in by_dev if d in HOST and d != skip):
        idx = by_dev[dev]
        order, st, dur, lanes = _sorted_spans(spans, idx)
        codes = spans.key[idx[order]]
        used, first_at = np.unique(codes, return_index=True)
        row, names, args, frames = _key_rows(spans, used[np.argsort(first_at)])  # each Key in order of first use
        out[dev] = _TrackColumns(None, st, dur, lanes, row[codes], names, args, frames)
    return out


def _first_use(spans: SpanTable, idx: np.ndarray) -> np.ndarray:
    """The Key codes of rows `idx` in order of first use in their track's order (_sorted_spans'), found without
    sorting the rows: a code's first row is its least (start, -end, position)."""
    st, codes = spans.st[idx], spans.key[idx]
    least = np.full(len(spans.keys), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(least, codes, st)
    at = np.flatnonzero(st == least[codes])  # rows starting when their Key is first used (few)
    st, codes = st[at], codes[at]
    en = spans.en[idx[at]]
    en = np.where(en == 0, st, en)  # as _sorted_spans sorts them
    latest = np.full(len(spans.keys), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(latest, codes, en)
    at, st, en, codes = (x[en == latest[codes]] for x in (at, st, en, codes))
    used, first = np.unique(codes, return_index=True)  # `at` ascends: each code's first row left
    return used[np.lexsort((at[first], -en[first], st[first]))]


def _host_order(spans: SpanTable, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The track order of the biggest host device's rows `idx` (made in a forked process: only what little it
    returns travels): their order (positions in `idx`) and each one's lane (None: all on one)."""
    order, _, _, lanes = _sorted_spans(spans, idx)
    small = lambda a: a.astype(np.min_scalar_type(int(a.max(initial=0))))  # noqa: E731
    return small(order), small(lanes) if lanes.any() else None


class _Beside(NamedTuple):
    """What is made beside a build (_Builder._beside), in the order it is needed: a Later each (None: not built)."""

    links: Later | None  # LaunchLinks
    memory: Later | None  # Profile.memory()
    first_use: Later | None  # the biggest host device's Key codes in order of first use (_first_use)
    lifetimes: Later | None  # buffer lifetimes per device
    host_order: Later | None  # its spans' track order and lanes (_host_order)


@dataclass
class _RowIds:
    """Per row of a host track (a shared Key): its name's id, its callstack's (-1: none), its args (a dict shared by
    the spans of the row) and whether it has any. Interned when placing comes to the track."""

    sids: np.ndarray
    stacks: np.ndarray
    args: np.ndarray
    has_args: np.ndarray

    def append(self, track: Track, st: np.ndarray, dur: np.ndarray, rows: np.ndarray) -> None:
        """Slices of these rows appended to `track`: starts, durations, names, args and callstacks."""
        at = len(track)
        track.ts.frombytes(st.tobytes())
        track.dur.frombytes(dur.tobytes())
        track.names.frombytes(self.sids[rows].astype(f"i{track.names.itemsize}").tobytes())
        stacks = self.stacks[rows]
        with_args, with_stack = np.flatnonzero(self.has_args[rows]), np.flatnonzero(stacks >= 0)
        track.args.update(zip((with_args + at).tolist(), self.args[rows[with_args]].tolist(), strict=True))
        track.stacks.update(zip((with_stack + at).tolist(), stacks[with_stack].tolist(), strict=True))


@dataclass
class _Deferred:
    """The biggest host device's track as interned where it goes (its names and callstacks get their ids then),
    filled once its order comes (_host_order) and moved there."""

    device: str
    group: Track
    at: int  # its first track's index among the timeline's tracks
    idx: np.ndarray  # its rows
    row: np.ndarray  # Key code → row
    ids: _RowIds
    order: Later  # its order and lanes (_host_order)

    def place(self, tl: Timeline, spans: SpanTable) -> None:
        """Its lanes, filled a part at a time and moved where they go (the launch table's track uuids follow)."""
        order, lanes = self.order()
        first = len(tl.tracks)
        for lane in range(int(lanes.max()) + 1 if lanes is not None else 1):
            mine = order if lanes is None else order[lanes == lane]
            track = tl.add_track(self.device, self.group, "slice", Role.HOST)
            for at in range(0, len(mine), _GATHER):
                rows_at = self.idx[mine[at:at + _GATHER]]
                st = spans.st[rows_at]
                self.ids.append(track, st, _durations(st, spans.en[rows_at]), self.row[spans.key[rows_at]])
        moved = tl.move_last(len(tl.tracks) - first, self.at)
        tl.launches = replace(tl.launches, tracks=[moved.get(u, u) for u in tl.launches.tracks])


class _Builder:
    def __init__(self, prof: Profile, rewrites: RewriteLog | None, launches: list[Launch],
                 stages: frozenset[str] = ALL_STAGES, executor: Executor = SERIAL) -> None:
        self.p, self.tl, self.launches = prof, Timeline(prof.path), launches
        self.stages, self.executor = stages, executor
        self.est = LaunchEstimates(rewrites) if rewrites is not None else None
        self.programs = ProgramIndex(rewrites.contexts) if rewrites is not None else None  # UOps, for categories
        self.placed = Placed()  # where device spans and graph batches went
        self.table = LaunchTableBuilder()
        self._categories: dict[tuple[int, bytes | None, Role], int] = {}  # (name id, program, role) → category code
        self.pmc: dict[int, dict] = {}
        self._named: dict[tuple[str, str], tuple[list[int], list]] = {}  # (device, kernel) → its exec events
        self.parts = parts = _KeyParts()
        # what device spans show of their Key, and of their program key, made once per object (closures without
        # self: a builder in no reference cycle, with what it read, goes as soon as its build is done)
        self._key_args = _Once(lambda k: _key_args(k, parts)[1])
        self._key_frames = _Once(lambda k: parts.frames(k.tb))
        self._hex = _Once(bytes.hex)
        self._deferred: _Deferred | None = None
        self._taken_lifetimes: dict[str, Lifetimes] | None = None

    def build(self) -> tuple[Timeline, _Deferred | None]:
        """Every track in order, but the biggest host device's, whose order comes from a forked process: its track's
        ids are interned where it goes, and it is left to fill and move there last (both processes are busy
        meanwhile)."""
        spans_by_dev = self.p.spans.by_device()
        self._biggest = _biggest_host(spans_by_dev) if HOST_SPANS in self.stages else None
        beside = self.beside = self._beside(spans_by_dev)
        columns, spans_by_dev = self._columns(spans_by_dev)
        self.links = beside.links() if beside.links is not None else LaunchLinks({}, {})
        self.memory = beside.memory() if beside.memory is not None else {}
        mem_devs = sorted(self.memory, key=natural)
        roots = {device_root(d) for d in spans_by_dev} | {device_root(d) for d in mem_devs}
        roots |= {LAUNCHES} if self.links.spans else set()
        order = [r for r in HOST if r in roots] + sorted(roots - set(HOST), key=natural)
        for root in order:
            self._root(root, spans_by_dev, columns, mem_devs)
        self._lifetimes()  # taken where no root placed buffers: the process that made them ends once all it made came
        if GRAPH_FLOWS in self.stages:
            self._flows()
        self._metadata()
        self.tl.launches = self.table.table([t.uuid for t in self.tl.tracks])
        if self.links.spans:
            add_launches(self.tl, self.launches_track, self.p, self.links, self.placed, self.exec_args)
        if MARKERS in self.stages:
            self._markers()
        return self.tl, self._deferred

    def _columns(self, spans_by_dev: dict[str, np.ndarray]) -> tuple[dict[str, _TrackColumns], dict[str, np.ndarray]]:
        """Every placed device string's spans as columns but the biggest host device's, and each placed one's span
        indexes."""
        columns = _host_columns(self.p.spans, spans_by_dev, self._biggest) if HOST_SPANS in self.stages else {}
        if HOST_SPANS not in self.stages:
            spans_by_dev = {d: idx for d, idx in spans_by_dev.items() if d not in HOST}
        # exec events give launches their variables (for estimates) and their arguments (launch links)
        linked = self.est is not None or LAUNCH_LINKS in self.stages
        execs = self._execs = self._execs_by_device() if linked else {}
        launches = self.launches  # AMD SQTT/PMC captures per kernel launch
        if launches and SLICE_ARGS in self.stages:
            from ..sqtt import pmc_span_args
            self.pmc = pmc_span_args(self.p, launches)
        columns |= {d: self._device_columns(d, idx, execs.get(d)) for d, idx in spans_by_dev.items() if d not in HOST}
        return columns, spans_by_dev

    def _beside(self, spans_by_dev: dict[str, np.ndarray]) -> _Beside:
        """What is made beside the rest of this build: for a big profile, in turn by a forked process, in the order
        it is needed. All travels cheaply (dicts and lists of ints, columns); the biggest host device's order is
        half of this build's work. Where that process reads Python objects (the points), it copies their pages."""
        p, spans, biggest = self.p, self.p.spans, spans_by_dev.get(self._biggest)
        tasks = _Beside(partial(link_launches, p) if LAUNCH_LINKS in self.stages else None,
                        p.memory if MEMORY in self.stages else None,
                        partial(_first_use, spans, biggest) if biggest is not None else None,
                        partial(lifetimes, p) if MEMORY in self.stages else None,
                        partial(_host_order, spans, biggest) if biggest is not None else None)
        executor = self.executor if len(spans) >= FORK_SPANS else SERIAL
        later = iter(executor.forked_in_turn([t for t in tasks if t is not None]))
        return _Beside(*(next(later) if t is not None else None for t in tasks))

    def _root(self, root: str, spans_by_dev: dict[str, np.ndarray], columns: dict[str, _TrackColumns],
              mem_devs: list[str]) -> None:
        """A root's group and its tracks, in order."""
        group = self.tl.add_track(root, None, "group", Role.HOST if root in HOST else Role.DEVICE)
        devs = sorted((d for d in spans_by_dev if device_root(d) == root), key=natural)
        for d in (d for d in devs if d == root):
            self._place_or_defer(group, d, columns, spans_by_dev)
        if root == LAUNCHES and self.links.spans:
            self.launches_track = self.tl.add_track("Launches", group, "slice", Role.LAUNCHES)
        if root in self._graph_roots:
            self._graph_track(group, root)
        for d in (d for d in devs if d != root):
            self._place_or_defer(group, d, columns, spans_by_dev)
        for d in mem_devs:
            if device_root(d) == root:
                self._memory(group, d, *self.memory[d])
                self._buffers(group, d, self._lifetimes().get(d))
        mine = [la for la in self.launches if device_root(la.device) == root]
        if mine:
            from ..sqtt import add_sqtt_tracks
            add_sqtt_tracks(self.tl, group, self.p, mine)
        if CAPTURES in self.stages and any(c.kind == "pma" and device_root(c.device) == root
                                           for c in self.p.captures):
            add_pma_tracks(self.tl, group, self.p)

    def _lifetimes(self) -> dict[str, Lifetimes]:
        """Buffer lifetimes per device (none where there is no memory), taken once, when first needed: they are made
        beside meanwhile."""
        if self._taken_lifetimes is None:
            self._taken_lifetimes = self.beside.lifetimes() if self.beside.lifetimes is not None else {}
        return self._taken_lifetimes

    @cached_property
    def _graph_roots(self) -> set[str]:
        return {device_root(g.device) for g in self.p.graphs if g.entries}

    # --- slices -------------------------------------------------------------------------------------------------
    def _place_or_defer(self, group: Track, dev: str, columns: dict[str, _TrackColumns],
                        spans_by_dev: dict[str, np.ndarray]) -> None:
        if dev != self._biggest:
            self._place(group, dev, columns.pop(dev))
            return
        first_use, order = self.beside.first_use, self.beside.host_order
        assert first_use is not None and order is not None  # made for the biggest host device
        row, names, args, frames = _key_rows(self.p.spans, first_use())
        self._deferred = _Deferred(dev, group, len(self.tl.tracks), spans_by_dev[dev], row,
                                   self._row_ids(names, args, frames), order)

    def _row_ids(self, names: list[str], args: np.ndarray, frames: list[tuple[Frame, ...] | None]) -> _RowIds:
        """A track's rows' ids, interned now (in the order placing uses them)."""
        intern, stack = self.tl.intern, _Once(self.tl.intern_stack)
        sids = np.array([intern(name) for name in names], np.int64)
        stacks = np.array([-1 if f is None else stack(f) for f in frames] if CALLSTACKS in self.stages else
                          np.full(len(frames), -1), np.int64)
        return _RowIds(sids, stacks, args, np.fromiter(map(bool, args), bool, len(args)))

    def _place(self, group: Track, dev: str, c: _TrackColumns) -> None:
        """Spans of one device string on as many same-named lanes as keep every lane properly nested."""
        ids = self._row_ids(c.names, c.args, c.frames)
        n_lanes = int(c.lanes.max(initial=0)) + 1
        role = Role.HOST if dev in HOST else Role.COPY if is_copy_engine(dev) else Role.QUEUE
        for lane in range(n_lanes):
            at = np.flatnonzero(c.lanes == lane) if n_lanes > 1 else slice(None)
            track = self.tl.add_track(dev, group, "slice", role)
            ids.append(track, c.st[at], c.dur[at], c.rows[at])
            if c.idx is not None:
                self.placed.add_spans(track, c.idx[at])
            if c.launches is not None:
                keys = c.launches.keys[at]
                self.table.add(track.uuid, _launch_rows(track, keys, self._category_codes(track, keys),
                                                        c.launches.figures[at]))

    def _category_codes(self, track: Track, keys: np.ndarray) -> np.ndarray:
        """Each launch's category (a code into CATEGORIES) from its name as shown, its track and its program."""
        cache, strings, programs = self._categories, self.tl.strings, self.programs
        out = np.empty(len(keys), np.int8)
        for j, (sid, key) in enumerate(zip(track.names.tolist(), keys.tolist(), strict=True)):
            code = cache.get((sid, key, track.role))
            if code is None:
                name = strings[sid]
                uops = programs.uops(key, name) if programs is not None else None
                code = cache[(sid, key, track.role)] = CATEGORIES.index(category(name, track.role, uops))
            out[j] = code
        return out

    def _device_columns(self, dev: str, idx: np.ndarray, execs: list | None) -> _TrackColumns:
        """A device's spans: a row each (kernel args name the launch)."""
        order, st, dur, lanes = _sorted_spans(self.p.spans, idx)
        at = idx[order]
        sub = self.p.spans.rows(at)
        names, args = [], np.empty(len(sub), object)
        figures = np.full((len(sub), 3), np.nan)
        launched = self._execs_at(execs, st).tolist()
        copies = self.p.spans.copies(at).tolist()
        for j, (s, i) in enumerate(zip(sub, at.tolist(), strict=True)):
            name, a, fig = self._device_name_args(s, self._exec_row(execs, launched[j]), copies[j])
            names.append(name)
            args[j] = {**a, **self.pmc[i]} if i in self.pmc else a
            if fig is not None:
                figures[j] = [np.nan if v is None else v for v in fig]
        frames = [self._key_frames(s.key) for s in sub] if CALLSTACKS in self.stages else [None] * len(sub)
        keys = np.empty(len(sub), object)
        keys[:] = [s.profile_key for s in sub]
        return _TrackColumns(at, st, dur, lanes, np.arange(len(sub), dtype=np.int32), names, args, frames,
                             _Launches(keys, figures))

    def _device_name_args(self, s: Span, ex: tuple[Any, Exec] | None, copy: bool
                          ) -> tuple[str, dict, LaunchFigures | None]:
        """A device span's name as shown, its args (SLICE_ARGS; else none), and its estimated figures (None
        without); `ex`: its device's latest exec at or before its start (_exec_for), `copy`: is_copy(s)."""
        k = s.key
        ctx = self.est.lookup(s.profile_key, k.name) if self.est is not None else None
        if SLICE_ARGS not in self.stages:  # what analyses read: the name and the figures
            if ctx is None:
                return k.name, {}, None
            return ctx.key.name, {}, self._figures(s, ctx, ex)
        args, dur = dict(self._key_args(k)), (s.en or s.st) - s.st
        if ctx is None and copy:  # a range linked to a kernel is one (0.11 flags every CPU range a copy)
            if isinstance(k.ret, int):
                args[ARG_BYTES] = k.ret
                if dur > 0:
                    args[ARG_GBS] = round(k.ret / dur, 3)
            return k.name, args, None
        if ex is not None and s.graph < 0 and LAUNCH_LINKS in self.stages:
            args.update(self.exec_args(*ex))
        figures = self._figures(s, ctx, ex) if ctx is not None else None
        if figures is not None:
            args.update(rate_args(figures, dur))
        if s.profile_key is not None:
            args[ARG_PROGRAM] = self._hex(s.profile_key)
        return k.name if ctx is None else ctx.key.name, args, figures

    def _figures(self, s: Span, ctx: Any, ex: tuple[Any, Exec] | None) -> LaunchFigures | None:
        """A kernel launch's estimated figures with its variables, None where it has no duration or no variables:
        those of its exec event `ex`, or for a JIT graph entry the batch's (as tinygrad's viewer does)."""
        assert self.est is not None
        var_vals: dict | None = ex[1].var_vals if ex is not None else {}
        if self.est.exec_by_name:  # 0.12: only an exec event of this kernel gives it variables
            named = self._exec_for(self._named_execs(s.device, ctx.key.name), s.st)
            var_vals = named[1].var_vals if named is not None else None
        return self.est.figures(ctx, var_vals) if var_vals is not None and (s.en or s.st) > s.st else None

    # --- kernel launches: exec points and buffers ----------------------------------------------------------------
    def _execs_by_device(self) -> dict[str, list]:
        out: dict[str, list] = defaultdict(list)
        buffers: dict[Any, Alloc] = {}
        for pt in self.p.points:
            if pt.kind == "exec" and isinstance(pt.arg, Exec):
                out[pt.device].append((pt.ts, pt.key, pt.arg))
            elif pt.kind == "alloc" and isinstance(pt.arg, Alloc):
                buffers[pt.key] = pt.arg
        self.exec_args = ExecArgs(buffers)
        for v in out.values():
            v.sort(key=lambda x: x[0])
        return {d: ([t for t, _, _ in v], v) for d, v in out.items()}

    def _named_execs(self, device: str, name: str) -> tuple[list[int], list]:
        """The exec events of one kernel name on a device, as _execs_by_device gives them (made once per name)."""
        hit = self._named.get((device, name))
        if hit is None:
            ts, rows = self._execs.get(device, ([], []))
            mine = [(t, r) for t, r in zip(ts, rows, strict=True) if r[2].name == name]
            hit = self._named[(device, name)] = ([t for t, _ in mine], [r for _, r in mine])
        return hit

    @staticmethod
    def _execs_at(execs: Any, st: np.ndarray) -> np.ndarray:
        """As _exec_for, for many starts at once: the index of each one's exec in `execs`, -1 where none."""
        if not execs:
            return np.full(len(st), -1, np.int64)
        return np.searchsorted(np.array(execs[0], np.int64), st, "right") - 1

    @staticmethod
    def _exec_row(execs: Any, i: int) -> tuple[Any, Exec] | None:
        return (execs[1][i][1], execs[1][i][2]) if i >= 0 else None

    @staticmethod
    def _exec_for(execs: Any, st: int) -> tuple[Any, Exec] | None:
        """The latest exec point at or before a kernel's start (tinygrad back-dates exec to the launch call)."""
        return _Builder._exec_row(execs, bisect.bisect_right(execs[0], st) - 1) if execs else None

    # --- graph batches, flows, memory, markers --------------------------------------------------------------------
    def _graph_track(self, group: Track, root: str) -> None:
        mine = [gi for gi, g in enumerate(self.p.graphs) if g.entries and device_root(g.device) == root]
        sts, ens = self.p.spans.batch_extents([self.p.graphs[gi].entries for gi in mine])
        batches = [(st, en, len(self.p.graphs[gi].entries), gi)
                   for st, en, gi in zip(sts.tolist(), ens.tolist(), mine, strict=True)]
        lanes: list[tuple[Track, list[int]]] = []
        for st, en, n, gi in sorted(batches, key=lambda b: (b[0], -b[1])):
            lane = next((lane for lane in lanes if lane[1][0] <= st), None)
            if lane is None:
                lane = (self.tl.add_track(f"{root} Graph", group, "slice", Role.GRAPH), [0])
                lanes.append(lane)
            track, last = lane
            last[0] = en
            track.ts.append(st)
            track.dur.append(en - st if en > st else -1)
            track.names.append(self.tl.intern(f"batched {n}"))
            self.placed.batches[gi] = (track, len(track) - 1)
        for track, _ in lanes:
            keys = np.full(len(track), None, object)
            self.table.add(track.uuid, _launch_rows(track, keys, np.full(len(track), CATEGORIES.index(GRAPH), np.int8),
                                                    np.full((len(track), 3), np.nan)))

    def _flows(self) -> None:
        """Graph dependencies: a flow from each entry an entry waits for to that entry (placed entries looked up at
        once)."""
        edges = array("q")  # (the entry waited for, the entry) as span rows, in order
        for g in self.p.graphs:
            for i, deps in enumerate(g.deps or ()):
                for d in deps if isinstance(deps, (list, tuple)) else (deps,):
                    if isinstance(d, int) and 0 <= d < len(g.entries) and i < len(g.entries):
                        edges.extend((g.entries[d], g.entries[i]))
        rows = np.frombuffer(edges, np.int64)
        found, tracks, events = self.placed.spans(rows)
        if not found.all():
            raise KeyError(int(rows[np.argmin(found)]))
        t = self.placed.tracks
        self.tl.flows([t[a] for a in tracks[0::2].tolist()], events[0::2].tolist(),
                      [t[b] for b in tracks[1::2].tolist()], events[1::2].tolist())

    def _memory(self, group: Track, dev: str, ts: list[int], totals: list[int]) -> None:
        """Live buffer bytes over time (Profile.memory): its maximum is the device's peak."""
        track = self.tl.add_track(f"{dev} Memory", group, "counter", Role.MEMORY, unit="bytes")
        track.ts.extend(ts)
        track.values.extend(totals)

    def _buffers(self, group: Track, dev: str, found: Lifetimes | None) -> None:
        """One slice per buffer lifetime (tinygrad/buffers.py), lanes as overlaps need."""
        if found is None:
            return
        sts, ens = found.st.tolist(), found.en.tolist()
        lanes = _lanes(sts, ens)
        tracks = [self.tl.add_track(f"{dev} Buffers", group, "slice", Role.BUFFERS) for _ in range(max(lanes) + 1)]
        names: dict[tuple[int, str], int] = {}  # (bytes, dtype) → the name id of its buffers' slices
        for lane, st, en, named, args in zip(lanes, sts, ens, *slices(self.p, found), strict=True):
            track = tracks[lane]
            track.args[len(track)] = args
            track.ts.append(st)
            track.dur.append(en - st)
            sid = names.get(named)
            if sid is None:
                sid = names[named] = self.tl.intern(slice_name(*named))
            track.names.append(sid)

    def _metadata(self) -> None:
        """The trace's name, the tinygrad release that wrote the profile and each device's properties."""
        p, meta = self.p, self.tl.metadata
        meta[META_NAME] = f"tinygrad {p.release.name} {Path(p.path).name}"
        meta[META_RELEASE] = f"{p.release.name} ({p.release.confidence}: {p.release.reason})"
        self.tl.device_props = {d.device: d.props for d in sorted(p.devices, key=lambda d: natural(d.device))
                                if d.props}  # the last event of a device wins

    def _markers(self) -> None:
        marks = sorted((pt for pt in self.p.points if pt.kind == "marker"), key=lambda pt: pt.ts)
        if not marks:
            return
        track = self.tl.add_track("Markers", None, "slice", Role.MARKERS)
        colors: dict[str, dict] = {}  # one args dict per colour: the markers of a name and colour share a packet tail
        for pt in marks:
            m = pt.arg if isinstance(pt.arg, Marker) else Marker(str(pt.arg), None)
            track.ts.append(pt.ts)
            track.dur.append(-1)
            track.names.append(self.tl.intern(m.name))
            if m.color:
                track.args[len(track.ts) - 1] = colors.setdefault(m.color, {"color": m.color})
