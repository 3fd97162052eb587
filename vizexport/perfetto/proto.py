"""Timeline → Perfetto TrackEvent protobuf (.pftrace), encoded directly for speed.

Layout (peers-and-perfetto.md §1): sequence 1 carries every TrackDescriptor (explicit child ordering); each track with
events gets its own packet sequence whose defaults name the track and an incremental clock (id 64, anchored to
BOOTTIME by a ClockSnapshot), so an event costs a few bytes: a timestamp delta, an interned name, flags.
Interned event names, annotation names and repeated string values are defined on the packet that first uses them.
Packets are grouped into `compressed_packets` (deflate) unless compression is off. perfetto_trace_pb2 (the official
schema) is the reference: the tests parse every output with it.
"""
from __future__ import annotations

import io
import multiprocessing as mp
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from ..output import Progress
from ..timeline import Timeline, Track

_VARINTS = [bytes([i]) if i < 128 else bytes([i & 0x7F | 0x80, i >> 7]) for i in range(1 << 14)]
_LOW14 = [bytes([i & 0x7F | 0x80, i >> 7 | 0x80]) for i in range(1 << 14)]  # low 14 bits, more to come
CLOCK_INCREMENTAL, CLOCK_BOOTTIME = 64, 6
SEQ_CLEARED, SEQ_NEEDS = 1, 2
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
CHUNK = 480 * 1024  # raw bytes per compressed_packets wrapper (the wrapper must stay under 512 KB)
_SCALARS = frozenset((str, int, float, bool))
SEGMENT = 200_000  # events per sequence of a big track (the unit of parallel encoding)
PARALLEL_MIN = 300_000  # events below which forking workers costs more than it saves


def varint(n: int) -> bytes:
    if 0 <= n < 16384:
        return _VARINTS[n]
    if 0 < n < 1 << 28:  # the usual timestamp delta: µs to seconds
        return _LOW14[n & 0x3FFF] + _VARINTS[n >> 14]
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 127:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(num: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vfield(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def sfield(num: int, s: str) -> bytes:
    return field(num, s.encode())


def descriptor(t: Track, has_children: bool) -> bytes:
    d = vfield(1, t.uuid) + sfield(2, t.name)
    if t.parent:
        d += vfield(5, t.parent)
    if t.description:
        d += sfield(14, t.description)
    if t.kind == "counter":
        d += field(8, vfield(3, 3) if t.unit == "bytes" else (sfield(6, t.unit) if t.unit else b""))
    if has_children:
        d += vfield(11, 3)  # child_ordering = EXPLICIT
    d += vfield(12, t.rank)  # sibling_order_rank
    return field(1, field(60, d) + vfield(10, 1))


class _Sequence:
    """Encoder state of one packet sequence: incremental clock and interning tables."""

    def __init__(self, seq_id: int, track: Track, strings: list[str], start: int = 0) -> None:
        self.seq_id, self.seq = seq_id, vfield(10, seq_id)
        # every packet after the header relies on its defaults (clock, track), so each says so (trace_packet.proto)
        self.needs = self.seq + vfield(13, SEQ_NEEDS)
        self.track, self.strings = track, strings
        self.last_ts = track.ts[start] if len(track) > start else 0
        self.names: dict[int, int] = {}  # Timeline string id → event name iid
        self.arg_names: dict[str, int] = {}
        self.values: dict[str, int] = {}
        self.new_interned = bytearray()
        self.entries: dict[tuple, bytes] = {}  # (field, name, type, value) → an encoded scalar annotation

    def header(self) -> bytes:
        clocks = field(1, vfield(1, CLOCK_BOOTTIME) + vfield(2, self.last_ts)) + \
            field(1, vfield(1, CLOCK_INCREMENTAL) + vfield(2, self.last_ts) + vfield(3, 1))
        defaults = vfield(58, CLOCK_INCREMENTAL) + field(11, vfield(11, self.track.uuid))
        pkt = vfield(8, self.last_ts) + vfield(58, CLOCK_BOOTTIME) + field(6, clocks) + field(59, defaults) + \
            self.seq + vfield(13, SEQ_CLEARED | SEQ_NEEDS)
        return field(1, pkt)

    def _iid(self, table: dict, key: object, field_no: int, text: str) -> int:
        """The iid of `key` in an interning table, defining it (InternedData field `field_no`) on first use."""
        iid = table.get(key)
        if iid is None:
            iid = table[key] = len(table) + 1
            self.new_interned += field(field_no, vfield(1, iid) + sfield(2, text))
        return iid

    def name_iid(self, sid: int) -> int:
        return self._iid(self.names, sid, 2, self.strings[sid])  # event_names

    def arg_iid(self, name: str) -> int:
        return self._iid(self.arg_names, name, 3, name)  # debug_annotation_names

    def value_iid(self, s: str) -> int:
        return self._iid(self.values, s, 29, s)  # debug_annotation_string_values

    def entry(self, num: int, name: str | None, v: object) -> bytes:
        """Field `num` holding a debug annotation; a scalar one is encoded once per sequence (kernel args repeat
        their buffer modes, dtypes and sizes)."""
        if type(v) not in _SCALARS:
            return field(num, self.annotation(name, v))
        key = (num, name, type(v), v)
        enc = self.entries.get(key)
        if enc is None:
            enc = self.entries[key] = field(num, self.annotation(name, v))
        return enc

    def annotation(self, name: str | None, v: object) -> bytes:
        out = vfield(1, self.arg_iid(name)) if name is not None else b""
        if isinstance(v, bool):
            out += vfield(2, int(v))
        elif isinstance(v, int):
            out += vfield(4, v)
        elif isinstance(v, float):
            out += varint(5 << 3 | 1) + struct.pack("<d", v)
        elif isinstance(v, dict):
            out += b"".join(self.entry(11, str(k), x) for k, x in v.items())
        elif isinstance(v, (list, tuple)):
            out += b"".join(self.entry(12, None, x) for x in v)
        elif isinstance(v, str) and len(v) > 24:  # long strings (tracebacks) repeat: intern them
            out += vfield(17, self.value_iid(v))
        else:
            out += sfield(6, str(v))
        return out

    def packet(self, ts: int, event: bytes) -> bytes:
        """One TracePacket (framed as Trace.packet), with the interned data defined since the last packet."""
        body = b"\x40" + varint(ts - self.last_ts) + b"\x5a" + _VARINTS[len(event)] + event
        self.last_ts = ts
        if self.new_interned:
            body += field(12, bytes(self.new_interned))
            self.new_interned.clear()
        body += self.needs
        return b"\x0a" + varint(len(body)) + body


class _Sink:
    """Collects framed packets; hands full chunks (compressed into compressed_packets, or raw) to the file."""

    def __init__(self, out: BinaryIO, compress: bool) -> None:
        self.out, self.compress, self.buf, self.written = out, compress, bytearray(), 0

    def flush(self) -> None:
        if self.buf:
            data = field(1, field(50, zlib.compress(self.buf, 6))) if self.compress else self.buf
            self.out.write(data)
            self.written += len(data)
            self.buf.clear()


def _slices(seq: _Sequence, t: Track, sink: _Sink, start: int, end: int) -> None:
    """BEGIN/END pairs (INSTANT for dur -1) in time order; nesting is already proper on the track.

    The hot loop of the writer: an END packet is cached per small timestamp delta, and a BEGIN without flows is
    the delta plus a tail cached per name and args (host spans of one key share one args dict); only events with
    flows take the general path.
    """
    V, L, out, stack = _VARINTS, _LOW14, sink.buf, []
    end_tail = b"\x5a\x02\x48\x02" + seq.needs  # track_event{type: SLICE_END}, sequence id and flags
    ends: dict[int, bytes] = {}  # delta → the whole END packet
    tails: dict[Any, bytes] = {}  # name (~name: instant), with id(args) if any → the packet after its timestamp
    ts, dur, names, args = t.ts, t.dur, t.names, t.args
    flowing = {i for d in (t.flows_out, t.flows_in) for i in d if start <= i < end}
    last = seq.last_ts
    for i in range(start, end):
        st = ts[i]
        while stack and stack[-1] <= st:
            e = stack.pop()
            pkt = ends.get(e - last)
            if pkt is None:
                pkt = _end_packet(e - last, end_tail)
                if e - last < 16384:
                    ends[e - last] = pkt
            out += pkt
            last = e
        d = dur[i]
        if i in flowing:
            seq.last_ts = last
            out += _slice_begin(seq, t, i)
        else:
            key: Any = names[i] if d >= 0 else ~names[i]
            a = args.get(i)
            if a is not None:
                key = (key, id(a))  # the track holds `a`: its id stays unique while we encode
            tail = tails.get(key)
            if tail is None:
                tail, reusable = _tail(seq, names[i], d < 0, a)
                if reusable:
                    tails[key] = tail
            delta = st - last
            dv = V[delta] if delta < 16384 else L[delta & 0x3FFF] + V[delta >> 14] if delta < 1 << 28 else \
                varint(delta)
            n = 1 + len(dv) + len(tail)
            out += b"\x0a" + (V[n] if n < 16384 else varint(n)) + b"\x40" + dv + tail
        last = st
        if d >= 0:
            stack.append(st + d)
        if len(out) >= CHUNK:
            sink.flush()
    while stack:
        e = stack.pop()
        out += _end_packet(e - last, end_tail)
        last = e
    seq.last_ts = last


def _end_packet(delta: int, end_tail: bytes) -> bytes:
    body = b"\x40" + varint(delta) + end_tail
    return b"\x0a" + _VARINTS[len(body)] + body


def _event(seq: _Sequence, name: int, instant: bool, args: dict | None) -> bytes:
    """TrackEvent fields: type, interned name, debug annotations."""
    ev = (b"\x48\x03\x50" if instant else b"\x48\x01\x50") + varint(seq.name_iid(name))
    if args:
        ev += b"".join(seq.entry(4, k, v) for k, v in args.items())
    return ev


def _tail(seq: _Sequence, name: int, instant: bool, args: dict | None) -> tuple[bytes, bool]:
    """A BEGIN/INSTANT packet after its timestamp: the track_event, the interned data this first use defines,
    the sequence id and flags; and whether it may be reused (not while it defines interned data)."""
    ev = _event(seq, name, instant, args)
    tail = b"\x5a" + varint(len(ev)) + ev
    if not seq.new_interned:
        return tail + seq.needs, True
    tail += field(12, bytes(seq.new_interned)) + seq.needs
    seq.new_interned.clear()
    return tail, False


def _slice_begin(seq: _Sequence, t: Track, i: int) -> bytes:
    """The packet of a BEGIN or INSTANT with flows."""
    ev = _event(seq, t.names[i], t.dur[i] < 0, t.args.get(i))
    ev += b"".join(b"\xf9\x02" + f.to_bytes(8, "little") for f in t.flows_out.get(i, ()))  # flow_ids (47)
    ev += b"".join(b"\x81\x03" + f.to_bytes(8, "little") for f in t.flows_in.get(i, ()))  # terminating (48)
    return seq.packet(t.ts[i], ev)


def _counters(seq: _Sequence, t: Track, sink: _Sink, start: int, end: int) -> None:
    head = vfield(9, COUNTER)
    for i in range(start, end):
        sink.buf += seq.packet(t.ts[i], head + vfield(30, t.values[i]))
        if len(sink.buf) >= CHUNK:
            sink.flush()


def segments(t: Track, size: int = SEGMENT) -> Iterator[tuple[int, int]]:
    """Split a track's events where nothing is open (every earlier slice has ended), about `size` events apart.

    Each segment becomes its own packet sequence, so big tracks can be encoded in parallel.
    """
    start, n = 0, len(t)
    if t.kind == "slice" and n > size:
        ts, dur, open_until = t.ts, t.dur, 0
        for i in range(n):
            if i - start >= size and ts[i] >= open_until:
                yield start, i
                start = i
            if ts[i] + dur[i] > open_until:
                open_until = ts[i] + dur[i]
    if n > start:
        yield start, n


def _encode(tl: Timeline, job: tuple[int, int, int, int], compress: bool) -> bytes:
    """One segment of one track as its own sequence: framed (or compressed_packets) bytes."""
    track_index, start, end, seq_id = job
    t = tl.tracks[track_index]
    buf = io.BytesIO()
    sink = _Sink(buf, compress)
    seq = _Sequence(seq_id, t, tl.strings, start)
    sink.buf += seq.header()
    (_counters if t.kind == "counter" else _slices)(seq, t, sink, start, end)
    sink.flush()
    return buf.getvalue()


_shared: tuple[Timeline, bool] | None = None  # what forked workers encode from (inherited, not pickled)


def _encode_shared(job: tuple[int, int, int, int]) -> bytes:
    assert _shared is not None
    return _encode(_shared[0], job, _shared[1])


def write(tl: Timeline, out: BinaryIO, compress: bool = True, jobs: int | None = None,
          progress: Progress | None = None) -> int:
    """Stream the trace to `out`: descriptors first, then one sequence per track segment. Returns bytes written.

    With more than one job (default: the number of cores) and a big timeline, segments are encoded in forked
    worker processes; the output is the same bytes either way. `progress(done, total)` is told the events
    written so far, a segment at a time.
    """
    global _shared
    sink = _Sink(out, compress)
    tracks = tl.walk()
    parents = {t.parent for t in tracks}
    for t in tracks:
        sink.buf += descriptor(t, t.uuid in parents)
    sink.flush()
    index = {id(t): i for i, t in enumerate(tl.tracks)}
    work = [(index[id(t)], a, b) for t in tracks for a, b in segments(t)]
    work = [(i, a, b, 2 + n) for n, (i, a, b) in enumerate(work)]  # sequence 1 holds the descriptors
    jobs = jobs or os.cpu_count() or 1
    done, total = 0, tl.n_events()
    parallel = jobs > 1 and total >= PARALLEL_MIN and "fork" in mp.get_all_start_methods()
    _shared = (tl, compress)  # set before the fork: the workers inherit it
    pool = mp.get_context("fork").Pool(min(jobs, len(work))) if parallel else None
    try:
        encoded = pool.imap(_encode_shared, work) if pool else (_encode(tl, job, compress) for job in work)
        for (_, a, b, _), data in zip(work, encoded, strict=True):
            out.write(data)
            sink.written += len(data)
            done += b - a
            if progress is not None:
                progress(done, total)
    finally:
        _shared = None
        if pool is not None:
            pool.terminate()
            pool.join()
    return sink.written
