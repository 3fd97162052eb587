"""The compact .pftrace layout (wire.COMPACT) against the layout written before (wire.SPREAD: a sequence per track
segment, sequence flags on every packet, short strings inline, a packet per callstack sample) and the one with delta
timestamps (wire.DELTA, --delta-time): the real Perfetto trace processor reads the same tracks, slices, args,
counters, flows and callstack samples from each, with no clock snapshots (which the UI would draw as a "Clock
Snapshots" track) but in the delta one; and the compact one is smaller than the one before, the delta one smaller
still."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from vizexport import load_profile
from vizexport.perfetto import callstacks, proto
from vizexport.perfetto.wire import COMPACT, DELTA, SPREAD
from vizexport.tinygrad.timeline import build_timeline

from . import trace_rules
from .conftest import FIXTURES, ROOT, tpq

PROFILES = {"sample": ROOT / "vizexport" / "data" / "sample" / "profile.pkl",
            "tinygrad/0.14.0-null": FIXTURES / "tinygrad" / "0.14.0-null" / "profile.pkl"}
# what the trace processor holds, each in a stable order (ids differ between files; names, times and values don't)
CONTENT = [
    "select count(*) as n from clock_snapshot",  # the UI's TraceMetadata plugin adds "Clock Snapshots" when n > 0
    "select name, value from stats where value > 0 and severity in ('error', 'data_loss')",
    "select t.name as track, p.name as parent, t.type as type from track t left join track p on t.parent_id = p.id "
    "order by 1, 2, 3",
    "select t.name as track, s.ts as ts, s.dur as dur, s.name as name, s.depth as depth from slice s "
    "join track t on s.track_id = t.id order by 1, 2, 3, 4, 5",
    "select t.name as track, s.ts as ts, s.name as name, a.key as key, a.display_value as v from slice s "
    "join track t on s.track_id = t.id join args a on a.arg_set_id = s.arg_set_id order by 1, 2, 3, 4, 5",
    "select t.name as track, c.ts as ts, c.value as v from counter c join counter_track t on c.track_id = t.id "
    "order by 1, 2, 3",
    "select so.ts as out_ts, so.name as out_name, si.ts as in_ts, si.name as in_name from flow f "
    "join slice so on so.id = f.slice_out join slice si on si.id = f.slice_in order by 1, 2, 3, 4",
    "select c.ts as ts, th.name as thread, f.name as frame from cpu_profile_stack_sample c join thread th using(utid) "
    "join stack_profile_callsite cs on cs.id = c.callsite_id join stack_profile_frame f on f.id = cs.frame_id "
    "order by 1, 2, 3",
]


def params() -> list:
    return [pytest.param(k, id=k, marks=[] if p.exists() else [pytest.mark.skip(reason="fixture absent")])
            for k, p in PROFILES.items()]


@pytest.mark.parametrize("key", params())
def test_compact_layout_reads_as_the_former_one(tmp_path: Path, key: str):
    tl = build_timeline(load_profile(PROFILES[key]))
    got = {}
    for name, enc in (("compact", COMPACT), ("spread", SPREAD), ("delta", DELTA)):
        out = tmp_path / f"{name}.pftrace"
        with open(out, "wb") as f:
            proto.write(tl, f, compress=False, encoding=enc)
        d = trace_rules.check(out.read_bytes(), delta_time=enc.delta_time)
        events = sum(map(len, d.instants.values())) + sum(map(len, d.counters.values())) + \
            2 * sum(map(len, d.slices.values()))
        got[name] = (out.stat().st_size, tpq(out, *CONTENT))
    (small, compact), (big, spread), (smallest, delta) = got["compact"], got["spread"], got["delta"]
    clocks, stats, tracks, slices, args, counters, flows, samples = compact
    assert clocks == [{"n": 0}] and stats == []
    assert len(tracks) > 5 and len(slices) > 100 and len(args) > 100
    assert len(counters) > 10 and len(flows) > 10 and len(samples) > 10
    for a, b, c, what in zip(compact, spread, delta, ("clock snapshots", "stats", "tracks", "slices", "args",
                                                      "counters", "flows", "samples"), strict=True):
        assert a == b, what
        assert a == c or what == "clock snapshots", what
    pkts = trace_rules.packets((tmp_path / "delta.pftrace").read_bytes())[0]
    segments = sum(p.trace_packet_defaults.HasField("track_event_defaults") for p in pkts)
    assert delta[0] == [{"n": 2 * segments}]  # a snapshot each: its clock and BOOTTIME
    assert big - small > events  # short strings interned, samples batched: over a byte per event packet
    assert small - smallest > events  # a timestamp delta: 1-3 bytes where an absolute time takes 6


def test_samples_are_batched_and_strings_interned():
    """COMPACT writes a thread's samples in one StreamingProfilePacket (up to 4096), every track segment on sequence
    2, and interns a 3-character string value; SPREAD a packet per sample, strings up to 24 characters inline. Both
    flag every event as needing the sequence's incremental state, as trace_packet.proto asks."""
    tl = build_timeline(load_profile(PROFILES["sample"]))
    n, threads = sum(len(t.stacks) for t in tl.tracks), len(callstacks.threads(tl))
    assert threads >= 1 and 10 < n < COMPACT.samples_per_packet
    for enc, packets in ((COMPACT, threads), (SPREAD, n)):
        b = io.BytesIO()
        proto.write(tl, b, compress=False, encoding=enc)
        pkts = trace_rules.packets(b.getvalue())[0]
        batches = [len(p.streaming_profile_packet.callstack_iid) for p in pkts
                   if p.HasField("streaming_profile_packet")]
        assert len(batches) == packets and sum(batches) == n
        interned = {s.str.decode() for p in pkts for s in p.interned_data.debug_annotation_string_values}
        flags = {p.sequence_flags for p in pkts if p.HasField("track_event")}
        assert flags == {trace_rules.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE}
        if enc is COMPACT:
            assert "out" in interned
            assert {p.trusted_packet_sequence_id for p in pkts if p.HasField("track_event")} == {2}
        else:
            assert "out" not in interned
