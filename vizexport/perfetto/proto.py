"""Timeline → Perfetto TrackEvent protobuf (.pftrace), encoded directly for speed.

Layout (peers-and-perfetto.md §1): sequence 1 carries every TrackDescriptor (explicit child ordering); each track with
events gets its own packet sequence whose defaults name the track and an incremental clock (id 64, anchored to
BOOTTIME by a ClockSnapshot), so an event costs a few bytes: a timestamp delta, an interned name, flags.
Interned event names, annotation names and repeated string values are defined on the packet that first uses them.
Packets are grouped into `compressed_packets` (deflate) unless compression is off. perfetto_trace_pb2 (the official
schema) is the reference: the tests parse every output with it.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import struct
import zlib
from array import array
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from ..output import Progress
from ..timeline import Timeline, Track, slice_events

_BYTES = [bytes((i,)) for i in range(128)]  # one-byte varints: most ids and lengths
CLOCK_INCREMENTAL, CLOCK_BOOTTIME = 64, 6
SEQ_CLEARED, SEQ_NEEDS = 1, 2
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
CHUNK = 480 * 1024  # raw bytes per compressed_packets wrapper (the wrapper must stay under 512 KB)
_SCALARS = frozenset((str, int, float, bool))
SEGMENT = 200_000  # events per sequence of a big track (the unit of parallel encoding)
PARALLEL_MIN = 300_000  # events below which forking workers costs more than it saves


def varint(n: int) -> bytes:
    if 0 <= n < 128:
        return _BYTES[n]
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
        self.seq = vfield(10, seq_id)
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
    groups = (names << 1) | (dur < 0)  # name and instant flag; negative: events with args or flows
    by_args: dict[tuple[int, int], int] = {}
    for i, a in t.args.items():
        if start <= i < end:
            groups[i - start] = by_args.setdefault((int(groups[i - start]), id(a)), -1 - len(by_args))
    for i in {i for d in (t.flows_out, t.flows_in) for i in d if start <= i < end}:
        groups[i - start] = -1 - len(by_args) - i
    begins = idx[~is_end]
    _, first, inverse, count = np.unique(groups[begins], return_index=True, return_inverse=True, return_counts=True)
    tails = [field(11, vfield(9, SLICE_END)) + seq.needs]  # 0: every END
    first_tail, later_tail = np.empty(len(first), np.int64), np.empty(len(first), np.int64)
    for g in np.argsort(first):
        i = start + int(begins[first[g]])
        tail, reusable = _tail(seq, t, i)
        first_tail[g] = later_tail[g] = len(tails)
        tails.append(tail)
        if not reusable and count[g] > 1:
            later_tail[g] = len(tails)
            tails.append(_tail(seq, t, i)[0])
    tail_ids = np.zeros(len(idx), np.int64)
    begin_tails = later_tail[inverse.ravel()]
    begin_tails[first] = first_tail
    tail_ids[~is_end] = begin_tails
    return _packets(seq, time, tail_ids, tails)


def _counters(seq: _Sequence, t: Track, start: int, end: int) -> tuple[bytes, np.ndarray]:
    """COUNTER packets: one tail per distinct value."""
    values, inverse = np.unique(_column(t.values)[start:end], return_inverse=True)
    tails = []
    for v in values.tolist():
        tails.append(field(11, vfield(9, COUNTER) + vfield(30, v)) + seq.needs)
    return _packets(seq, _column(t.ts)[start:end], inverse.ravel(), tails)


def _varint_sizes(v: np.ndarray) -> np.ndarray:
    """Bytes of each (non-negative) value's varint."""
    return 1 + sum((v >= 1 << (7 * k)).astype(np.int64) for k in range(1, 9))


def _put_varints(out: np.ndarray, at: np.ndarray, v: np.ndarray, sizes: np.ndarray) -> None:
    for k in range(int(sizes.max(initial=0))):
        m = sizes > k
        out[at[m] + k] = ((v[m] >> (7 * k)) & 0x7F) | np.where(sizes[m] > k + 1, 0x80, 0)


def _packets(seq: _Sequence, time: np.ndarray, tail_ids: np.ndarray, tails: list[bytes]) -> tuple[bytes, np.ndarray]:
    """Frame packet k as Trace.packet{timestamp: time[k] - time[k-1], then tails[tail_ids[k]]}; returns the bytes
    and where each packet ends."""
    delta = np.diff(time, prepend=seq.last_ts)
    seq.last_ts = int(time[-1]) if len(time) else seq.last_ts
    sizes = np.array([len(x) for x in tails], np.int64)
    tail_size = sizes[tail_ids]
    delta_size = _varint_sizes(delta)
    body = 1 + delta_size + tail_size
    body_size = _varint_sizes(body)
    ends = np.cumsum(1 + body_size + body)
    at = ends - body - body_size - 1
    out = np.empty(int(ends[-1]) if len(ends) else 0, np.uint8)
    out[at] = 0x0A
    _put_varints(out, at + 1, body, body_size)
    out[at + 1 + body_size] = 0x40
    _put_varints(out, at + 2 + body_size, delta, delta_size)
    # every tail byte: from its place in the joined tails to its place in the packet
    offsets = (np.cumsum(sizes) - sizes)[tail_ids]
    run = np.cumsum(tail_size) - tail_size
    step = np.arange(int(tail_size.sum()))
    out[np.repeat(ends - tail_size - run, tail_size) + step] = \
        np.frombuffer(b"".join(tails), np.uint8)[np.repeat(offsets - run, tail_size) + step]
    return out.tobytes(), ends


def _event(seq: _Sequence, name: int, instant: bool, args: dict | None) -> bytes:
    """TrackEvent fields: type, interned name, debug annotations."""
    ev = vfield(9, INSTANT if instant else SLICE_BEGIN) + vfield(10, seq.name_iid(name))
    if args:
        ev += b"".join(seq.entry(4, k, v) for k, v in args.items())
    return ev


def _tail(seq: _Sequence, t: Track, i: int) -> tuple[bytes, bool]:
    """A BEGIN/INSTANT packet after its timestamp: the track_event, the interned data this first use defines,
    the sequence id and flags; and whether it may be reused (not while it defines interned data)."""
    ev = _event(seq, t.names[i], t.dur[i] < 0, t.args.get(i))
    ev += b"".join(b"\xf9\x02" + f.to_bytes(8, "little") for f in t.flows_out.get(i, ()))  # flow_ids (47)
    ev += b"".join(b"\x81\x03" + f.to_bytes(8, "little") for f in t.flows_in.get(i, ()))  # terminating (48)
    tail = field(11, ev)  # TracePacket.track_event
    if not seq.new_interned:
        return tail + seq.needs, True
    tail += field(12, bytes(seq.new_interned)) + seq.needs
    seq.new_interned.clear()
    return tail, False


def segments(t: Track, size: int = SEGMENT) -> Iterator[tuple[int, int]]:
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


def _encode(tl: Timeline, job: tuple[int, int, int, int], compress: bool) -> bytes:
    """One segment of one track as its own sequence: framed (or compressed_packets) bytes."""
    track_index, start, end, seq_id = job
    t = tl.tracks[track_index]
    seq = _Sequence(seq_id, t, tl.strings, start)
    header = seq.header()
    data, ends = (_counters if t.kind == "counter" else _slices)(seq, t, start, end)
    return _framed(header + data, np.concatenate(([len(header)], ends + len(header))), compress)


def _framed(data: bytes, ends: np.ndarray, compress: bool) -> bytes:
    """Packets as written: raw, or in compressed_packets wrappers of whole packets, about CHUNK raw bytes each."""
    if not compress:
        return data
    out, a = [], 0
    while a < len(data):
        b = int(ends[max(np.searchsorted(ends, a + CHUNK, "right"), np.searchsorted(ends, a, "right") + 1) - 1])
        out.append(field(1, field(50, zlib.compress(data[a:b], 6))))
        a = b
    return b"".join(out)


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
    tracks = tl.walk()
    parents = {t.parent for t in tracks}
    described = [descriptor(t, t.uuid in parents) for t in tracks]
    head = _framed(b"".join(described), np.cumsum([len(d) for d in described]), compress)
    out.write(head)
    written = len(head)
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
            written += len(data)
            done += b - a
            if progress is not None:
                progress(done, total)
    finally:
        _shared = None
        if pool is not None:
            pool.terminate()
            pool.join()
    return written
