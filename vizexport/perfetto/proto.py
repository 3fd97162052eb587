"""Timeline → Perfetto TrackEvent protobuf (.pftrace), encoded directly for speed.

Layout (peers-and-perfetto.md §1): sequence 1 carries the trace's metadata (trace_uuid, the trace name as the session
name, release and devices as metadata entries) and every TrackDescriptor, all under one top track named after the
trace (the Perfetto UI orders top-level tracks by name, but the children of a track with explicit child ordering by
rank: so host tracks come first); each segment of a track's events starts with a packet that clears its sequence's
incremental state and whose defaults name the track, so an event costs a few bytes: a timestamp, an interned name,
the sequence id. Timestamps are absolute ns on the default (BOOTTIME) clock: delta timestamps need a sequence-scoped
incremental clock, and the ClockSnapshot that anchors it fills the trace processor's clock_snapshot table, which the
UI (v52 to today) draws as a "System > Clock Snapshots" track; the format's only other delta,
TrackEvent.timestamp_delta_us, counts whole µs. So they are an option (wire.DELTA, --delta-time), and by default the
bytes are saved elsewhere (wire.Encoding): every segment on one sequence id (one byte on the wire), string
annotation values of a few characters or more interned, callstack samples batched. Interned event names, annotation
names and string values are defined on the packet that first uses them.
Packets are grouped into `compressed_packets` (deflate) unless compression is off. perfetto_trace_pb2 (the official
schema) is the reference: the tests parse every output with it.
"""
from __future__ import annotations

import hashlib
import struct
from array import array
from collections.abc import Iterator
from functools import partial
from itertools import chain
from typing import Any, BinaryIO

import numpy as np
from zlib_ng import zlib_ng

from ..forks import SERIAL, Executor
from ..output import Progress
from ..timeline import META_NAME, Timeline, Track, slice_events
from . import wire
from .callstacks import samples
from .wire import (
    CLOCK_BOOTTIME,
    CLOCK_DELTA,
    COMPACT,
    FLOW_IN_TAG,
    FLOW_OUT_TAG,
    SEQ_NEEDS,
    TRACKS_SEQUENCE,
    WIRE_FIXED64,
    WIRE_VARINT,
    ChromeEventBundle,
    ChromeMetadata,
    Clock,
    ClockSnapshot,
    CounterDescriptor,
    DebugAnnotation,
    Encoding,
    EventName,
    InternedData,
    Trace,
    TraceConfig,
    TracePacket,
    TracePacketDefaults,
    TraceUuid,
    TrackDescriptor,
    TrackEvent,
    TrackEventDefaults,
    field,
    joined,
    packets,
    sfield,
    stamped,
    varint,
    vfield,
)

_INT_VALUE = bytes((DebugAnnotation.INT_VALUE << 3 | WIRE_VARINT,))

CHUNK = 480 * 1024  # raw bytes per compressed_packets wrapper (the wrapper must stay under 512 KB)
# zlib-ng's deflate at level 3 (benchmarks/bench_tracesize.py, 1M-event profile, CPU best of 7): a zlib stream (any
# inflater reads it) as small as zlib's level 4 gave (+0.6 %) in half its time (0.24 against 0.45 s); levels 4 and 5
# save 1.6 and 4.8 % more bytes for 35 and 50 % more time, which a download of the trace does not win back
DEFLATE_LEVEL = 3
_SCALARS = frozenset((str, int, float, bool))
SEGMENT = 200_000  # events per sequence of a big track (the unit of parallel encoding)
PARALLEL_MIN = 300_000  # events below which forking workers costs more than it saves


def descriptor(t: Track, has_children: bool, top: int = 0) -> bytes:
    """A track's TrackDescriptor packet; a root track goes under `top` (the trace's top track), if given."""
    TD, CD = TrackDescriptor, CounterDescriptor
    d = vfield(TD.UUID, t.uuid) + sfield(TD.NAME, t.name)
    if t.parent or top:
        d += vfield(TD.PARENT_UUID, t.parent or top)
    if t.description:
        d += sfield(TD.DESCRIPTION, t.description)
    if t.kind == "counter":
        unit = vfield(CD.UNIT, CD.UNIT_SIZE_BYTES) if t.unit == "bytes" else sfield(CD.UNIT_NAME, t.unit) if t.unit \
            else b""
        d += field(TD.COUNTER, unit)
    if has_children:
        d += vfield(TD.CHILD_ORDERING, TD.EXPLICIT)
    d += vfield(TD.SIBLING_ORDER_RANK, t.rank)
    sequence = vfield(TracePacket.TRUSTED_PACKET_SEQUENCE_ID, 1)  # every descriptor is on sequence 1
    return field(Trace.PACKET, field(TracePacket.TRACK_DESCRIPTOR, d) + sequence)


def trace_name(tl: Timeline) -> str:
    return tl.metadata.get(META_NAME) or tl.title or "trace"


def trace_uuid(tl: Timeline) -> int:
    """A 128-bit id of the trace, the same for the same content (outputs are reproducible)."""
    content = (trace_name(tl), sorted(tl.trace_metadata().items()), len(tl.tracks), tl.n_events())
    h = hashlib.sha256(repr(content).encode())
    return int.from_bytes(h.digest()[:16], "big")


def metadata_packets(tl: Timeline) -> bytes:
    """trace_uuid, the trace name as the session name and every metadata entry (the trace processor's `metadata`
    table: `trace_uuid`, `unique_session_name`, `cr-<name>`)."""
    TP, seq = TracePacket, vfield(TracePacket.TRUSTED_PACKET_SEQUENCE_ID, 1)
    uuid = trace_uuid(tl)
    out = field(Trace.PACKET, field(TP.TRACE_UUID, uuid_fields(uuid)) + seq)
    out += field(Trace.PACKET, field(TP.TRACE_CONFIG, sfield(TraceConfig.UNIQUE_SESSION_NAME, trace_name(tl))) + seq)
    meta = tl.trace_metadata()
    if meta:
        entries = b"".join(field(ChromeEventBundle.METADATA, sfield(ChromeMetadata.NAME, k) +
                                 sfield(ChromeMetadata.STRING_VALUE, v)) for k, v in meta.items())
        out += field(Trace.PACKET, field(TP.CHROME_EVENTS, entries) + seq)
    return out


def uuid_fields(uuid: int) -> bytes:
    """TraceUuid{msb, lsb} of a 128-bit id (int64 fields, two's complement)."""
    msb, lsb = uuid >> 64, uuid & ((1 << 64) - 1)
    return vfield(TraceUuid.MSB, msb) + vfield(TraceUuid.LSB, lsb)


def top_track(tl: Timeline) -> tuple[int, bytes]:
    """The trace's top track: its uuid and descriptor (named after the trace, children in explicit order)."""
    TD = TrackDescriptor
    uuid = max((t.uuid for t in tl.tracks), default=0) + 1
    d = vfield(TD.UUID, uuid) + sfield(TD.NAME, trace_name(tl)) + vfield(TD.CHILD_ORDERING, TD.EXPLICIT)
    return uuid, field(Trace.PACKET, field(TracePacket.TRACK_DESCRIPTOR, d) +
                       vfield(TracePacket.TRUSTED_PACKET_SEQUENCE_ID, 1))


class _Sequence:
    """Encoder state of one segment's packets: its sequence id (and flags), defaults and interning tables."""

    def __init__(self, seq_id: int, track: Track, strings: list[str], encoding: Encoding = COMPACT,
                 origin: int = 0) -> None:
        self.seq = vfield(TracePacket.TRUSTED_PACKET_SEQUENCE_ID, seq_id)
        self.since = origin if encoding.delta_time else None  # the trace's first time, where timestamps are deltas
        # what ends each packet after the header: its sequence (and flags, see Encoding.needs_flag)
        self.needs = self.seq + vfield(TracePacket.SEQUENCE_FLAGS, SEQ_NEEDS) if encoding.needs_flag else self.seq
        self.intern_from = encoding.intern_from
        self.track, self.strings = track, strings
        self.names: dict[int, int] = {}  # Timeline string id → event name iid
        self.arg_names: dict[str, int] = {}
        self.values: dict[str, int] = {}
        self.new_interned = bytearray()
        self.entries: dict[tuple, bytes] = {}  # (field, name, type, value) → an encoded scalar annotation
        self.named: dict[str, bytes] = {}  # annotation name → its encoded name field
        self.heads: dict[tuple[int, bool], bytes] = {}  # (name, instant) → a TrackEvent's type and name fields

    def header(self) -> list[bytes]:
        """The sequence's first packet: its defaults (clock and track) and a cleared incremental state; with delta
        timestamps, a second: the ClockSnapshot that starts its incremental clock at the trace's first time."""
        TP = TracePacket
        clock = CLOCK_BOOTTIME if self.since is None else CLOCK_DELTA
        defaults = vfield(TracePacketDefaults.TIMESTAMP_CLOCK_ID, clock) + \
            field(TracePacketDefaults.TRACK_EVENT_DEFAULTS, vfield(TrackEventDefaults.TRACK_UUID, self.track.uuid))
        pkt = field(Trace.PACKET, field(TP.TRACE_PACKET_DEFAULTS, defaults) + self.seq +
                    vfield(TP.SEQUENCE_FLAGS, TP.SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS))
        if self.since is None:
            return [pkt]
        snapshot = _clock(CLOCK_DELTA, self.since, incremental=True) + _clock(CLOCK_BOOTTIME, self.since)
        return [pkt, field(Trace.PACKET, field(TP.CLOCK_SNAPSHOT, snapshot) + self.seq)]

    def _iid(self, table: dict, key: object, field_no: int, text: str) -> int:
        """The iid of `key` in an interning table, defining it (InternedData field `field_no`) on first use."""
        iid = table.get(key)
        if iid is None:
            iid = table[key] = len(table) + 1
            self.new_interned += field(field_no, vfield(EventName.IID, iid) + sfield(EventName.NAME, text))
        return iid

    def head(self, sid: int, instant: bool) -> bytes:
        """A TrackEvent's type and name fields (the name's iid defined on first use)."""
        TE = TrackEvent
        enc = self.heads[sid, instant] = vfield(TE.TYPE, TE.TYPE_INSTANT if instant else TE.TYPE_SLICE_BEGIN) + \
            vfield(TE.NAME_IID, self.name_iid(sid))
        return enc

    def name_iid(self, sid: int) -> int:
        return self._iid(self.names, sid, InternedData.EVENT_NAMES, self.strings[sid])

    def arg_iid(self, name: str) -> int:
        return self._iid(self.arg_names, name, InternedData.DEBUG_ANNOTATION_NAMES, name)

    def value_iid(self, s: str) -> int:
        return self._iid(self.values, s, InternedData.DEBUG_ANNOTATION_STRING_VALUES, s)

    def entry(self, num: int, name: str | None, v: Any) -> bytes:
        """Field `num` holding a debug annotation (an array's value; a dict's items go through annotations); a scalar
        one is encoded once per sequence."""
        t = type(v)
        if t in _SCALARS:
            return self.entries.get(key := (num, name, t, v)) or self._scalar(key, num, name, v)
        return field(num, self.annotation(name, v))

    def _scalar(self, key: tuple, num: int, name: str | None, v: Any) -> bytes:
        """Encode a scalar annotation field and cache it under `key` (its field, name, type and value)."""
        enc = self.entries[key] = field(num, self.annotation(name, v))
        return enc

    def annotations(self, num: int, d: dict) -> bytes:
        """Fields `num` holding an annotation per item of `d`, named by its key: an event's args, a dict's entries.

        A scalar item is encoded once per sequence (kernel args repeat their buffers' modes, sizes and dtypes, a
        buffer's lifetime its users), its cached encoding looked up inline: most items are cached scalars, and a call
        each costs as much as the lookup (kernel args and buffer lifetimes make ~1M items per 1M events). In C where
        built (wire.fast: the same cache, its misses made here), this loop being its reference."""
        if wire.fast is not None and type(d) is dict:
            return wire.fast.annotations(self, num, d)
        get, parts = self.entries.get, []
        for k, x in d.items():
            t = type(x)
            if t in _SCALARS:
                parts.append(get(key := (num, k, t, x)) or self._keyed(key, num, k, x))
            else:
                parts.append(field(num, self.annotation(k if type(k) is str else str(k), x)))
        return b"".join(parts)

    def _keyed(self, key: tuple, num: int, k: Any, v: Any) -> bytes:
        """A dict item's scalar annotation field, cached if its key is a string: other keys can be equal yet
        named differently (1 == True)."""
        if type(k) is not str:
            return field(num, self.annotation(str(k), v))
        if type(v) is int:  # the commonest miss: ids (buffers, launches), each new value a miss
            enc = self.entries[key] = field(num, (self.named.get(k) or self._name(k)) + _INT_VALUE + varint(v))
            return enc
        return self._scalar(key, num, k, v)

    def array(self, v: list | tuple) -> bytes:
        """An array's values (ARRAY_VALUES fields); a dict value's entries encoded inline."""
        values, entries = DebugAnnotation.ARRAY_VALUES, DebugAnnotation.DICT_ENTRIES
        annotations, entry = self.annotations, self.entry
        return b"".join([field(values, annotations(entries, x)) if type(x) is dict else entry(values, None, x)
                         for x in v])

    def annotation(self, name: str | None, v: Any) -> bytes:
        """A DebugAnnotation's fields (the commonest values first: an exact int, then dicts and lists, which are
        never bools, ints or floats)."""
        DA = DebugAnnotation
        out = b"" if name is None else self.named.get(name) or self._name(name)
        if type(v) is int:
            return out + _INT_VALUE + varint(v)
        if isinstance(v, dict):
            return out + self.annotations(DA.DICT_ENTRIES, v)
        if isinstance(v, (list, tuple)):
            return out + self.array(v)
        if isinstance(v, bool):
            return out + vfield(DA.BOOL_VALUE, int(v))
        if isinstance(v, int):
            return out + vfield(DA.INT_VALUE, v)
        if isinstance(v, float):
            return out + varint(DA.DOUBLE_VALUE << 3 | WIRE_FIXED64) + struct.pack("<d", v)
        if isinstance(v, str) and len(v) >= self.intern_from:  # strings repeat (dtypes, modes, tracebacks)
            return out + vfield(DA.STRING_VALUE_IID, self.value_iid(v))
        return out + sfield(DA.STRING_VALUE, str(v))

    def _name(self, name: str) -> bytes:
        """An annotation's name field, its iid defined on first use."""
        enc = self.named[name] = vfield(DebugAnnotation.NAME_IID, self.arg_iid(name))
        return enc


def _clock(clock_id: int, ts: int, incremental: bool = False) -> bytes:
    """A ClockSnapshot's clock field: the clock and its time."""
    clock = vfield(Clock.CLOCK_ID, clock_id) + vfield(Clock.TIMESTAMP, ts)
    return field(ClockSnapshot.CLOCKS, clock + vfield(Clock.IS_INCREMENTAL, 1) if incremental else clock)


def _column(a: array) -> np.ndarray:
    return np.frombuffer(a, dtype=a.typecode)


def _slices(seq: _Sequence, t: Track, start: int, end: int) -> tuple[bytes, np.ndarray]:
    """BEGIN/END packets (INSTANT for dur -1) of events [start, end), column-wise.

    Packets differ only in their timestamp delta and their tail (the track_event, any interned data it defines,
    sequence id and flags). Events of one name, kind and args object share a tail, so tails are made once per
    such group, in order of first use (which decides where interned data is defined); an event with flows has
    its own. END packets all share one tail.
    """
    ts, dur, names = (_column(c)[start:end] for c in (t.ts, t.dur, t.names))
    time, idx, is_end = slice_events(ts, dur)
    begins = idx[~is_end]
    _, first, inverse, count = np.unique(_groups(t, start, end, names, dur)[begins], return_index=True,
                                         return_inverse=True, return_counts=True)
    end = vfield(TrackEvent.TYPE, TrackEvent.TYPE_SLICE_END)
    tails = [field(TracePacket.TRACK_EVENT, end) + seq.needs]  # 0: every END
    # numpy scalars cost ~6x Python ints in this loop (a tail a group: ~0.1M groups per 1M events)
    order = np.argsort(first)
    first_tail, later_tail = np.empty(len(first), np.int64), np.empty(len(first), np.int64)
    first_tail[order], later_tail[order] = _tails(seq, t, (begins[first[order]] + start).tolist(),
                                                  (count[order] > 1).tolist(), tails)
    tail_ids = np.zeros(len(idx), np.int64)
    begin_tails = later_tail[inverse.ravel()]
    begin_tails[first] = first_tail
    tail_ids[~is_end] = begin_tails
    return packets(stamped(time, seq.since), tail_ids, tails)


def _groups(t: Track, start: int, end: int, names: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each event's group of one tail: its name and instant flag; negative for one with args (a group per name,
    kind and args object: the timeline holds every args object while it is written, so ids are not reused) or
    flows (a group each). Column-wise: a big track's segments would each walk all its args."""
    groups = (names << 1) | (dur < 0)
    at = np.fromiter(t.args, np.int64, len(t.args))
    held = (at >= start) & (at < end)
    at = at[held] - start
    kinds = 0
    if len(at):
        _, objects = np.unique(np.fromiter(map(id, t.args.values()), np.uint64, len(t.args))[held],
                               return_inverse=True)
        _, kind = np.unique(groups[at].astype(np.int64) * len(at) + objects.ravel(), return_inverse=True)
        groups[at] = -1 - kind.ravel()
        kinds = int(kind.max()) + 1
    flows = np.unique(np.fromiter(chain(t.flows_out, t.flows_in), np.int64))
    flows = flows[(flows >= start) & (flows < end)]
    groups[flows - start] = -1 - kinds - flows
    return groups


def _tails(seq: _Sequence, t: Track, firsts: list[int], many: list[bool], tails: list[bytes]
           ) -> tuple[list[int], list[int]]:
    """Add each group's tail (made at its first event) to `tails`, and a second one for its later events where
    the first defines interned data; returns the tail ids of each group's first and later events. In C where built
    (wire.fast: the sequence's own tables, their misses made here), this loop being its reference."""
    if wire.fast is not None and t.names.itemsize == 4 and t.dur.itemsize == 8:
        return wire.fast.tails(seq, t.names, t.dur, t.args, t.flows_out, t.flows_in, firsts, many, tails)
    first_tail, later_tail = [], []
    for i, more in zip(firsts, many, strict=True):
        tail, reusable = _tail(seq, t, i)
        first_tail.append(len(tails))
        tails.append(tail)
        if not reusable and more:
            tails.append(_tail(seq, t, i)[0])
        later_tail.append(len(tails) - 1)
    return first_tail, later_tail


def _counters(seq: _Sequence, t: Track, start: int, end: int) -> tuple[bytes, np.ndarray]:
    """COUNTER packets: one tail per distinct value."""
    values, inverse = np.unique(_column(t.values)[start:end], return_inverse=True)
    tails = []
    for v in values.tolist():
        event = vfield(TrackEvent.TYPE, TrackEvent.TYPE_COUNTER) + vfield(TrackEvent.COUNTER_VALUE, v)
        tails.append(field(TracePacket.TRACK_EVENT, event) + seq.needs)
    return packets(stamped(_column(t.ts)[start:end], seq.since), inverse.ravel(), tails)


def _event(seq: _Sequence, name: int, instant: bool, args: dict | None) -> bytes:
    """TrackEvent fields: type, interned name, debug annotations."""
    TE = TrackEvent
    ev = seq.heads.get((name, instant)) or seq.head(name, instant)
    if args:
        ev += seq.annotations(TE.DEBUG_ANNOTATIONS, args)
    return ev


def _tail(seq: _Sequence, t: Track, i: int) -> tuple[bytes, bool]:
    """A BEGIN/INSTANT packet after its timestamp: the track_event, the interned data this first use defines,
    the sequence id and flags; and whether it may be reused (not while it defines interned data)."""
    ev = _event(seq, t.names[i], t.dur[i] < 0, t.args.get(i))
    flows_out, flows_in = t.flows_out.get(i), t.flows_in.get(i)
    if flows_out:
        ev += b"".join([FLOW_OUT_TAG + f.to_bytes(8, "little") for f in flows_out])
    if flows_in:
        ev += b"".join([FLOW_IN_TAG + f.to_bytes(8, "little") for f in flows_in])
    tail = field(TracePacket.TRACK_EVENT, ev)
    if not seq.new_interned:
        return tail + seq.needs, True
    tail += field(TracePacket.INTERNED_DATA, bytes(seq.new_interned)) + seq.needs
    seq.new_interned.clear()
    return tail, False


def segments(t: Track, size: int) -> Iterator[tuple[int, int]]:
    """Split a track's events where nothing is open (every earlier slice has ended), about `size` events apart.

    Each segment becomes its own packet sequence, so big tracks can be encoded in parallel.
    """
    start, n = 0, len(t)
    if t.kind == "slice" and n > size:
        ts, dur = _column(t.ts), _column(t.dur)
        open_until = np.maximum.accumulate(ts + dur)
        cuts = np.flatnonzero(ts[1:] >= open_until[:-1]) + 1  # nothing open at these events
        while True:
            k = np.searchsorted(cuts, start + size)
            if k == len(cuts):
                break
            yield start, int(cuts[k])
            start = int(cuts[k])
    if n > start:
        yield start, n


def _encode(tl: Timeline, job: tuple[int, int, int, int], compress: bool = True, encoding: Encoding = COMPACT,
            origin: int = 0) -> bytes:
    """One segment of one track, its sequence's state cleared at its start: framed (or compressed_packets) bytes.
    `origin`: the trace's first time (where timestamps are deltas)."""
    track_index, start, end, seq_id = job
    t = tl.tracks[track_index]
    seq = _Sequence(seq_id, t, tl.strings, encoding, origin)
    return _framed(*joined([*seq.header(), (_counters if t.kind == "counter" else _slices)(seq, t, start, end)]),
                   compress)


def first_time(tl: Timeline) -> int:
    """The earliest timestamp written (times are clamped at 0): where delta timestamps count from."""
    return max(0, min((int(_column(t.ts).min()) for t in tl.tracks if len(t)), default=0))


def chunks(ends: np.ndarray) -> Iterator[tuple[int, int]]:
    """Byte ranges of whole packets (ending at `ends`), about CHUNK bytes each: one compressed_packets each."""
    a, total = 0, int(ends[-1]) if len(ends) else 0
    while a < total:
        b = int(ends[max(np.searchsorted(ends, a + CHUNK, "right"), np.searchsorted(ends, a, "right") + 1) - 1])
        yield a, b
        a = b


def _framed(data: bytes, ends: np.ndarray, compress: bool, level: int = DEFLATE_LEVEL) -> bytes:
    """Packets as written: raw, or in compressed_packets wrappers of whole packets, about CHUNK raw bytes each."""
    if not compress:
        return data
    return b"".join([field(Trace.PACKET, field(TracePacket.COMPRESSED_PACKETS, zlib_ng.compress(data[a:b], level)))
                     for a, b in chunks(ends)])


def write(tl: Timeline, out: BinaryIO, compress: bool = True, progress: Progress | None = None,
          encoding: Encoding = COMPACT, executor: Executor = SERIAL) -> int:
    """Stream the trace to `out`: descriptors first, then each track segment (its own state), then the callstack samples
    (made beside the segments: alone they take ~0.5 s per 1M events). Returns bytes written.

    With a forking `executor` and a big timeline, segments are encoded in its workers (one per CPU);
    the output is the same bytes either way. `progress(done, total)` is told the events written so far, a segment
    at a time. `encoding`: how compactly (COMPACT; SPREAD for comparisons).
    """
    tracks = tl.walk()
    parents = {t.parent for t in tracks}
    top, top_desc = top_track(tl)
    described = [metadata_packets(tl), top_desc, *(descriptor(t, t.uuid in parents, top) for t in tracks)]
    head = _framed(b"".join(described), np.cumsum([len(d) for d in described]), compress)
    out.write(head)
    written = len(head)
    index = {id(t): i for i, t in enumerate(tl.tracks)}
    work = [(index[id(t)], a, b) for t in tracks for a, b in segments(t, SEGMENT)]
    work = [(i, a, b, TRACKS_SEQUENCE if encoding.shared_sequence else TRACKS_SEQUENCE + n)
            for n, (i, a, b) in enumerate(work)]
    done, total = 0, tl.n_events()
    jobs = None if total >= PARALLEL_MIN else 1  # None: a worker per CPU
    origin = first_time(tl) if encoding.delta_time else 0
    encode = partial(_encode_part, tl, work, compress, encoding, origin)
    held: dict[int, bytes] = {}  # parts done before those that come earlier in the file
    n = 0  # the next segment to write
    # the callstack samples (part -1) are made first, beside the segments, and written last
    for k, data in executor.map(encode, range(-1, len(work)), jobs):
        held[k] = data
        while n in held:
            data = held.pop(n)
            out.write(data)
            written += len(data)
            done += work[n][2] - work[n][1]
            n += 1
            if progress is not None:
                progress(done, total)
    samples = held.pop(-1)
    out.write(samples)
    return written + len(samples)


def _encode_part(tl: Timeline, work: list[tuple[int, int, int, int]], compress: bool, encoding: Encoding,
                 origin: int, k: int) -> tuple[int, bytes]:
    """Part k of the trace after its descriptors: segment work[k], or (k = -1) the callstack samples."""
    if k >= 0:
        return k, _encode(tl, work[k], compress, encoding, origin)
    data, ends = samples(tl, max((w[3] for w in work), default=TRACKS_SEQUENCE) + 1, encoding)  # after the tracks'
    return k, _framed(data, ends, compress)
