"""profile.pkl (a list of Profile* stand-ins, any release 0.10.1 … master) → records.Profile."""
from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import chain, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .. import pickles
from ..compiled import compiled
from ..devices import HOST
from ..forks import SERIAL, Executor
from ..gcpause import gc_paused
from ..pickles import InputError, StandInType, Stub, brief, class_name, qualname, streaming
from ..records import (
    INT64,
    SPAN_COLUMNS,
    Alloc,
    Capture,
    DeviceInfo,
    Exec,
    GraphBatch,
    Key,
    Marker,
    PMCSample,
    Point,
    Profile,
    Program,
    Release,
    SpanTable,
)
from .common import (
    DTypeText,
    as_key,
    dtype_bits,
    int64,
    link_keys,
    ns,
    ns_column,
    plain_value,
    sequence,
    strip_ansi,
    text,
    traceback,
)
from .releases import profile_release, traits, uop_leaf, with_override
from .standins import uop_view

EMPTY = Release("unknown", "ambiguous", "empty profile: nothing to tell the release by")


STREAM_MIN_BYTES = 32 << 20  # profiles this big are read batch by batch (pickles.streaming): memory stays bounded


def load_profile(path: str | Path, tinygrad_version: str | None = None, executor: Executor = SERIAL,
                 host: bool = True) -> Profile:
    """Read a tinygrad profile.pkl safely (nothing in it is executed) into version-neutral records; a big one is
    read in `executor`'s workers too (pickles.streaming). `host`: False leaves out the host's ranges (TINY, USER,
    GC: most of a profile's events) for what reads device work only."""
    with gc_paused():
        prof = stream_profile(path, tinygrad_version, executor=executor, host=host)
        return prof if prof is not None else profile_from(*pickles.load(path), str(path), tinygrad_version, host)


def stream_profile(path: str | Path, tinygrad_version: str | None = None, min_bytes: int | None = None,
                   executor: Executor = SERIAL, host: bool = True) -> Profile | None:
    """The profile in a big file, read while it is unpickled; None if the file is small or not streamable (the
    caller then loads it whole, which also gives the usual errors)."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return None
    if size < (STREAM_MIN_BYTES if min_bytes is None else min_bytes):
        return None
    handover = _Handover(size if executor.parallel else 0)
    reader = _EventReader(str(path), host=host, handover=handover)

    def consume(items: list) -> None:
        if reader.n == 0 and is_rewrites(items):
            raise streaming.StreamAbort("a rewrites trace")
        reader.feed(items)

    try:
        classes, part = streaming.stream(path, consume,
                                         tail=partial(_EventReader, str(path), tail=True, host=host, handover=handover),
                                         min_front=LEAF_EVENTS,  # the front has the events the release is told by
                                         executor=executor)
        if part is not None:
            reader.merge(part)
    except (streaming.StreamAbort, *_LAYOUT_ERRORS):  # the whole-file load decides (and words any error)
        return None
    return _finish(reader, classes, str(path), tinygrad_version)


_LAYOUT_ERRORS = (AttributeError, TypeError, ValueError, KeyError, IndexError, ArithmeticError)


def _layout_error(path: str, e: Exception) -> InputError:
    if isinstance(e, KeyError) and e.args:
        return InputError(f"{path}: an event without its field {brief(e.args[0])}; unknown tinygrad release?")
    return InputError(f"{path}: unexpected event layout ({type(e).__name__}: {e}); unknown tinygrad release?")


def profile_from(obj: Any, classes: set[str], path: str, tinygrad_version: str | None = None, host: bool = True
                 ) -> Profile:
    """The profile records of an already (safely) unpickled object."""
    if not isinstance(obj, list) or is_rewrites(obj):
        kind = "a rewrites trace" if is_rewrites(obj) else f"a {type(obj).__name__}"
        raise InputError(f"{path}: not a tinygrad profile ({kind}; a profile.pkl holds a list of events)")
    reader = _EventReader(path, host=host)
    try:
        reader.feed(obj)
    except InputError as e:  # a field the reader refuses, named
        raise InputError(f"{path}: {e}") from None
    except _LAYOUT_ERRORS as e:
        raise _layout_error(path, e) from None
    return _finish(reader, classes, path, tinygrad_version)


def _finish(reader: _EventReader, classes: set[str], path: str, override: str | None) -> Profile:
    try:
        return reader.finish(classes, override)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except _LAYOUT_ERRORS as e:
        raise _layout_error(path, e) from None


def is_rewrites(obj: Any) -> bool:
    """Does an unpickled object look like a rewrites trace (any release) rather than a profile?"""
    if isinstance(obj, list):  # 0.10.0 rewrites: a list of (key, contexts) pairs
        return bool(obj) and all(isinstance(x, tuple) and len(x) == 2 for x in obj[:3])
    return class_name(obj) == "RewriteTrace" or (isinstance(obj, tuple) and len(obj) in (2, 3))


_clean_name = lru_cache(maxsize=4096)(strip_ansi)  # exec and marker names repeat once per launch / step

LEAF_EVENTS = 20000  # release detection looks at UOps in the first this many events
LEAF_VISITS = 100_000  # … and visits at most this many of their nodes
_HASHABLE = frozenset((str, bytes, int, float, bool, type(None)))
_TEXT, _KEY = frozenset((str,)), frozenset((bytes, type(None)))


def _cheap_keys(keys: Any) -> bool:
    """Whether a TracingKey's keys hash in time linear in their size: scalars and stand-ins (hashed by identity).
    Checked with C-level maps: a payload of shared nested tuples from a hostile pickle would take hours to hash."""
    return type(keys) is tuple and all(t in _HASHABLE or type(t) is StandInType for t in set(map(type, keys)))


def _cheap_tb(tb: Any) -> bool:
    """Whether a traceback is (file, line, function, code) frames of texts and integers, cheap to hash."""
    return tb is None or (type(tb) is tuple and set(map(type, tb)) <= {tuple} and set(map(len, tb)) <= {4} and
                          set(map(type, chain.from_iterable(tb))) <= {str, int})


class _Hashed:
    """A value whose hash is worked out once: content keys hash one big shared traceback again and again."""

    __slots__ = ("hash", "value")

    def __init__(self, value: Any) -> None:
        self.value, self.hash = value, hash(value)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return type(other) is _Hashed and (self.value is other.value or self.value == other.value)

    def __reduce__(self) -> tuple:
        return _Hashed, (self.value,)


@dataclass
class _Payload:
    """What the reader makes of a TracingKey's `keys` or `tb` object."""

    cheap: bool  # hashing it costs time linear in its size
    hashed: _Hashed | None  # it, for content keys (None: cheap only as None)
    kept: Any  # what the Key keeps of it (common.link_keys, common.traceback)
    types: tuple = ()  # keys: the types of its items, in order (True == 1: content keys tell them apart)


class _Payloads:
    """The `keys` and `tb` of TracingKeys, each object read once per batch: a pickle's memo lets any number of
    TracingKeys share one (a 100,000-frame traceback behind 1,000 spans costs 2 MB of file), and reading it for
    each would cost its size each time, in time and in copies kept."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[Any, _Payload]] = {}  # id → (the object, kept alive: the id stays its own; it)

    def keys(self, keys: Any) -> _Payload:
        hit = self.seen.get(id(keys))
        if hit is None or hit[0] is not keys:
            cheap = _cheap_keys(keys)
            hit = self.seen[id(keys)] = (keys, _Payload(cheap, _Hashed(keys) if cheap else None, link_keys(keys),
                                                        tuple(type(x) for x in keys) if cheap else ()))
        return hit[1]

    def tb(self, tb: Any) -> _Payload:
        hit = self.seen.get(id(tb))
        if hit is None or hit[0] is not tb:
            cheap = _cheap_tb(tb)
            hit = self.seen[id(tb)] = (tb, _Payload(cheap, _Hashed(tb) if cheap and tb is not None else None,
                                                    traceback(tb)))
        return hit[1]


def _const_leaves(events: list) -> list[tuple[int, bool]]:
    """CONST observations from UOps inside TracingKey.keys of host spans (for the 0.14.0/master decision)."""
    out: list[tuple[int, bool]] = []
    seen: set[int] = set()
    stack = [k for e in events for k in sequence(e.name.__dict__.get("keys")) if class_name(k) == "UOp"]
    visits = 0
    while stack and len(out) < 2000 and visits < LEAF_VISITS:
        visits += 1
        u = stack.pop()
        if id(u) in seen or (v := uop_view(u)) is None:
            continue
        seen.add(id(u))
        op, dtype, src, arg = v[:4]
        if (leaf := uop_leaf(op, dtype, src, arg)) is not None:
            out.append(leaf)
        stack.extend(s for s in sequence(src)[:LEAF_VISITS] if class_name(s) == "UOp")
    return out


def _has_uop_keys(e: Any) -> bool:
    return class_name(e) == "ProfileRangeEvent" and class_name(e.__dict__.get("name")) == "TracingKey"


class _EventReader:
    """One pass over the events, fed in batches (the whole list, or each batch as it is unpickled).

    Written for speed: a profile can hold tens of millions of events. What needs the whole profile (device clock
    offsets, which may come last; the release, which decides alloc sizes) is applied by `finish`.
    """

    def __init__(self, path: str, tail: bool = False, host: bool = True, handover: _Handover | None = None) -> None:
        self.prof = Profile(path, EMPTY, 0, host_spans=host)
        self.handover = handover  # how a back half's span columns reach the front
        self.host = host  # read the host's ranges (TINY, USER, GC)
        self.n = 0
        # per class (qualified name), the field names of its first instance, and of the first graph entry of a first
        # ProfileGraphEvent: for release detection
        self.fields: dict[str, tuple[tuple, tuple | None]] = {}
        self.handlers: dict[type, Any] = {}
        self.leaves = 0 if tail else LEAF_EVENTS  # events to look at for UOps (release detection)
        self.leaf_events: list = []  # host spans among the first `leaves` events
        self.offsets: dict[str, tuple[int, int]] = {}  # device → (compute, copy) clock offset in ns
        self.keys: dict[Any, Key] = {}  # name str or TracingKey content → Key, so repeated names share one Key
        # a span's name → its Key's code in the span columns (read straight into them: no list of Keys to code)
        self.codes: dict[str, int] = {}  # name str → code
        self.ids: dict[int, int] = {}  # id(TracingKey) → code, valid for one batch (ids are reused once freed)
        self.payloads = _Payloads()  # TracingKeys' keys and tracebacks read so far in this batch
        # allocs finished by `finish`: their dtype text, and the size of those given in elements (element bits,
        # and how a dtype prints, depend on the release)
        self.allocs: list[tuple[Alloc, Any, bool]] = []
        self.ranges: list = []  # ProfileRangeEvents not yet read (read column by column, see _read_ranges)
        self.unparsed = _Unparsed()  # ranges (and graph entries) read but not yet in the columns
        self.columns = _SpanColumns()  # the spans read so far (no Span object is made per event)
        self.n_spans = 0  # … and those pending in `unparsed`

    def feed(self, events: list) -> None:
        handlers = self.handlers
        for e in events:
            h = handlers.get(type(e))
            if h is None:
                h = self._handler(e)
            h(e)
        self._read_ranges()
        self._make_spans()
        if self.n < self.leaves:
            self.leaf_events += [e for e in events[:self.leaves - self.n] if _has_uop_keys(e)]
        self.n += len(events)
        self.ids.clear()
        self.payloads = _Payloads()

    def _handler(self, e: Any) -> Any:
        names = {"ProfileRangeEvent": self.ranges.append, "ProfilePointEvent": self.point,
                 "ProfileGraphEvent": self.graph, "ProfileProgramEvent": self.program,
                 "ProfileDeviceEvent": self.device, "ProfileSQTTEvent": self.sqtt, "ProfilePMCEvent": self.pmc,
                 "ProfilePMAEvent": self.pma}
        name = qualname(e)
        if name:
            ents = sequence(e.__dict__.get("ents")) if name.endswith(".ProfileGraphEvent") else None
            self.fields[name] = (tuple(e.__dict__), tuple(getattr(ents[0], "__dict__", ())) if ents else None)
        h = self.handlers[type(e)] = names.get(name.rsplit(".", 1)[-1], self.unknown)
        return h

    def finish(self, classes: set[str], override: str | None) -> Profile:
        prof = self.prof
        fields = {name.rsplit(".", 1)[-1]: own for name, (own, _) in self.fields.items()}
        entry = next((entry for _, entry in self.fields.values() if entry is not None), None)
        if entry is not None:
            fields["ProfileGraphEntry"] = entry
        if self.n and not fields:
            raise InputError("not a tinygrad profile (its list holds no tinygrad events)")
        release = profile_release(classes, fields, _const_leaves(self.leaf_events)) if self.n else EMPTY
        prof.release, prof.n_events = with_override(release, override), self.n
        bitsize = traits(prof.release.name).dtype_bits
        if traits(prof.release.name).cpu_timed_on_hcq2:
            prof.untimed_why["CPU"] = (f"tinygrad {prof.release.name} times CPU kernels only on its HCQ2 path (run "
                                       "with HCQ2=1)")
        dtype_text, bits = DTypeText(prof.release.name), {}  # id(dtype) → its element bits: a run has a few dtypes
        total = 0
        for a, dt, in_elements in self.allocs:  # the allocs hold their dtypes: ids stay theirs
            a.dtype = dtype_text(dt)
            if in_elements:
                b = bits.get(id(dt))
                if b is None:
                    b = bits[id(dt)] = dtype_bits(dt, bitsize)
                a.nbytes = min(a.count, 10**12) * b // 8
            total += a.nbytes
        if total >= INT64:  # live bytes, at most all of them, are int64 counters
            raise InputError(f"its allocations (ProfilePointEvent alloc) add up to {total:,} bytes, past int64")
        prof.spans = self.columns.table()
        self._apply_offsets(prof.spans)
        self.leaf_events, self.allocs = [], []
        return prof

    def part(self) -> _Part:
        """What this reader of a stream's back half read, for the front's reader to `merge` (a part travels from a
        forked process: its spans go as the columns they are)."""
        prof, columns = self.prof, self.columns
        content = {id(k): c for c, k in self.keys.items() if type(c) is str or StandInType not in set(map(type, c[1]))}
        keys = [(content.get(id(k)), k) for k in columns.keys.values]
        return _Part(n=self.n, fields=self.fields, keys=keys, devices=columns.devices.values,
                     profile_keys=columns.profile_keys.values,
                     columns=self.handover.put(columns.ordered()) if self.handover else columns.ordered(),
                     points=_PointColumns.of(prof.points),
                     allocs=self.allocs, graphs=prof.graphs, programs=prof.programs, devices_info=prof.devices,
                     captures=prof.captures, unknown=prof.unknown, offsets=self.offsets)

    def merge(self, part: _Part) -> None:
        """Append what a reader of the stream's back half read (`part`): Keys of the same content as one of this
        reader's become that one, as in one reader."""
        prof, keys = self.prof, self.keys
        first, graphs = self.n_spans, len(prof.graphs)
        table = [k if c is None else keys.setdefault(c, k) for c, k in part.keys]
        columns = self.handover.get(part.columns) if type(part.columns) is _Placed else part.columns
        self.columns.append(columns, first, graphs, devices=part.devices, keys=table, profile_keys=part.profile_keys)
        self.n_spans += len(columns["st"])
        prof.graphs += (GraphBatch(g.device, [i + first for i in g.entries], g.deps, g.sigs) for g in part.graphs)
        prof.points += part.points.points()
        prof.programs += part.programs
        prof.devices += part.devices_info
        prof.captures += part.captures
        for name, n in part.unknown.items():
            prof.unknown[name] = prof.unknown.get(name, 0) + n
        for name, fields in part.fields.items():
            self.fields.setdefault(name, fields)
        self.allocs += part.allocs
        self.offsets.update(part.offsets)
        self.n += part.n

    def _apply_offsets(self, spans: SpanTable) -> None:
        """Each span's device clock offset (spans were read with raw device timestamps)."""
        for code, device in enumerate(spans.devices):
            comp, copy = self.offsets.get(device, (0, 0))
            if comp or copy:
                rows = spans.device == code
                off = np.where(spans.is_copy[rows], copy, comp)
                spans.st[rows] += off
                spans.en[rows] += off

    def key(self, name: Any) -> int:
        """The code of a span name's Key in the span columns."""
        if type(name) is str:
            c = self.codes.get(name)
            if c is None:
                k = self.keys.get(name)
                if k is None:
                    k = self.keys[name] = as_key(name)
                c = self.codes[name] = self.columns.keys.code(k)
            return c
        c = self.ids.get(id(name))
        if c is None:
            c = self.ids[id(name)] = self.columns.keys.code(self._content_key(name))
        return c

    def _content_key(self, name: Any) -> Key:
        """One Key per distinct TracingKey content (tinygrad makes a new TracingKey for every call)."""
        d = getattr(name, "__dict__", None)
        if class_name(name) != "TracingKey" or d is None:
            return as_key(name)
        ret, cat, display = d.get("ret"), d.get("cat"), d.get("display_name")
        keys, tb = self.payloads.keys(d.get("keys") or ()), self.payloads.tb(d.get("tb"))
        if not (keys.cheap and tb.cheap and type(display) is str and type(ret) in _HASHABLE and type(cat) in _HASHABLE):
            return as_key(name, (keys.kept, tb.kept))  # unusual payload: not shared, never hashed
        content = (display, keys.types, keys.hashed, type(ret), ret, tb.hashed, cat)
        k = self.keys.get(content)
        if k is None:
            k = self.keys[content] = as_key(name, (keys.kept, tb.kept))
        return k

    def _read_ranges(self) -> None:
        """The pending host/device ranges (most of a profile's events), a column at a time (_range_fields: no Python
        work per event). They hold their places among the spans (graph entries are indexed there) until `_make_spans`
        adds them to the columns."""
        if not self.ranges:
            return
        f = _range_fields(self.ranges, self.codes, self.ids)
        self.ranges.clear()
        if not set(map(type, f.devices)) <= _TEXT:  # checked a column at a time: the usual case costs one C loop
            f = f._replace(devices=list(map(text, f.devices)))
        if not self.host:
            f = _off_host(f)
        keys = f.keys
        if None in keys:  # a name seen for the first time
            keys = [self.key(n) if k is None else k for k, n in zip(keys, f.names, strict=True)]
        profile_keys = f.profile_keys
        if not set(map(type, profile_keys)) <= _KEY:
            profile_keys = [k if type(k) is bytes else None for k in profile_keys]
        copies = map(bool, f.copies) if f.copies is not None else repeat(False, len(keys))  # >= 0.14: none
        self.unparsed.add(f.devices, keys, f.sts, f.ens, profile_keys, copies)
        self.n_spans += len(keys)

    def _make_spans(self) -> None:
        """The ranges and graph entries read since the last call, into the columns in their order, their timestamps
        parsed at once (ns_column parses in bulk)."""
        u, self.unparsed = self.unparsed, _Unparsed()
        if not u.keys:
            return
        graph = np.full(len(u.keys), -1, np.int32)
        for first, n, g in u.graphs:
            graph[first:first + n] = g
        self.columns.add(_SpanBatch(u.devices, u.keys, _times(u.sts, "ProfileRangeEvent.st", none=False, array=True),
                                    _times(u.ens, "ProfileRangeEvent.en", array=True), u.profile_keys, u.copies, graph))

    def point(self, e: Any) -> None:
        d = e.__dict__
        kind, arg, device, key = d.get("name", ""), d.get("arg"), d.get("device", ""), d.get("key")
        if type(kind) is not str or type(device) is not str:
            kind, device = text(kind), text(device)
        if type(key) is not int:
            key = plain_value(key)
        if kind == "alloc" and type(arg) is dict:
            count, dt, nbytes = _count(arg.get("sz") or 0, "sz"), arg.get("dtype"), arg.get("nbytes")
            arg = Alloc(0 if nbytes is None else _count(nbytes, "nbytes"), "", count)
            self.allocs.append((arg, dt, nbytes is None))
        elif kind == "exec" and type(arg) is dict:
            name, color = _clean_name(text(arg.get("name", "")))
            arg = Exec(name, color, _var_vals(arg.get("var_vals")), [plain_value(b) for b in sequence(arg.get("bufs"))],
                       _ints(arg.get("inputs")), _ints(arg.get("outputs")),
                       tuple(text(getattr(m, "__dict__", {}).get("name", m)) for m in sequence(arg.get("metadata"))))
        elif kind == "marker" and type(arg) is dict:
            color = arg.get("color")
            arg = Marker(_clean_name(text(arg.get("name", "")))[0], None if color is None else text(color))
        try:
            ts = ns(d["ts"])
        except ValueError as e:
            raise InputError(f"ProfilePointEvent.ts: {e}") from None
        self.prof.points.append(Point(device, kind, ts, key, arg))

    def graph(self, e: Any) -> None:
        self._read_ranges()  # entries are indexed among the spans: the ranges before them come first
        d = e.__dict__
        raw = sequence(d.get("sigs"))
        sigs = _times(raw, "ProfileGraphEvent.sigs", none=False)
        ents = [_record(ent, "ProfileGraphEvent.ents") for ent in sequence(d.get("ents"))]
        devices = [text(x["device"]) for x in ents]
        u = self.unparsed
        u.add(devices, [self.key(x.get("name", "")) for x in ents],
              # the signals' texts: parsed again in bulk with the ranges' (ns_column of a text is its ns)
              [raw[_index(x["st_id"], sigs, "st_id")] for x in ents],
              [raw[_index(x["en_id"], sigs, "en_id")] for x in ents],
              [_program_key(x.get("profile_key")) for x in ents], [bool(x.get("is_copy", False)) for x in ents])
        u.graphs.append((len(u.keys) - len(ents), len(ents), len(self.prof.graphs)))
        first, self.n_spans = self.n_spans, self.n_spans + len(ents)
        deps = [[i for i in (x if type(x) in (list, tuple) else (x,)) if type(i) is int and 0 <= i < len(ents)]
                for x in sequence(d.get("deps"))]
        self.prof.graphs.append(GraphBatch(devices[0] if devices else "", list(range(first, self.n_spans)), deps, sigs))

    def program(self, e: Any) -> None:
        d = e.__dict__
        base = d.get("base")
        self.prof.programs.append(Program(text(d.get("device", "")), strip_ansi(text(d.get("name", "")))[0],
                                          _blob(d.get("lib")), int64(base),
                                          plain_value(d.get("tag")), _program_key(d.get("profile_key"))))

    def device(self, e: Any) -> None:
        d = e.__dict__
        if "tdiff" in d or "comp_tdiff" not in d:  # >= 0.13: one offset; <= 0.12: compute and copy offsets
            comp = copy = _offset(d, "tdiff")
        else:
            comp, copy = _offset(d, "comp_tdiff"), _offset(d, "copy_tdiff")
        device, props = text(d["device"]), d.get("props")
        self.offsets[device] = (comp, copy)
        props = {text(k): plain_value(v) for k, v in props.items()} if type(props) is dict else None
        self.prof.devices.append(DeviceInfo(device, comp, copy, props))

    def sqtt(self, e: Any) -> None:
        d = e.__dict__
        se, itrace = d.get("se"), d.get("itrace")
        self.prof.captures.append(Capture("sqtt", text(d.get("device", "")), plain_value(d.get("kern")),
                                          _blob(d.get("blob")) or b"", plain_value(d.get("exec_tag")),
                                          int64(se), None if itrace is None else bool(itrace)))

    def pmc(self, e: Any) -> None:
        d = e.__dict__
        sched = [_pmc_sample(_record(s, "ProfilePMCEvent.sched")) for s in sequence(d.get("sched"))]
        self.prof.captures.append(Capture("pmc", text(d.get("device", "")), plain_value(d.get("kern")),
                                          _blob(d.get("blob")) or b"", plain_value(d.get("exec_tag")), sched=sched))

    def pma(self, e: Any) -> None:
        d = e.__dict__
        self.prof.captures.append(Capture("pma", text(d.get("device", "")), plain_value(d.get("kern")),
                                          _blob(d.get("blob")) or b"", plain_value(d.get("exec_tag")),
                                          profile_key=_program_key(d.get("profile_key"))))

    def unknown(self, e: Any) -> None:
        name = class_name(e) or type(e).__name__
        self.prof.unknown[name] = self.prof.unknown.get(name, 0) + 1


@dataclass
class _Part:
    """A stream's back half as its reader read it (see `_EventReader.part`)."""

    n: int
    fields: dict[str, tuple[tuple, tuple | None]]
    keys: list[tuple[Any, Key]]  # per key code: its content (None where that holds stand-ins), its Key
    devices: list[str]  # per device code
    profile_keys: list[bytes | None]  # per profile key code
    columns: dict[str, np.ndarray] | _Placed  # per span, in order: records.SpanTable's columns (or their place)
    points: _PointColumns
    allocs: list[tuple[Alloc, Any, bool]]
    graphs: list[GraphBatch]
    programs: list[Program]
    devices_info: list[DeviceInfo]
    captures: list[Capture]
    unknown: dict[str, int]
    offsets: dict[str, tuple[int, int]]


_MIN_SPAN_PICKLE = 16  # bytes of pickle a span takes at least (tinygrad's take ~70): bounds a back half's spans
_SPAN_BYTES = 40  # a span's columns (records.SpanTable: 34 bytes), with room for alignment
_ALIGN = 64


def _aligned(n: int) -> int:
    """n bytes rounded up to a whole number of _ALIGN."""
    return -(-n // _ALIGN) * _ALIGN


class _Placed(NamedTuple):
    """Where a back half put its span columns in a _Handover: per column, (offset, dtype, length)."""

    places: dict[str, tuple[int, str, int]]


class _Handover:
    """Memory the front and a forked back half both map, made before the fork: the back's span columns (~300 MB for a
    20M-event profile) come through it instead of pickled down a pipe, which the front waits for at the cut. Only
    address space until used (MAP_NORESERVE): sized for the most spans a file of `file_bytes` can hold (0: none);
    columns that do not fit go down the pipe as before."""

    def __init__(self, file_bytes: int) -> None:
        self.map = None
        if file_bytes > 0:
            with contextlib.suppress(OSError):  # no room for the address space (a strict overcommit): the pipe
                self.map = mmap.mmap(-1, file_bytes // _MIN_SPAN_PICKLE * _SPAN_BYTES,
                                     flags=mmap.MAP_SHARED | getattr(mmap, "MAP_NORESERVE", 0))

    def __bool__(self) -> bool:
        return self.map is not None

    def put(self, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray] | _Placed:
        """In the back half: the columns copied in (each let go once copied), and where; or the columns themselves
        where they do not fit."""
        if self.map is None or sum(_aligned(a.nbytes) for a in columns.values()) > len(self.map):
            return columns
        places, at = {}, 0
        for f in list(columns):
            a = columns.pop(f)
            np.frombuffer(self.map, a.dtype, len(a), at)[:] = a
            places[f] = (at, a.dtype.str, len(a))
            at += _aligned(a.nbytes)
        return _Placed(places)

    def get(self, placed: _Placed) -> dict[str, np.ndarray]:
        """In the front: the columns a back half put, copied out; the shared memory then goes (views of it would
        keep all of it resident until the last went)."""
        assert self.map is not None
        out = {f: np.frombuffer(self.map, np.dtype(dt), n, at).copy() for f, (at, dt, n) in placed.places.items()}
        self.map.close()
        self.map = None
        return out


class _PointColumns(NamedTuple):
    """Points as columns, to send from a forked process: pickled in a third of the time Point objects take (a
    reduce call each), where the back half of the 20M-event profile (637,000 points) is sent while the front waits."""

    device: list[str]
    kind: list[str]
    ts: list[int]
    key: list[Any]
    arg: list[Any]

    @classmethod
    def of(cls, points: list[Point]) -> _PointColumns:
        return cls(*([getattr(p, f) for p in points] for f in cls._fields))

    def points(self) -> list[Point]:
        return list(map(Point, *self))


class _Coder:
    """Codes for values, in first-seen order (by identity: `by_id`)."""

    def __init__(self, by_id: bool = False) -> None:
        self.index: dict = {}
        self.values: list = []
        self.by_id = by_id

    def __call__(self, values: list) -> np.ndarray:
        index = self.index
        of = list(map(id, values)) if self.by_id else values
        try:
            return np.fromiter(map(index.__getitem__, of), np.int32, len(of))
        except KeyError:  # a value seen for the first time: the distinct ones (a few) are coded in order
            pass
        distinct = dict(zip(of, values, strict=True)) if self.by_id else dict.fromkeys(of)  # in first-seen order
        for x, v in distinct.items():
            if x not in index:
                index[x] = len(self.values)
                self.values.append(v if self.by_id else x)
        return np.fromiter(map(index.__getitem__, of), np.int32, len(of))

    def code(self, value: Any) -> int:
        x = id(value) if self.by_id else value
        c = self.index.get(x)
        if c is None:
            c = self.index[x] = len(self.values)
            self.values.append(value)
        return c


class _Unparsed:
    """The spans of one batch read so far, in order, as columns (one list each: no join of small groups), their
    timestamps not yet parsed: ProfileRangeEvents read column by column, and graph batches' entries."""

    def __init__(self) -> None:
        self.devices: list[str] = []
        self.keys: list[int] = []  # their Keys' codes
        self.sts: list = []
        self.ens: list = []
        self.profile_keys: list[bytes | None] = []
        self.copies: list[bool] = []
        self.graphs: list[tuple[int, int, int]] = []  # per graph batch: its first entry's row, its entries, its number

    def add(self, devices: list[str], keys: list[int], sts: Iterable, ens: Iterable, profile_keys: list[bytes | None],
            copies: Iterable) -> None:
        """The next spans (ranges, or a graph batch's entries once `graphs` has its row)."""
        self.devices += devices
        self.keys += keys
        self.sts += sts
        self.ens += ens
        self.profile_keys += profile_keys
        self.copies += copies


class _SpanBatch(NamedTuple):
    """Spans as columns, the next ones in the profile's order (for _SpanColumns)."""

    devices: list[str]
    keys: list[int]  # codes (_SpanColumns.keys)
    sts: list[int] | np.ndarray  # an array where parsed in bulk
    ens: list[int | None] | np.ndarray
    profile_keys: list[bytes | None]
    copies: list[bool]
    graph: np.ndarray  # each span's graph batch (-1: none)


_JOIN = 256  # batches of spans joined into one column chunk (a few MB)


class _SpanColumns:
    """Spans as columns, added batch by batch in the profile's order: no Span object is made per event."""

    def __init__(self) -> None:
        self.devices, self.keys, self.profile_keys = _Coder(), _Coder(by_id=True), _Coder()
        self.batches: list[dict[str, np.ndarray]] = []
        self.joined = 0  # batches joined into bigger ones (see _join)

    def add(self, b: _SpanBatch) -> None:
        n, sts, ens = len(b.keys), b.sts, b.ens
        ended = np.ones(n, bool)
        if type(ens) is list and None in ens:
            ended[:] = [en is not None for en in ens]
            ens = [st if en is None else en for st, en in zip(sts, ens, strict=True)]
        self.batches.append({
            "device": self.devices(b.devices), "key": np.fromiter(b.keys, np.int32, n),
            "st": _int64s(sts, n), "en": _int64s(ens, n), "ended": ended,
            "profile_key": self.profile_keys(b.profile_keys),
            "graph": b.graph.astype(np.int32), "is_copy": np.fromiter(b.copies, bool, n)})
        if len(self.batches) - self.joined >= _JOIN:
            self._join()

    def _join(self) -> None:
        """The batches since the last join as one: a batch's columns are small (a batch of the pickle's list), and
        small arrays let go only at the end would leave the heap full of holes (resident memory nothing uses)."""
        recent = self.batches[self.joined:]
        self.batches[self.joined:] = [{f: np.concatenate([b[f] for b in recent]) for f in SPAN_COLUMNS}]
        self.joined += 1

    def append(self, columns: dict[str, np.ndarray], first: int, graphs: int, devices: list[str], keys: list[Key],
               profile_keys: list[bytes | None]) -> None:
        """Another reader's spans (`ordered`), after these: their codes recoded, graph batches numbered after
        `graphs` of these."""
        recode = lambda coder, table, codes: coder(table)[codes]  # noqa: E731
        self.batches.append({**columns, "device": recode(self.devices, devices, columns["device"]),
                             "key": recode(self.keys, keys, columns["key"]),
                             "profile_key": recode(self.profile_keys, profile_keys, columns["profile_key"]),
                             "graph": np.where(columns["graph"] >= 0, columns["graph"] + graphs, -1).astype(np.int32)})
        self.joined = len(self.batches)

    def ordered(self) -> dict[str, np.ndarray]:
        """Every column, joined: its batches are let go a column at a time (a long run's columns fill most of the
        memory a conversion needs)."""
        out = {}
        for f in SPAN_COLUMNS:
            out[f] = np.concatenate([b.pop(f) for b in self.batches]) if self.batches else getattr(SpanTable(), f)
        self.batches, self.joined = [], 0
        return out

    def table(self) -> SpanTable:
        """The spans read, as the profile holds them."""
        return SpanTable(self.devices.values, self.keys.values, self.profile_keys.values, **self.ordered())



# ---- fields as the records type them (a corrupt or hostile pickle can put anything anywhere) ----

class _RangeFields(NamedTuple):
    """ProfileRangeEvents' fields as columns, each the events' own objects (_range_fields)."""

    devices: list
    names: list
    keys: list[int | None]  # each name's code in the span columns so far (None: not yet given one)
    sts: list
    ens: list  # None where absent
    profile_keys: list  # None where absent
    copies: list | None  # is_copy (False where absent); None where no event has it


def _range_fields(events: list, codes: dict[str, int], ids: dict[int, int]) -> _RangeFields:
    """The fields of these ProfileRangeEvents as columns, the code of each name looked up (`codes` for a str, `ids`
    by id otherwise); KeyError naming a field an event lacks. In C where built (`_ranges.c`, one pass over the
    events), `_range_fields_python` being its reference; where C finds an event lacking a field, the reference reads
    them again to raise the error it would (it reads a field of every event before the next field)."""
    if _fast_ranges is not None:
        try:
            return _RangeFields(*_fast_ranges.fields(events, codes, ids))
        except (KeyError, AttributeError):
            pass
    return _range_fields_python(events, codes, ids)


def _range_fields_python(events: list, codes: dict[str, int], ids: dict[int, int]) -> _RangeFields:
    ds = [e.__dict__ for e in events]
    devices, names = list(map(itemgetter("device"), ds)), list(map(itemgetter("name"), ds))
    keys = [codes.get(n) if type(n) is str else ids.get(id(n)) for n in names]
    copies = list(map(dict.get, ds, repeat("is_copy"), repeat(False))) \
        if any(map(dict.__contains__, ds, repeat("is_copy"))) else None
    return _RangeFields(devices, names, keys, list(map(itemgetter("st"), ds)), list(map(dict.get, ds, repeat("en"))),
                        list(map(dict.get, ds, repeat("profile_key"))), copies)


_fast_ranges = compiled("vizexport.tinygrad._ranges")


def _off_host(f: _RangeFields) -> _RangeFields:
    """The ranges not on a host device (their device strings are texts)."""
    kept = [i for i, d in enumerate(f.devices) if d not in HOST]
    return _RangeFields(*([c[i] for i in kept] if c is not None else None for c in f))


def _record(x: Any, field: str) -> dict:
    """The fields of a tinygrad record held in `field`; InputError naming the field for anything else."""
    if not isinstance(x, Stub):
        raise InputError(f"{field} holds {brief(x)}, not a tinygrad record")
    return x.__dict__


def _times(values: Any, field: str, none: bool = True, array: bool = False) -> list | np.ndarray:
    """ns_column of a field's timestamps; InputError naming the field for one that is not a time."""
    try:
        return ns_column(values, none, array)
    except ValueError as e:
        raise InputError(f"{field}: {e}") from None


def _int64s(x: list[int] | np.ndarray, n: int) -> np.ndarray:
    return x if type(x) is np.ndarray else np.fromiter(x, np.int64, n)


def _offset(d: dict, field: str) -> int:
    try:
        return ns(d.get(field) or 0)
    except ValueError as e:
        raise InputError(f"ProfileDeviceEvent.{field}: {e}") from None


def _count(x: Any, field: str) -> int:
    """An alloc's size (elements or bytes): a count within int64 (a buffer's bytes add up in int64 counters)."""
    if type(x) is not int or not 0 <= x < INT64:
        raise InputError(f"ProfilePointEvent alloc: its {field} is {brief(x)}, not a count")
    return x


def _index(x: Any, into: list, field: str) -> int:
    if type(x) is not int or not 0 <= x < len(into):
        raise InputError(f"ProfileGraphEntry.{field} is {brief(x)}, not one of the graph's {len(into)} signals")
    return x


def _ints(x: Any) -> tuple[int, ...]:
    return tuple(i for i in sequence(x) if type(i) is int)


def _var_vals(x: Any) -> dict[str, int]:
    """A launch's variable values: int64s by name (a wider one would overflow the estimates' float arithmetic)."""
    return {k: v for k, v in x.items() if type(k) is str and int64(v) is not None} if type(x) is dict else {}


def _blob(x: Any) -> bytes | None:
    return x if type(x) is bytes else bytes(x) if type(x) is bytearray else None


def _program_key(x: Any) -> bytes | None:
    return x if type(x) is bytes else None


def _pmc_sample(d: dict) -> PMCSample:
    name, block, regsample = (text(d.get(f, "")) for f in ("name", "block", "regsample"))
    return PMCSample(name, block, *(int64(d.get(f)) or 0 for f in PMCSample.__slots__[2:-1]),
                     regsample)
