"""Profile → .pftrace / Chrome JSON: protocol rules (official schema) and figures computed independently."""
from __future__ import annotations

import gzip
import io
import json
import random
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from vizexport import load_profile
from vizexport.forks import SERIAL, ForkExecutor
from vizexport.perfetto import proto, wire, write_trace
from vizexport.records import GraphBatch, Key, Profile, Release, Span, SpanTable
from vizexport.timeline import Role, Timeline
from vizexport.tinygrad.timeline import _lanes, _nested, build_timeline

from . import trace_rules
from .conftest import EXPECTED, FIXTURES, ROOT, run_cli, tpq
from .trace_rules import pb

SAMPLE = ROOT / "vizexport" / "data" / "sample"
PROFILES = ["sample/profile.pkl", *sorted(k for k in EXPECTED if k.startswith("tinygrad/") and "profile" in k),
            "sqtt/gfx1100/profile_gemm_run_0.pkl", "sqtt/gfx950/profile_gemm_run_0.pkl"]


def path_of(key: str) -> Path:
    return SAMPLE / key.split("/", 1)[1] if key.startswith("sample/") else FIXTURES / key


def params(keys: list[str]) -> list:
    return [pytest.param(k, id=k, marks=[] if path_of(k).exists() else [pytest.mark.skip(reason="fixture absent")])
            for k in keys]


def expected_tracks(exp: dict) -> tuple[Counter, Counter, dict, int]:
    """From the pickle's own figures: events per device track, batches per Graph track, memory peaks, markers."""
    events, graphs = Counter(), Counter()
    for dev, kinds in exp["events"].items():
        n = kinds.get("range", 0) + kinds.get("graph_entry", 0)
        if n:
            events[dev] += n
        if kinds.get("graph"):
            parts = dev.split(":")
            root = ":".join(parts[:2]) if len(parts) > 1 and parts[1].isdigit() else parts[0]
            graphs[f"{root} Graph"] += kinds["graph"]
    markers = sum(k.get("marker", 0) for k in exp["events"].values())
    return events, graphs, exp["memory_peak"], markers


def per_name(d: trace_rules.Decoded) -> tuple[Counter, Counter, Counter, dict]:
    slices, positive, instants, peaks = Counter(), Counter(), Counter(), {}
    for uuid, desc in d.descriptors.items():
        slices[desc.name] += len(d.slices.get(uuid, ()))
        positive[desc.name] += sum(en > st for st, en, _, _ in d.slices.get(uuid, ()))
        instants[desc.name] += len(d.instants.get(uuid, ()))
        if uuid in d.counters and desc.name.endswith(" Memory"):
            peaks[desc.name.removesuffix(" Memory")] = max(v for _, v in d.counters[uuid])
    return slices, positive, instants, peaks


@pytest.mark.parametrize("key", params(PROFILES))
@pytest.mark.parametrize("compress", [True, False])
def test_pftrace_rules_and_figures(tmp_path: Path, key: str, compress: bool):
    out = tmp_path / "t.pftrace"
    r = run_cli(path_of(key), "-o", out, *([] if compress else ["--no-compress"]))
    assert r.returncode == 0, r.stderr
    d = trace_rules.check(out.read_bytes())
    assert (d.compressed_chunks > 0) == compress
    slices, positive, instants, peaks = per_name(d)
    events, graphs, mem, markers = expected_tracks(EXPECTED[key])
    for dev, n in events.items():
        assert slices[dev] + instants[dev] == n, dev  # every range kept: zero-length ones as instants
    for name, n in graphs.items():
        assert slices[name] == n, name
    assert peaks == mem
    assert instants["Markers"] == markers
    viewer = EXPECTED[key].get("viewer")
    if viewer and viewer.get("format") == "bytepack":  # what tinygrad's own viewer draws (it skips zero-length)
        for name, n in viewer["tracks"].items():
            if not name.endswith(" Memory"):
                assert positive[name] == n, name
    (top,) = [u for u, x in d.descriptors.items() if not x.parent_uuid]  # the trace's top track orders the roots
    assert d.descriptors[top].child_ordering == pb.TrackDescriptor.EXPLICIT
    roots = [x.name for x in sorted((x for x in d.descriptors.values() if x.parent_uuid == top),
                                    key=lambda x: x.sibling_order_rank)]
    host = [x for x in ("TINY", "USER", "GC") if x in roots]
    assert roots[: len(host)] == host and (roots[-1] == "Markers") == (markers > 0)


def decoded_events(d: trace_rules.Decoded) -> tuple:
    return d.slices, d.instants, d.counters, d.flows_out, d.flows_in


@pytest.mark.parametrize("key", params(["sample/profile.pkl", "tinygrad/0.14.0-null/profile.pkl"]))
def test_delta_time_decodes_to_the_same_events(tmp_path: Path, key: str):
    """--delta-time: timestamps count from the packet before on each segment's incremental clock, which a
    ClockSnapshot starts at the trace's first time; decoded, the trace holds the same tracks, slices (args
    included), instants, counters and flows as the one with absolute timestamps, in fewer bytes."""
    data = {}
    for delta in (False, True):
        out = tmp_path / f"{delta}.pftrace"
        r = run_cli(path_of(key), "-o", out, *(["--delta-time"] if delta else []))
        assert r.returncode == 0, r.stderr
        data[delta] = out.read_bytes()
    plain, delta = trace_rules.check(data[False]), trace_rules.check(data[True], delta_time=True)
    assert delta.descriptors == plain.descriptors and decoded_events(delta) == decoded_events(plain)
    first = min(min(t for e in events for t in e[:1]) for per in (plain.slices, plain.instants, plain.counters)
                for events in per.values() if events)
    pkts = trace_rules.packets(data[True])[0]
    segments = [p for p in pkts if p.trace_packet_defaults.HasField("track_event_defaults")]  # (not the samples')
    snapshots = [p.clock_snapshot for p in pkts if p.HasField("clock_snapshot")]
    assert len(snapshots) == len(segments) > 10
    assert {c.timestamp for s in snapshots for c in s.clocks} == {first}
    assert len(data[True]) < len(data[False])


def test_delta_time_restarts_the_clock_at_each_segment(monkeypatch: pytest.MonkeyPatch):
    """Big tracks are cut into segments encoded apart (in parallel): each starts its own clock, and the trace decodes
    to the same events as one with absolute timestamps, written by one process or by forked workers."""
    tl = build_timeline(load_profile(SAMPLE / "profile.pkl"))
    monkeypatch.setattr(proto, "PARALLEL_MIN", 0)
    monkeypatch.setattr(proto, "SEGMENT", 50)
    outs = []
    for encoding, forked in ((wire.COMPACT, False), (wire.DELTA, False), (wire.DELTA, True)):
        b = io.BytesIO()
        with ForkExecutor() if forked else nullcontext(SERIAL) as ex:
            proto.write(tl, b, encoding=encoding, executor=ex)
        outs.append(b.getvalue())
    assert outs[1] == outs[2]
    plain, delta = trace_rules.check(outs[0]), trace_rules.check(outs[1], delta_time=True)
    assert decoded_events(delta) == decoded_events(plain)
    pkts = trace_rules.packets(outs[1])[0]
    segments = sum(1 for t in tl.walk() for _ in proto.segments(t, 50))
    assert sum(p.HasField("clock_snapshot") for p in pkts) == segments > len(tl.walk())


def test_delta_time_is_for_a_pftrace(tmp_path: Path):
    """--delta-time with a Chrome JSON or a folder output: one line, exit 1, nothing written; the API refuses too."""
    for out, message in (("t.json", "t.json: --delta-time is for a .pftrace or .pftrace.gz trace"),
                         ("site/", "site: --delta-time is for a .pftrace or .pftrace.gz trace, not a folder")):
        r = run_cli(SAMPLE / "profile.pkl", "-o", tmp_path / out, "--delta-time")
        assert r.returncode == 1 and message in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    tl = build_timeline(load_profile(SAMPLE / "profile.pkl"))
    with pytest.raises(ValueError, match=r"t\.json\.gz: Chrome trace JSON has no delta timestamps"):
        write_trace(tl, tmp_path / "t.json.gz", delta_time=True)
    assert list(tmp_path.iterdir()) == []


def test_sample_kernel_args_and_names(tmp_path: Path):
    out = tmp_path / "t.pftrace"
    assert run_cli(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", out).returncode == 0
    d = trace_rules.check(out.read_bytes())
    kern = [s for u in d.by_name("NULL") for s in d.slices[u] if s[2] == "r_n"]
    assert [k[3]["var_vals"] for k in kern] == [{"n": 8}, {"n": 24}]
    for _, _, _, a in kern:  # symbolic estimates evaluated per launch: FLOPS scale with n
        assert a["GFLOPS"] > 0 and a["buffers"][0]["mode"] == "out" and a["buffers"][1]["bytes"] == 256
    assert kern[1][3]["GFLOPS"] > kern[0][3]["GFLOPS"]
    assert all("\x1b" not in s[2] for sl in d.slices.values() for s in sl)
    user = [s for u in d.by_name("USER") for s in d.slices[u]]
    assert all("tb" in s[3] and ".py:" in s[3]["tb"] for s in user)
    marks = [n for u in d.by_name("Markers") for _, n in d.instants[u]]
    assert marks[:2] == ["jit step 0", "jit step 1"]


def synthetic() -> Profile:
    """Overlapping work, a zero-length range and graph dependencies, as records (no pickle needed)."""
    spans = [Span("AMD", Key("a"), 1000, 5000), Span("AMD", Key("b"), 3000, 8000), Span("AMD", Key("c"), 4000, None),
             Span("AMD", Key("e0"), 10000, 11000, graph=0), Span("AMD:1", Key("e1"), 11500, 12000, graph=0),
             Span("AMD", Key("e2"), 12500, 13000, graph=0)]
    p = Profile("synthetic", Release("0.14.0", "override", "test"), len(spans))
    p.spans = SpanTable.of(spans)
    p.graphs = [GraphBatch("AMD", [3, 4, 5], [[], [0], [0, 1]], [10000, 11000, 11500, 12000, 12500, 13000])]
    return p


def test_lanes_instants_flows(tmp_path: Path):
    tl = build_timeline(synthetic())
    out = tmp_path / "s.pftrace"
    write_trace(tl, out)
    d = trace_rules.check(out.read_bytes())
    lanes = d.by_name("AMD")
    assert len(lanes) == 3  # the root group and two lanes: a and b overlap partially
    got = sorted((s[2], s[0], s[1]) for u in lanes for s in d.slices[u])
    assert got == [("a", 1000, 5000), ("b", 3000, 8000), ("e0", 10000, 11000), ("e2", 12500, 13000)]
    assert [(n, t) for u in lanes for t, n in d.instants[u]] == [("c", 4000)]
    assert sum(d.flows_out.values()) == 3  # deps: e1 ← e0, e2 ← e0, e2 ← e1
    assert [s[2] for u in d.by_name("AMD Graph") for s in d.slices[u]] == ["batched 3"]


def test_slices_sharing_timestamps_come_back_exactly():
    """The writer orders BEGIN/END by time alone: slices that end where others begin or end, zero-length slices
    and instants at those times must decode to the same slices (an END closes the innermost open slice)."""
    tl = Timeline()
    t = tl.add_track("X", None, "slice", Role.QUEUE)
    events = [("outer", 0, 10), ("first", 0, 4), ("second", 4, 10), ("zero", 4, 4), ("mark", 10, None),
              ("after", 10, 15), ("zero2", 15, 15), ("last", 15, 16)]
    for name, st, en in events:
        t.ts.append(st)
        t.dur.append(-1 if en is None else en - st)
        t.names.append(tl.intern(name))
    b = io.BytesIO()
    proto.write(tl, b, compress=False)
    d = trace_rules.check(b.getvalue())
    assert sorted((n, st, en) for st, en, n, _ in d.slices[t.uuid]) == \
        sorted((n, st, en) for n, st, en in events if en is not None)
    assert d.instants[t.uuid] == [(10, "mark")]


def test_one_lane_exactly_when_slices_nest():
    """The vectorized nesting check must agree with the lane assignment it stands in for, ties and zero-length
    slices included (sorted by (start, -end), as the timeline sorts them)."""
    def check(pairs: list[tuple[int, int]]) -> bool:
        pairs = sorted(pairs, key=lambda p: (p[0], -p[1]))
        st, en = np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64)
        nested = _nested(st, en)
        assert nested == (max(_lanes(st.tolist(), en.tolist()), default=0) == 0), pairs
        return nested

    assert check([(0, 10), (0, 4), (4, 10), (4, 4), (10, 15), (10, 10), (0, 10)])
    assert not check([(0, 5), (3, 8)]) and not check([(0, 10), (2, 6), (5, 8)])
    rnd = random.Random(7)
    outcomes = Counter(check([(a, max(a, a + rnd.randint(-2, 8))) for a in (rnd.randint(0, 12) for _ in range(n))])
                       for n in [1, 2, 3, 5, 8] * 300)
    assert outcomes[True] > 100 and outcomes[False] > 100


def test_json_output(tmp_path: Path):
    out = tmp_path / "t.json.gz"
    assert run_cli(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", out).returncode == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    evs = doc["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in evs if e["ph"] == "M" and "name" in e["args"]}
    x = Counter(names[(e["pid"], e["tid"])] for e in evs if e["ph"] in ("X", "i"))
    events, graphs, mem, markers = expected_tracks(EXPECTED["sample/profile.pkl"])
    assert {k: x[k] for k in events} == dict(events) and x["NULL Graph"] == graphs["NULL Graph"]
    assert x["Markers"] == markers
    peaks = Counter()
    for e in evs:
        if e["ph"] == "C":
            peaks[e["name"]] = max(peaks[e["name"]], e["args"]["Memory"])
    assert dict(peaks) == mem
    r_n = [e for e in evs if e.get("name") == "r_n"]
    assert [e["args"]["var_vals"]["n"] for e in r_n] == [8, 24] and all(e["dur"] > 0 for e in r_n)


def test_failed_conversion_leaves_nothing(tmp_path: Path):
    bad = tmp_path / "cut.pkl"
    bad.write_bytes((SAMPLE / "profile.pkl").read_bytes()[:5000])
    out = tmp_path / "t.pftrace"
    r = run_cli(bad, "-o", out)
    assert r.returncode == 1 and "truncated" in r.stderr
    assert list(tmp_path.iterdir()) == [bad]


@pytest.mark.parametrize("key", params(["sample/profile.pkl", "tinygrad/0.14.0-null/profile.pkl",
                                        "tinygrad/0.11.0/profile.pkl", "tinygrad/HEAD/profile.pkl"]))
@pytest.mark.parametrize("fmt", [".pftrace", ".json.gz"])
def test_trace_processor(tmp_path: Path, key: str, fmt: str):
    """The real Perfetto trace processor: no error stats; per-track counts, memory peaks and markers as computed."""
    out = tmp_path / f"t{fmt}"
    assert run_cli(path_of(key), "-o", out).returncode == 0
    track = "coalesce(t.name, th.name)" if fmt == ".json.gz" else "t.name"
    stats, tracks, counters = tpq(
        out,
        "select name, value from stats where value > 0 and severity in ('error', 'data_loss')",
        f"select {track} as track, count(*) as n from slice s join track t on s.track_id = t.id "
        "left join thread_track tt on tt.id = t.id left join thread th using(utid) group by 1",
        "select t.name as track, max(c.value) as peak from counter c join counter_track t on c.track_id = t.id "
        "where t.name like '% Memory' group by 1")
    assert stats == []
    got = {r["track"]: r["n"] for r in tracks}
    events, graphs, mem, markers = expected_tracks(EXPECTED[key])
    assert {k: got.get(k) for k in events} == dict(events)
    assert {k: got.get(k) for k in graphs} == dict(graphs)
    assert got.get("Markers", 0) == markers
    assert {r["track"].removesuffix(" Memory"): r["peak"] for r in counters} == mem


@pytest.mark.parametrize("suffix", [".pftrace", ".json"])
def test_progress_reports_every_event(tmp_path: Path, suffix: str):
    """write_trace tells its progress callback the events written so far, ending at the timeline's event count."""
    tl = build_timeline(load_profile(ROOT / "vizexport" / "data" / "sample" / "profile.pkl"))
    calls: list[tuple[int, int]] = []
    write_trace(tl, tmp_path / f"t{suffix}", progress=lambda done, total: calls.append((done, total)))
    dones = [d for d, _ in calls]
    assert dones == sorted(dones) and calls[-1] == (tl.n_events(), tl.n_events()) and len(calls) > 1


def test_parallel_encoding_gives_the_same_bytes(monkeypatch: pytest.MonkeyPatch):
    """Forked encoder workers (used for big timelines) write exactly what one process writes, progress included,
    the callstack samples (made first, beside the segments) last."""
    tl = build_timeline(load_profile(ROOT / "vizexport" / "data" / "sample" / "profile.pkl"))
    monkeypatch.setattr(proto, "PARALLEL_MIN", 0)
    monkeypatch.setattr(proto, "SEGMENT", 50)  # several segments per big track
    outs, calls = [], []
    for forked in (False, True):
        b = io.BytesIO()
        with ForkExecutor() if forked else nullcontext(SERIAL) as ex:
            written = proto.write(tl, b, progress=lambda d, t: calls.append((d, t)), executor=ex)
        assert written == len(b.getvalue())
        outs.append(b.getvalue())
    assert outs[0] == outs[1] and calls[-1] == (tl.n_events(), tl.n_events())
    pkts = trace_rules.packets(outs[0])[0]
    last_event = max(i for i, p in enumerate(pkts) if p.HasField("track_event"))
    samples = {i: len(p.streaming_profile_packet.callstack_iid) for i, p in enumerate(pkts)
               if p.HasField("streaming_profile_packet")}
    assert sum(samples.values()) == sum(len(t.stacks) for t in tl.tracks) > 10 and min(samples) > last_event


def test_host_spans_prepared_in_a_forked_process_give_the_same_timeline(monkeypatch: pytest.MonkeyPatch):
    """Big profiles' host spans are sorted and named in a forked process while the builder does the rest: the
    timeline is the same, ids included (they are interned as tracks are placed)."""
    from vizexport.tinygrad import timeline as builder
    prof = load_profile(SAMPLE / "profile.pkl")
    here = build_timeline(prof)
    monkeypatch.setattr(builder, "FORK_SPANS", 0)
    with ForkExecutor() as ex:
        forked = build_timeline(prof, executor=ex)

    def content(tl: Timeline) -> list:
        return [tl.strings, tl.stacks, [(t.uuid, t.name, t.parent, t.ts, t.dur, t.names, t.args, t.stacks, t.flows_out,
                                         t.flows_in) for t in tl.tracks]]
    assert content(forked) == content(here) and sum(len(t.stacks) for t in here.tracks) > 10
    assert sum(len(t) for t in here.tracks if t.role is Role.HOST) > 100


def test_hand_written_field_numbers_are_perfetto_s():
    """The encoder's named field numbers and enum values are those of the official schema (perfetto_trace_pb2)."""
    messages = {wire.Trace: pb.Trace, wire.TracePacket: pb.TracePacket, wire.TracePacketDefaults:
                pb.TracePacketDefaults, wire.TrackEventDefaults: pb.TrackEventDefaults, wire.ClockSnapshot:
                pb.ClockSnapshot, wire.Clock: pb.ClockSnapshot.Clock, wire.TrackDescriptor: pb.TrackDescriptor,
                wire.CounterDescriptor: pb.CounterDescriptor, wire.TrackEvent: pb.TrackEvent, wire.InternedData:
                pb.InternedData, wire.EventName: pb.EventName, wire.DebugAnnotation: pb.DebugAnnotation}
    checked = 0
    for ours, theirs in messages.items():
        for name, value in vars(ours).items():
            if name.isupper():
                fields = theirs.DESCRIPTOR.fields_by_name
                official = fields[name.lower()].number if name.lower() in fields else getattr(theirs, name)
                assert value == official, f"{ours.__name__}.{name}"
                checked += 1
    for same in (pb.DebugAnnotationName, pb.InternedString):  # interned with EventName's layout
        assert [f.number for f in same.DESCRIPTOR.fields] == [wire.EventName.IID, wire.EventName.NAME]
    assert wire.CLOCK_BOOTTIME == pb.BUILTIN_CLOCK_BOOTTIME and checked >= 40


def test_annotations_decode_to_their_values_and_types():
    """Annotation encodings are cached per sequence by field, name, type and value: values equal across types
    (True == 1 == 1.0), dict keys equal across types, repeated and new values, nested dicts and arrays must each
    decode to exactly what the event held."""
    tl = Timeline()
    t = tl.add_track("X", None, "slice", Role.QUEUE)
    shared = {"exec": 7, "buffers": [{"buf": 1, "mode": "out"}, {"buf": 2, "mode": "in"}]}
    args = [{"v": 1, "d": {"x": 1, "y": "in"}}, {"v": True, "d": {"x": True, "y": "in"}},
            {"v": 1.0, "d": {"x": 1.0, "y": "in"}}, {"v": 0, "d": {"x": False}}, {"v": "1", "l": [1, True, 1.0, "1"]},
            {"d": {1: "a", 2: [3, (4, 5)]}}, {"d": {True: "a", None: {"n": {"m": 2.5}}}}, {"d": {1: "a"}},
            {"d": {True: "a"}}, {"d": {1.0: "a"}},
            shared, shared, dict(shared), {"buffers": [{"buf": 1, "mode": "out"}, {"buf": 3, "mode": "out"}]},
            {"tb": "x" * 40, "short": "ab"}, {"tb": "x" * 40, "short": "ab", "n": -3, "big": 1 << 62}]
    for i, a in enumerate(args):
        t.ts.append(10 * i)
        t.dur.append(5)
        t.names.append(tl.intern("k" if i % 2 else "launch"))
        t.args[i] = a
    b = io.BytesIO()
    proto.write(tl, b, compress=False)
    got = [a for _, _, _, a in sorted(trace_rules.check(b.getvalue()).slices[t.uuid])]

    def plain(v):  # what the trace holds: string keys, tuples as arrays
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, (list, tuple)) else v
    # json tells True, 1 and 1.0 apart
    assert [json.dumps(a) for a in got] == [json.dumps(plain(a)) for a in args]
