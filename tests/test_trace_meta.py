"""Python callstacks, trace metadata, no clock snapshots, the top track that orders the roots (issue #20), checked in
the real trace processor and against the official schema."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from vizexport.devices import device_root
from vizexport.perfetto import callstacks, proto

from .conftest import FIXTURES, run_cli, set_params, tpq
from .test_launches import CORPUS, SAMPLE, _pickle
from .trace_rules import pb

SETS = {"sample": SAMPLE, "tinygrad/0.14.0-null": FIXTURES / "tinygrad/0.14.0-null/profile.pkl",
        "tinygrad/0.12.0": FIXTURES / "tinygrad/0.12.0/profile.pkl",
        "corpus/master-null-meta": CORPUS / "master-null-meta/profile.pkl.gz",
        "sqtt/gfx1100": FIXTURES / "sqtt/gfx1100/profile_plus_run_0.pkl"}
TB_SLICES = """select s.ts, coalesce(th.name, t.name) as track, a.string_value as tb from slice s
  join track t on s.track_id = t.id left join thread_track tt on tt.id = t.id left join thread th using(utid)
  join args a on a.arg_set_id = s.arg_set_id and a.key in ('debug.tb', 'args.tb')"""
SAMPLES = """select c.ts, th.name as thread, c.callsite_id from cpu_profile_stack_sample c join thread th using(utid)"""
CALLSITES = """select c.id, c.parent_id, f.name from stack_profile_callsite c
  join stack_profile_frame f on f.id = c.frame_id"""
STATS = "select name, value from stats where value > 0 and severity in ('error', 'data_loss')"


def tb_labels(tb: str) -> tuple[str, ...]:
    """The frames a `tb` argument lists (innermost first, "file:line function" then the code), outermost first,
    named as the trace names them: "function (file name:line)"."""
    out = []
    for line in tb.splitlines():
        if line.startswith("    "):
            continue
        where, fn = line.split(" ", 1)
        path, lineno = where.rsplit(":", 1)
        out.append(f"{fn} ({path.rsplit('/', 1)[-1]}:{lineno})")
    return tuple(reversed(out))


@pytest.mark.parametrize("key", set_params(SETS))
def test_callstacks_and_metadata_in_the_trace_processor(tmp_path: Path, key: str):
    """Every slice with a `tb` has a callstack sample at its start (µs) on the thread named after its root, whose
    frames are the traceback's; no clock snapshots; trace name, uuid, release and device properties as metadata."""
    pkl = _pickle(SETS[key], tmp_path)
    out = tmp_path / "t.pftrace"
    assert run_cli(pkl, "-o", out).returncode == 0
    stats, slices, samples, sites, clocks, meta = tpq(
        out, STATS, TB_SLICES, SAMPLES, CALLSITES, "select count(*) as n from clock_snapshot",
        "select name, str_value from metadata")
    assert stats == [] and clocks == [{"n": 0}]
    by_id = {r["id"]: r for r in sites}

    def chain(i: int | None) -> tuple[str, ...]:
        out = []
        while i is not None:
            out.append(by_id[i]["name"])
            i = by_id[i]["parent_id"]
        return tuple(reversed(out))

    want = Counter((device_root(r["track"]), r["ts"] // 1000 * 1000, tb_labels(r["tb"])) for r in slices)
    got = Counter((r["thread"], r["ts"], chain(r["callsite_id"])) for r in samples)
    assert got == want and (len(slices) > 10 or key == "sqtt/gfx1100")
    md = {r["name"]: r["str_value"] for r in meta}
    release = md["cr-tinygrad release"].split(" ", 1)[0]
    assert md["unique_session_name"] == md["cr-trace name"] == f"tinygrad {release} {pkl.name}"
    assert len(md["trace_uuid"]) == 36 and release in {"0.12.0", "0.13.0", "0.14.0", "master"}
    if key.startswith("sqtt"):
        assert json.loads(md["cr-device AMD"])["gfx_target_version"] == 110000


@pytest.mark.parametrize("key", ["sample", "corpus/master-null-meta"])
def test_chrome_json_stack_frames(tmp_path: Path, key: str):
    """Chrome JSON: every event with a `tb` names its stack (`sf`) in the `stackFrames` tree, whose chain from that
    node to the root is the traceback; the trace processor loads it without errors; metadata at the top level."""
    out = tmp_path / "t.json.gz"
    assert run_cli(_pickle(SETS[key], tmp_path), "-o", out).returncode == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    frames = doc["stackFrames"]

    def chain(node: str) -> tuple[str, ...]:
        out = []
        while node is not None:
            out.append(frames[node]["name"])
            node = frames[node].get("parent")
        return tuple(reversed(out))

    with_tb = [e for e in doc["traceEvents"] if "tb" in e.get("args", {})]
    assert len(with_tb) > 10 and all(chain(str(e["sf"])) == tb_labels(e["args"]["tb"]) for e in with_tb)
    assert sum("sf" in e for e in doc["traceEvents"]) == len(with_tb)
    assert doc["metadata"]["trace name"].startswith("tinygrad ")
    assert tpq(out, STATS) == [[]]


def test_new_field_numbers_are_perfetto_s():
    """The named field numbers of the metadata and callstack packets are those of the official schema."""
    messages = {proto.TraceUuid: pb.TraceUuid, proto.TraceConfig: pb.TraceConfig,
                proto.ChromeEventBundle: pb.ChromeEventBundle, proto.ChromeMetadata: pb.ChromeMetadata,
                callstacks.TracePacketFields: pb.TracePacket, callstacks.ProcessTree: pb.ProcessTree,
                callstacks.ProcessTreeProcess: pb.ProcessTree.Process, callstacks.ProcessTreeThread:
                pb.ProcessTree.Thread, callstacks.ThreadDescriptorFields: pb.ThreadDescriptor,
                callstacks.StreamingProfilePacket: pb.StreamingProfilePacket, callstacks.InternedStacks:
                pb.InternedData, callstacks.FrameFields: pb.Frame, callstacks.CallstackFields: pb.Callstack,
                callstacks.MappingFields: pb.Mapping, callstacks.InternedString: pb.InternedString}
    checked = 0
    for ours, theirs in messages.items():
        for name, value in vars(ours).items():
            if name.isupper():
                assert value == theirs.DESCRIPTOR.fields_by_name[name.lower()].number, f"{ours.__name__}.{name}"
                checked += 1
    for name in ("CHROME_EVENTS", "TRACE_CONFIG", "TRACE_UUID"):
        assert getattr(proto.TracePacket, name) == pb.TracePacket.DESCRIPTOR.fields_by_name[name.lower()].number
    assert checked >= 30
