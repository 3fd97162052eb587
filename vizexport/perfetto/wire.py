"""Protobuf wire encoding of Perfetto traces: the field numbers written (named as in perfetto_trace.proto), varints,
fields, and packets framed (in C where built, else column-wise with numpy); and how compactly events are laid out
(Encoding). The trace encoder (proto) and the callstack samples (callstacks) both build on it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..compiled import compiled

_BYTES = [bytes((i,)) for i in range(128)]  # one-byte varints: most ids and lengths
WIRE_VARINT, WIRE_FIXED64, WIRE_LEN = 0, 1, 2


# Field numbers of the messages written here, named as in perfetto_trace.proto (tests compare each with the
# official perfetto_trace_pb2), and the enum values used.
class Trace:
    PACKET = 1


class TracePacket:
    CLOCK_SNAPSHOT, TIMESTAMP, TRUSTED_PACKET_SEQUENCE_ID, TRACK_EVENT, INTERNED_DATA = 6, 8, 10, 11, 12
    CHROME_EVENTS, TRACE_CONFIG, TRACE_UUID = 5, 33, 89
    SEQUENCE_FLAGS, COMPRESSED_PACKETS, TIMESTAMP_CLOCK_ID, TRACE_PACKET_DEFAULTS, TRACK_DESCRIPTOR = 13, 50, 58, 59, 60
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE = 1, 2  # SequenceFlags


class TracePacketDefaults:
    TRACK_EVENT_DEFAULTS, TIMESTAMP_CLOCK_ID = 11, 58


class TrackEventDefaults:
    TRACK_UUID = 11


class TraceUuid:
    MSB, LSB = 1, 2


class TraceConfig:
    UNIQUE_SESSION_NAME = 22


class ChromeEventBundle:
    METADATA = 2


class ChromeMetadata:
    NAME, STRING_VALUE = 1, 2


class ClockSnapshot:
    CLOCKS = 1


class Clock:  # ClockSnapshot.Clock
    CLOCK_ID, TIMESTAMP, IS_INCREMENTAL = 1, 2, 3


class TrackDescriptor:
    UUID, NAME, PARENT_UUID, COUNTER, CHILD_ORDERING, SIBLING_ORDER_RANK, DESCRIPTION = 1, 2, 5, 8, 11, 12, 14
    EXPLICIT = 3  # ChildTracksOrdering


class CounterDescriptor:
    UNIT, UNIT_NAME = 3, 6
    UNIT_SIZE_BYTES = 3  # Unit


class TrackEvent:
    DEBUG_ANNOTATIONS, TYPE, NAME_IID, COUNTER_VALUE, FLOW_IDS, TERMINATING_FLOW_IDS = 4, 9, 10, 30, 47, 48
    TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4  # Type


class InternedData:
    EVENT_NAMES, DEBUG_ANNOTATION_NAMES, DEBUG_ANNOTATION_STRING_VALUES = 2, 3, 29


class EventName:  # also DebugAnnotationName and InternedString (iid, name/str)
    IID, NAME = 1, 2


class DebugAnnotation:
    NAME_IID, BOOL_VALUE, INT_VALUE, DOUBLE_VALUE, STRING_VALUE, DICT_ENTRIES, ARRAY_VALUES = 1, 2, 4, 5, 6, 11, 12
    STRING_VALUE_IID = 17


CLOCK_BOOTTIME = 6  # BuiltinClocks.BOOTTIME
CLOCK_DELTA = 64  # the first sequence-scoped clock id: each sequence's incremental clock (Encoding.delta_time)
TRACKS_SEQUENCE = 2  # the sequence of the track segments (with a shared one; 1 holds the descriptors)
SEQ_NEEDS = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
PACKET_TAG = bytes((Trace.PACKET << 3 | WIRE_LEN,))
TIMESTAMP_TAG = bytes((TracePacket.TIMESTAMP << 3 | WIRE_VARINT,))


@dataclass(frozen=True)
class Encoding:
    """How compactly events are written; the trace processor reads the same slices, counters, flows and args from
    each (tests compare them).

    needs_flag: SEQ_NEEDS_INCREMENTAL_STATE on every packet after a sequence's header, as trace_packet.proto asks
    of packets that use TracePacketDefaults. A reader only looks at it to skip packets of a sequence whose state
    was lost (a ring buffer that dropped packets); a written file loses none, and each sequence's first packet in
    the file clears its state. 2 bytes a packet.
    shared_sequence: every track segment on TRACKS_SEQUENCE (a one-byte id however many segments), each starting
    with a packet that clears the sequence's incremental state and sets its own defaults; else a sequence each.
    intern_from: string annotation values of at least this many characters are interned (an iid: 1-2 bytes).
    samples_per_packet: callstack samples in one StreamingProfilePacket (its fields are repeated for this: a sample
    then costs its callstack iid and µs delta, ~5 bytes; alone in a packet, with the packet's timestamp, ~19).
    delta_time: each event's timestamp as the ns since the packet before it on its segment, on the sequence's
    incremental clock (CLOCK_DELTA), which a ClockSnapshot at each segment's start ties to BOOTTIME at the trace's
    first time (so the trace clock's snapshots never go back). 1-3 bytes where an absolute time takes 6-7, and
    deflate then finds a long run's repeats (1M events: 3.6 B/event compressed against 12.7); but the UI draws the
    snapshots as a "System > Clock Snapshots" track, so it is an option.
    """

    needs_flag: bool = True  # kept, as the format asks: a reader may rely on it (today's skip only lost packets)
    shared_sequence: bool = True
    intern_from: int = 3
    samples_per_packet: int = 4096
    delta_time: bool = False


COMPACT = Encoding()
DELTA = Encoding(delta_time=True)  # COMPACT with delta timestamps (--delta-time)
# the layout written before (a sequence per segment, flags on every packet): tests compare the two
SPREAD = Encoding(needs_flag=True, shared_sequence=False, intern_from=25, samples_per_packet=1)


def varint(n: int) -> bytes:
    if 0 <= n < 128:
        return _BYTES[n]
    if 0 < n < 1 << 21:  # most of the rest (lengths, ids, ns latencies): no loop
        return bytes((n & 0x7F | 0x80, n >> 7)) if n < 1 << 14 else \
            bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 127:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# fixed64 tags of a TrackEvent's flow ids (a packet tail writes them after these, 8 little-endian bytes each)
FLOW_OUT_TAG, FLOW_IN_TAG = (varint(n << 3 | WIRE_FIXED64)
                             for n in (TrackEvent.FLOW_IDS, TrackEvent.TERMINATING_FLOW_IDS))

# packets' framing and proto's packet tails and debug annotations in C (_wire.c), or None: numpy's and Python's, their
# references
fast = compiled("vizexport.perfetto._wire")
if fast is not None:
    fast.set_fields(DebugAnnotation.DICT_ENTRIES, DebugAnnotation.ARRAY_VALUES,
                    DebugAnnotation.INT_VALUE << 3 | WIRE_VARINT, TrackEvent.DEBUG_ANNOTATIONS, TracePacket.TRACK_EVENT,
                    TracePacket.INTERNED_DATA, FLOW_OUT_TAG, FLOW_IN_TAG)

_TAGGED = 128  # field numbers whose length-delimited tag is made once (every field written is below)
_LEN_TAGS = [varint(n << 3 | WIRE_LEN) for n in range(_TAGGED)]


def field(num: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    n = len(payload)
    tag = _LEN_TAGS[num] if num < _TAGGED else varint(num << 3 | WIRE_LEN)
    return tag + (_BYTES[n] if n < 128 else varint(n)) + payload


def vfield(num: int, value: int) -> bytes:
    return varint(num << 3 | WIRE_VARINT) + varint(value)


def sfield(num: int, s: str) -> bytes:
    return field(num, s.encode())


def varint_sizes(v: np.ndarray) -> np.ndarray:
    """Bytes of each (non-negative) value's varint."""
    return 1 + sum((v >= 1 << (7 * k)).astype(np.int64) for k in range(1, 9))


def _put_varints(out: np.ndarray, at: np.ndarray, v: np.ndarray, sizes: np.ndarray) -> None:
    """Write varint k (of sizes[k] bytes) from at[k] on, a byte position at a time."""
    for k in range(int(sizes.max(initial=0))):
        m = sizes > k
        if not m.all():  # most bytes are in every value (timestamps: 6-9 each): selecting them all costs a third
            at, v, sizes = at[m], v[m], sizes[m]
        byte = (v >> (7 * k)) & 0x7F
        byte |= (sizes > k + 1).astype(byte.dtype) << 7
        out[at + k] = byte


def _put_fields(out: np.ndarray, at: np.ndarray, fields: list[tuple[bytes, np.ndarray]], sizes: list[np.ndarray]
                ) -> np.ndarray:
    """Write row k's fields (tag, then the varint of values[k]) from at[k] on; returns where each row's fields end."""
    for (tag, values), size in zip(fields, sizes, strict=True):
        for byte in tag:
            out[at] = byte
            at = at + 1
        _put_varints(out, at, values, size)
        at = at + size
    return at


def rows(fields: list[tuple[bytes, np.ndarray]]) -> bytes:
    """Row k = each varint field's tag and values[k]; the rows back to back (a message's repeated fields, column-wise;
    values non-negative)."""
    sizes = [varint_sizes(v) for _, v in fields]
    row = sum(len(tag) + size for (tag, _), size in zip(fields, sizes, strict=True))
    ends = np.cumsum(row)
    out = np.empty(int(ends[-1]) if len(ends) else 0, np.uint8)
    _put_fields(out, ends - row, fields, sizes)
    return out.tobytes()


def joined(runs: list[bytes | tuple[bytes, np.ndarray]]) -> tuple[bytes, np.ndarray]:
    """Runs of packets (bytes, and where each packet ends; or one whole packet) as one run."""
    runs = [(r, np.array([len(r)])) if isinstance(r, bytes) else r for r in runs]
    starts = np.cumsum([0] + [len(data) for data, _ in runs])
    ends = [e + at for (_, e), at in zip(runs, starts[:-1], strict=True)]
    return b"".join(data for data, _ in runs), np.concatenate(ends) if ends else np.zeros(0, np.int64)


def stamped(time: np.ndarray, since: int | None = None) -> list[tuple[bytes, np.ndarray]]:
    """Packets' timestamp field (uint64 on the wire: the host clock never goes below 0) of ascending times: absolute,
    or with `since` (at most the first) each the delta from the one before (Encoding.delta_time)."""
    time = np.maximum(time, 0)
    return [(TIMESTAMP_TAG, time if since is None else np.diff(time, prepend=since))]


def packets(fields: list[tuple[bytes, np.ndarray]], tail_ids: np.ndarray, tails: list[bytes]
             ) -> tuple[bytes, np.ndarray]:
    """Frame packet k as Trace.packet{each varint field: tag, values[k]; then tails[tail_ids[k]]} (values are
    non-negative); returns the bytes and where each packet ends. In C where built (int64 values), else numpy's."""
    if fast is None or any(v.dtype != np.int64 for _, v in fields):
        return packets_numpy(fields, tail_ids, tails)
    ends = np.empty(len(tail_ids), np.int64)
    data = fast.packets(PACKET_TAG[0], [(tag, np.ascontiguousarray(v)) for tag, v in fields],
                        np.ascontiguousarray(tail_ids, np.int64), tails, ends)
    return data, ends


def packets_numpy(fields: list[tuple[bytes, np.ndarray]], tail_ids: np.ndarray, tails: list[bytes]
                  ) -> tuple[bytes, np.ndarray]:
    """`packets` column-wise with numpy: the reference the C framing (_wire.c) matches."""
    sizes = np.array([len(x) for x in tails], np.int64)
    tail_size = sizes[tail_ids]
    value_sizes = [varint_sizes(v) for _, v in fields]
    body = tail_size + sum(len(tag) + size for (tag, _), size in zip(fields, value_sizes, strict=True))
    body_size = varint_sizes(body)
    ends = np.cumsum(1 + body_size + body)
    at = ends - body - body_size - 1
    out = np.empty(int(ends[-1]) if len(ends) else 0, np.uint8)
    out[at] = PACKET_TAG[0]
    _put_varints(out, at + 1, body, body_size)
    _put_fields(out, at + 1 + body_size, fields, value_sizes)
    # every tail byte: from its place in the joined tails to its place in the packet
    offsets = (np.cumsum(sizes) - sizes)[tail_ids]
    run = np.cumsum(tail_size) - tail_size
    step = np.arange(int(tail_size.sum()))
    out[np.repeat(ends - tail_size - run, tail_size) + step] = \
        np.frombuffer(b"".join(tails), np.uint8)[np.repeat(offsets - run, tail_size) + step]
    return out.tobytes(), ends
