"""Python callstacks of slices as Perfetto callstack samples: one sample per slice with a callstack, at its start (to
the µs: the samples' clock), on a thread named after the slice's root track (TINY, USER, GC) of one process named
"Python".

The callstacks are interned (function names, mappings = source files, frames, callstacks), so the Perfetto UI shows
each sample's Python stack and aggregates any time range as a flame graph. Other ways were tried in the UI we check
with (v52): TrackEvent's own callstack fields would attach a stack to the slice itself, but that trace processor
does not know them and flags each as an error (`unknown_extension_fields`); PerfSample packets work but add a
"Perf Counters › Cpu 0 cpu-clock" group above every other track. StreamingProfilePacket does neither.
"""
from __future__ import annotations

import numpy as np

from ..timeline import Frame, Timeline
from .wire import (
    CLOCK_BOOTTIME,
    COMPACT,
    SEQ_NEEDS,
    TIMESTAMP_TAG,
    WIRE_LEN,
    WIRE_VARINT,
    Encoding,
    Trace,
    TracePacket,
    TracePacketDefaults,
    field,
    joined,
    packets,
    rows,
    sfield,
    varint,
    varint_sizes,
    vfield,
)

PID = 1  # the process the host's Python threads are shown in (a profile records no pid)
PROCESS_NAME = "Python"


class TracePacketFields:
    PROCESS_TREE, THREAD_DESCRIPTOR, STREAMING_PROFILE_PACKET = 2, 44, 54


class ThreadDescriptorFields:  # ThreadDescriptor (the legacy one a sequence's samples rely on)
    PID, TID, THREAD_NAME, REFERENCE_TIMESTAMP_US = 1, 2, 5, 6


class StreamingProfilePacket:
    CALLSTACK_IID, TIMESTAMP_DELTA_US = 1, 2


SAMPLE_TAG = varint(TracePacketFields.STREAMING_PROFILE_PACKET << 3 | WIRE_LEN)
CALLSTACK_TAG = varint(StreamingProfilePacket.CALLSTACK_IID << 3 | WIRE_VARINT)
DELTA_TAG = varint(StreamingProfilePacket.TIMESTAMP_DELTA_US << 3 | WIRE_VARINT)


class ProcessTree:
    PROCESSES, THREADS = 1, 2


class ProcessTreeProcess:  # ProcessTree.Process
    PID, CMDLINE = 1, 3


class ProcessTreeThread:  # ProcessTree.Thread
    TID, NAME, TGID = 1, 2, 3


class InternedStacks:  # InternedData fields of callstacks
    FUNCTION_NAMES, FRAMES, CALLSTACKS, MAPPING_PATHS, MAPPINGS = 5, 6, 7, 17, 19


class FrameFields:  # Frame
    IID, FUNCTION_NAME_ID, MAPPING_ID = 1, 2, 3


class CallstackFields:  # Callstack
    IID, FRAME_IDS = 1, 2


class MappingFields:  # Mapping
    IID, PATH_STRING_IDS = 1, 7


class InternedString:
    IID, STR = 1, 2


def threads(tl: Timeline) -> dict[str, int]:
    """Thread id per root track with callstacks, in track order."""
    out: dict[str, int] = {}
    for t in tl.walk():
        if t.stacks:
            out.setdefault(tl.path(t)[0].name, len(out) + 1)
    return out


def process_tree(tl: Timeline, tids: dict[str, int]) -> bytes:
    """Names the process and its threads."""
    proc = field(ProcessTree.PROCESSES, vfield(ProcessTreeProcess.PID, PID) +
                 sfield(ProcessTreeProcess.CMDLINE, PROCESS_NAME))
    thr = b"".join(field(ProcessTree.THREADS, vfield(ProcessTreeThread.TID, tid) + sfield(ProcessTreeThread.NAME, n) +
                         vfield(ProcessTreeThread.TGID, PID)) for n, tid in tids.items())
    return field(Trace.PACKET, field(TracePacketFields.PROCESS_TREE, proc + thr) +
                 vfield(TracePacket.TRUSTED_PACKET_SEQUENCE_ID, 1))


class _Interner:
    def __init__(self) -> None:
        self.tables: dict[int, dict] = {}
        self.new = bytearray()

    def iid(self, table: int, key: object, payload) -> int:
        """The iid of `key` in InternedData field `table`, defining it with payload(iid) on first use."""
        ids = self.tables.setdefault(table, {})
        i = ids.get(key)
        if i is None:
            i = ids[key] = len(ids) + 1
            self.new += field(table, payload(i))
        return i

    def string(self, table: int, s: str) -> int:
        return self.iid(table, s, lambda i: vfield(InternedString.IID, i) + sfield(InternedString.STR, s))

    def frame(self, f: Frame) -> int:
        name = self.string(InternedStacks.FUNCTION_NAMES, f.label())
        path = self.string(InternedStacks.MAPPING_PATHS, f.file)
        mapping = self.iid(InternedStacks.MAPPINGS, f.file, lambda i: vfield(MappingFields.IID, i) +
                           vfield(MappingFields.PATH_STRING_IDS, path))
        return self.iid(InternedStacks.FRAMES, f, lambda i: vfield(FrameFields.IID, i) +
                        vfield(FrameFields.FUNCTION_NAME_ID, name) + vfield(FrameFields.MAPPING_ID, mapping))

    def stack(self, sid: int, frames: tuple[Frame, ...]) -> int:
        known = self.tables.get(InternedStacks.CALLSTACKS, {}).get(sid)
        if known is not None:  # the usual case: a few hundred call sites make all of a run's stacks
            return known
        ids = [self.frame(f) for f in frames]
        return self.iid(InternedStacks.CALLSTACKS, sid, lambda i: vfield(CallstackFields.IID, i) +
                        b"".join(vfield(CallstackFields.FRAME_IDS, f) for f in ids))


def samples(tl: Timeline, first_seq: int, encoding: Encoding = COMPACT) -> tuple[bytes, np.ndarray]:
    """Packets naming the process and threads, then per thread a sequence: a ThreadDescriptor (which ties the
    sequence's samples to the thread and sets the reference time), then one sample per slice with a callstack, in
    time order, each packet defining the interned data it is the first to use (`encoding`: how many samples a packet
    holds, whether they carry SEQ_NEEDS_INCREMENTAL_STATE). Returns them joined, and where each ends."""
    tids = threads(tl)
    found: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {tid: [] for tid in tids.values()}
    for t in tl.walk():
        if t.stacks:
            at = np.fromiter(t.stacks, np.int64, len(t.stacks))
            found[tids[tl.path(t)[0].name]].append((np.frombuffer(t.ts, np.int64)[at],
                                                     np.fromiter(t.stacks.values(), np.int64, len(at))))
    runs: list = [process_tree(tl, tids)] if tids else []
    for n, (name, tid) in enumerate(tids.items()):
        ts, sids = (np.concatenate(c) for c in zip(*found[tid], strict=True))
        order = np.lexsort((sids, ts))  # by time, then stack
        runs.append(_thread_samples(tl, (first_seq + n, encoding), name, tid, ts[order], sids[order]))
    return joined(runs)


def _thread_samples(tl: Timeline, sequence: tuple[int, Encoding], name: str, tid: int, ts: np.ndarray,
                    sids: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The thread's sequence (its id, and how its samples are encoded): its descriptor packet, then its samples."""
    seq_id, encoding = sequence
    seq = vfield(TracePacket.TRUSTED_PACKET_SEQUENCE_ID, seq_id)
    needs = seq + vfield(TracePacket.SEQUENCE_FLAGS, SEQ_NEEDS) if encoding.needs_flag else seq
    us = np.maximum(ts, 0) // 1000  # the samples' clock counts µs
    TD = ThreadDescriptorFields
    desc = vfield(TD.PID, PID) + vfield(TD.TID, tid) + sfield(TD.THREAD_NAME, name) + \
        vfield(TD.REFERENCE_TIMESTAMP_US, int(us[0]))
    head = vfield(TracePacket.TIMESTAMP, int(us[0]) * 1000) + field(TracePacketFields.THREAD_DESCRIPTOR, desc) + \
        field(TracePacket.TRACE_PACKET_DEFAULTS, vfield(TracePacketDefaults.TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME)) + \
        seq + vfield(TracePacket.SEQUENCE_FLAGS, TracePacket.SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS)
    # each stack's first sample defines its interned data (stacks taken in order of first use)
    stacks, first, inverse = np.unique(sids, return_index=True, return_inverse=True)
    interned, defined = _Interner(), []
    iids = np.empty(len(stacks), np.int64)
    for g in np.argsort(first).tolist():
        iids[g] = interned.stack(int(stacks[g]), tl.stacks[int(stacks[g])])
        defined.append(bytes(interned.new))
        interned.new.clear()
    iid, delta = iids[inverse.ravel()], np.diff(us, prepend=us[0])
    per = encoding.samples_per_packet
    body = _one_each(us, iid, delta, (np.sort(first), defined), needs) if per == 1 else \
        _batched(iid, delta, (np.sort(first), defined), needs, per)
    return joined([field(Trace.PACKET, head), body])


def _one_each(us: np.ndarray, iid: np.ndarray, delta: np.ndarray, defined: tuple[np.ndarray, list[bytes]],
              needs: bytes) -> tuple[bytes, np.ndarray]:
    """A packet per sample (timestamped), framed column-wise; a stack's first sample defines its interned data."""
    at, data = defined
    tails = [needs] + [field(TracePacket.INTERNED_DATA, d) + needs for d in data]
    tail_ids = np.zeros(len(iid), np.int64)
    tail_ids[at] = np.arange(1, len(at) + 1)
    size = len(CALLSTACK_TAG) + len(DELTA_TAG) + varint_sizes(iid) + varint_sizes(delta)
    return packets([(TIMESTAMP_TAG, us * 1000), (SAMPLE_TAG, size), (CALLSTACK_TAG, iid), (DELTA_TAG, delta)],
                   tail_ids, tails)


def _batched(iid: np.ndarray, delta: np.ndarray, defined: tuple[np.ndarray, list[bytes]], needs: bytes, per: int
             ) -> tuple[bytes, np.ndarray]:
    """Packets of `per` samples each (the StreamingProfilePacket's repeated callstack_iid and timestamp_delta_us,
    which the reader walks in step), each defining the interned data its samples are the first to use."""
    at, data = defined
    runs = []
    for a in range(0, len(iid), per):
        b = min(a + per, len(iid))
        pkt = field(TracePacketFields.STREAMING_PROFILE_PACKET, rows([(CALLSTACK_TAG, iid[a:b]),
                                                                    (DELTA_TAG, delta[a:b])]))
        new = b"".join(data[int(np.searchsorted(at, a)):int(np.searchsorted(at, b))])
        runs.append(field(Trace.PACKET, pkt + (field(TracePacket.INTERNED_DATA, new) if new else b"") + needs))
    return joined(runs)
