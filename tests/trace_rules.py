"""Reads a .pftrace back with the official perfetto_trace_pb2 schema and checks the TrackEvent protocol rules."""
from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent
DELTA_CLOCK = 64  # a sequence-scoped clock id (--delta-time)


@dataclass
class Decoded:
    descriptors: dict[int, pb.TrackDescriptor] = field(default_factory=dict)
    slices: dict[int, list[tuple[int, int, str, dict]]] = field(default_factory=lambda: defaultdict(list))
    instants: dict[int, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    counters: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    flows_out: Counter = field(default_factory=Counter)
    flows_in: Counter = field(default_factory=Counter)
    compressed_chunks: int = 0

    def by_name(self, name: str) -> list[int]:
        return [u for u, d in self.descriptors.items() if d.name == name]


def packets(data: bytes) -> tuple[list[pb.TracePacket], int]:
    trace = pb.Trace()
    trace.ParseFromString(data)
    out, chunks = [], 0
    for p in trace.packet:
        if p.HasField("compressed_packets"):
            chunks += 1
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(p.compressed_packets))
            out.extend(inner.packet)
        else:
            out.append(p)
    return out, chunks


def _annotations(anns, names: dict[int, str], values: dict[int, str]) -> dict:
    out = {}
    for a in anns:
        assert not a.name_iid or a.name_iid in names, f"annotation name iid {a.name_iid} used before definition"
        out[names[a.name_iid] if a.name_iid else a.name] = _value(a, names, values)
    return out


def _value(a, names: dict[int, str], values: dict[int, str]):
    if a.dict_entries:
        return _annotations(a.dict_entries, names, values)
    if a.array_values:
        return [_value(x, names, values) for x in a.array_values]
    if a.HasField("string_value_iid"):
        assert a.string_value_iid in values, "string value iid used before definition"
        return values[a.string_value_iid]
    kind = a.WhichOneof("value")
    return getattr(a, kind) if kind else None


def _snapshot(p: pb.TracePacket, trace_clock: list[int]) -> int:
    """The time a segment's ClockSnapshot starts its incremental clock at: the same BOOTTIME, which never goes back."""
    clocks = {c.clock_id: c for c in p.clock_snapshot.clocks}
    assert set(clocks) == {DELTA_CLOCK, pb.BUILTIN_CLOCK_BOOTTIME}, "the sequence's clock tied to BOOTTIME"
    delta, boot = clocks[DELTA_CLOCK], clocks[pb.BUILTIN_CLOCK_BOOTTIME]
    assert delta.is_incremental and not boot.is_incremental and delta.timestamp == boot.timestamp
    assert boot.timestamp >= trace_clock[-1], "the trace clock's snapshots never go back"
    trace_clock.append(boot.timestamp)
    return boot.timestamp


def check(data: bytes, delta_time: bool = False) -> Decoded:
    """Decode and assert the protocol rules; returns the events per track uuid (absolute ns timestamps).
    `delta_time`: each segment's timestamps are deltas on its sequence's incremental clock, which a ClockSnapshot
    after its first packet starts (else there are no clock snapshots: the UI draws them as a track)."""
    pkts, chunks = packets(data)
    d = Decoded(compressed_chunks=chunks)
    seq_track: dict[int, int] = {}
    seq_last: dict[int, int] = {}  # sequence → its last timestamp
    seq_clock: dict[int, int] = {}  # sequence → its incremental clock's time (delta_time)
    trace_clock = [0]  # the BOOTTIME times of the clock snapshots
    interned: dict[int, tuple[dict, dict, dict]] = {}
    open_: dict[int, list[tuple[int, str, dict]]] = defaultdict(list)
    seen_event = False
    for p in pkts:
        seq = p.trusted_packet_sequence_id
        assert seq, "every packet names its sequence"
        if p.HasField("clock_snapshot"):
            assert delta_time, "no clock snapshots (the UI draws them as a track)"
            assert seq in seq_track and seq not in seq_clock, "a snapshot starts each segment's clock once"
            seq_clock[seq] = _snapshot(p, trace_clock)
            continue
        if p.HasField("track_descriptor"):
            assert not seen_event, "descriptors precede events"
            t = p.track_descriptor
            assert t.uuid not in d.descriptors, "one descriptor per track"
            assert not t.parent_uuid or t.parent_uuid in d.descriptors, "parent described before child"
            d.descriptors[t.uuid] = t
            continue
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:  # a segment starts (its own state)
            interned[seq] = ({}, {}, {})
            seq_last.pop(seq, None)
            seq_clock.pop(seq, None)
            events = p.trace_packet_defaults.HasField("track_event_defaults")  # (not a thread's callstack samples)
            clock = DELTA_CLOCK if delta_time and events else pb.BUILTIN_CLOCK_BOOTTIME  # else absolute ns
            assert p.trace_packet_defaults.timestamp_clock_id == clock
            seq_track[seq] = p.trace_packet_defaults.track_event_defaults.track_uuid
            continue
        if not p.HasField("track_event"):
            continue
        seen_event = True
        assert seq in interned, "incremental state cleared before first use"
        assert p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE, "events flag their need of the state"
        names, arg_names, values = interned[seq]
        for e in p.interned_data.event_names:
            names[e.iid] = e.name
        for e in p.interned_data.debug_annotation_names:
            arg_names[e.iid] = e.name
        for e in p.interned_data.debug_annotation_string_values:
            values[e.iid] = e.str.decode()
        ts = p.timestamp
        if delta_time:
            assert seq in seq_clock, "a segment's clock started before its first event"
            ts = seq_clock[seq] = seq_clock[seq] + ts
        assert ts >= seq_last.get(seq, 0), "each segment of a sequence in time order"
        seq_last[seq] = ts
        ev = p.track_event
        track = ev.track_uuid or seq_track[seq]
        assert track in d.descriptors, "event on a described track"
        if ev.name_iid:
            assert ev.name_iid in names, f"event name iid {ev.name_iid} used before definition"
        name = names.get(ev.name_iid, ev.name)
        args = _annotations(ev.debug_annotations, arg_names, values)
        d.flows_out.update(ev.flow_ids)
        d.flows_in.update(ev.terminating_flow_ids)
        if ev.type == TE.TYPE_SLICE_BEGIN:
            open_[track].append((ts, name, args))
        elif ev.type == TE.TYPE_SLICE_END:
            assert open_[track], "END without BEGIN on its track"
            st, nm, a = open_[track].pop()
            d.slices[track].append((st, ts, nm, a))
        elif ev.type == TE.TYPE_INSTANT:
            d.instants[track].append((ts, name))
        elif ev.type == TE.TYPE_COUNTER:
            assert d.descriptors[track].HasField("counter")
            d.counters[track].append((ts, ev.counter_value))
    assert not any(open_.values()), "every BEGIN has its END"
    assert all(n == 1 for n in d.flows_out.values()) and d.flows_out == d.flows_in, "flow ids paired"
    return d
