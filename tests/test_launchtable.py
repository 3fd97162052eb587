"""The launch table (issue #37): every device launch as typed columns filled by the reader — program key, name,
category, estimates, exec link, latency — that analyses read instead of slice args (args stay for display)."""
from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

import vizexport
from vizexport.analysis.launches import group_launches, kernel_runs
from vizexport.analysis.report import build_report
from vizexport.launchtable import CATEGORIES, COPY, GRAPH, NONE, LaunchTable, rate
from vizexport.limits import NAME_CAP, capped
from vizexport.perfetto import chrome
from vizexport.perfetto.kineto import KinetoLayout
from vizexport.programs import ProgramIndex
from vizexport.records import to_json
from vizexport.run import DIFF_STAGES, Run
from vizexport.timeline import ARG_GBS_LDS, ARG_GBS_MEM, ARG_GFLOPS, ARG_LAUNCH_LATENCY, ARG_PROGRAM, Role, Timeline
from vizexport.tinygrad.categories import category

from . import tinyfake as tf
from .conftest import FIXTURES, ROOT, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"
CORPUS = ROOT / "tests" / "data" / "corpus"
SETS = {"sample": SAMPLE, "0.14.0-null": FIXTURES / "tinygrad/0.14.0-null", "0.12.0": FIXTURES / "tinygrad/0.12.0",
        "0.13.0-null-multi": CORPUS / "0.13.0-null-multi", "master-null-train": CORPUS / "master-null-train"}
LAUNCH_ROLES = (Role.QUEUE, Role.COPY, Role.GRAPH)


def _load(folder: Path, tmp_path: Path) -> tuple[vizexport.Profile, vizexport.RewriteLog | None]:
    """A profile and its rewrites trace (the corpus keeps them gzipped)."""
    if not folder.exists():
        pytest.skip(f"{folder} not present")
    paths = []
    for name in ("profile.pkl", "rewrites.pkl"):
        p = folder / name
        if not p.exists() and (folder / f"{name}.gz").exists():
            p = tmp_path / name
            p.write_bytes(gzip.decompress((folder / f"{name}.gz").read_bytes()))
        paths.append(p if p.exists() else None)
    return vizexport.load_profile(paths[0]), vizexport.load_rewrites(paths[1]) if paths[1] else None


@pytest.mark.parametrize("key", list(SETS))
def test_each_row_is_its_slice_and_repeats_its_args(tmp_path: Path, key: str):
    """A row per event of every launch track, in the track's order, with the track's time and name; its program,
    rates and latency are what the slice's args show, its category what the release's naming says (with the UOps
    of the program's context), and its exec link names an exec event at or before its start."""
    prof, log = _load(SETS[key], tmp_path)
    tl = vizexport.build_timeline(prof, log)
    tab = tl.launches
    tracks = [t for t in tl.tracks if t.role in LAUNCH_ROLES]
    assert tab.tracks == [t.uuid for t in tracks] and len(tab) == sum(len(t) for t in tracks) > 0
    index = ProgramIndex(log.contexts) if log else None
    seen = {"program": 0, "rated": 0, "linked": 0}
    for t in tracks:
        rows = tab.rows(t.uuid)
        assert tab.ts[rows].tolist() == t.ts.tolist() and tab.dur[rows].tolist() == t.dur.tolist()
        assert tab.name[rows].tolist() == t.names.tolist()
        for i in range(len(t)):
            r, args, name = tab.row(t.uuid, i), t.args.get(i, {}), tl.strings[t.names[i]]
            key_ = tab.programs[tab.program[r]] if tab.program[r] != NONE else None
            assert (key_.hex() if key_ is not None else None) == args.get(ARG_PROGRAM)
            uops = index.uops(key_, name) if index else None
            assert CATEGORIES[tab.category[r]] == category(name, t.role, uops)
            for figure, arg in ((tab.flops[r], ARG_GFLOPS), (tab.mem[r], ARG_GBS_MEM), (tab.lds[r], ARG_GBS_LDS)):
                assert (arg in args) == (not math.isnan(figure))
                if arg in args:
                    assert rate(float(figure), t.dur[i]) == args[arg]
            assert (tab.latency[r] != NONE) == (ARG_LAUNCH_LATENCY in args)
            if tab.exec[r] != NONE:
                pt = prof.points[tab.exec[r]]
                assert pt.kind == "exec" and pt.ts + tab.latency[r] == t.ts[i] == args[ARG_LAUNCH_LATENCY] + pt.ts
            seen["program"] += key_ is not None
            seen["rated"] += ARG_GFLOPS in args
            seen["linked"] += tab.exec[r] != NONE
    if key == "sample":  # 0.14+ keys, estimates from the rewrites trace, exec events
        assert seen["program"] and seen["rated"] and seen["linked"]
    graph = CATEGORIES.index(GRAPH)
    assert {t.role for t in tracks if (tab.category[tab.rows(t.uuid)] == graph).any()} <= {Role.GRAPH}


def test_analyses_read_the_columns_not_the_args():
    """Slice args are for display: without any of them (program keys, rates, latency) the kernels, their
    categories, rates and the report's latencies are the same."""
    prof, log = vizexport.load_profile(SAMPLE / "profile.pkl"), vizexport.load_rewrites(SAMPLE / "rewrites.pkl")
    tl = vizexport.build_timeline(prof, log)
    def shown(runs: list) -> list:
        return [(r.kernel, r.category, r.ts.tolist(), r.dur.tolist(), r.gflops, r.gbs) for r in runs]
    runs = shown(kernel_runs(tl))
    report = build_report(tl, prof)
    assert any(r.gflops for r in kernel_runs(tl)) and any(r.category == "reduce" for r in kernel_runs(tl))
    for t in tl.tracks:
        if t.role in LAUNCH_ROLES:
            t.args = {}
    bare = build_report(tl, prof)
    assert shown(kernel_runs(tl)) == runs
    assert to_json(bare.latency) == to_json(report.latency) and report.latency
    assert to_json(bare.kernels) == to_json(report.kernels) and to_json(bare.batches) == to_json(report.batches)


def test_programs_are_keys_not_text():
    """A program is its key (bytes) in the table and in the grouping; hex is only how outputs show it."""
    tl = vizexport.build_timeline(vizexport.load_profile(SAMPLE / "profile.pkl"))
    tab = tl.launches
    assert tab.programs and all(type(k) is bytes for k in tab.programs)
    runs = [r for r in kernel_runs(tl) if r.kernel.key is not None]
    assert runs and all(r.kernel.program == r.kernel.key.hex() for r in runs)
    assert {r.kernel.key for r in runs} <= set(tab.programs)


def test_the_run_reads_the_launch_table_of_the_device_tracks_alone():
    """`Run.launch_table`: the device tracks' table (no full timeline built), the full build's but for the exec links
    and latencies (the launch links are a stage of their own)."""
    prof, log = vizexport.load_profile(SAMPLE / "profile.pkl"), vizexport.load_rewrites(SAMPLE / "rewrites.pkl")
    run = Run.of(prof, log)
    tab = run.launch_table
    assert "timeline" not in run.__dict__ and tab is run.launch_table
    full_tl = vizexport.build_timeline(prof, log)
    full = full_tl.launches
    for f in ("ts", "dur", "program", "category", "first"):  # (track uuids and name ids are the build's own)
        assert np.array_equal(getattr(tab, f), getattr(full, f)), f
    strings = run.stage(frozenset()).strings
    assert [strings[n] for n in tab.name.tolist()] == [full_tl.strings[n] for n in full.name.tolist()]
    assert np.array_equal(tab.flops, full.flops, equal_nan=True) and tab.programs == full.programs
    assert (tab.exec == NONE).all() and (full.exec != NONE).any()
    assert (run.stage(DIFF_STAGES).launches.exec != NONE).any()  # the diff's and the report's stages link them


def test_copies_for_kineto_are_the_category_column():
    """The kineto writer names a slice a memcpy by its launch's category: a copy engine's, and a copy on a device's
    own queue (0.12's CPU copies to and from the host)."""
    folder = FIXTURES / "tinygrad/0.12.0"
    if not folder.exists():
        pytest.skip(f"{folder} not present")
    tl = vizexport.build_timeline(vizexport.load_profile(folder / "profile.pkl"))
    kind = {t.uuid: t.role for t in tl.tracks}
    copies = {(kind[u], tl.strings[n]) for u, n in tl.launches.category_names(COPY)}
    assert {(Role.QUEUE, "CPU -> TINY"), (Role.QUEUE, "TINY -> CPU")} <= copies
    assert all(" -> " in n for _, n in copies)
    out = io.StringIO()
    chrome.write(tl, out, None, KinetoLayout(tl))
    doc = json.loads(out.getvalue())
    memcpy = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "gpu_memcpy"}
    assert {"Memcpy HtoH (CPU -> TINY)", "Memcpy HtoH (TINY -> CPU)"} <= memcpy  # CPU memory is the host's


def test_a_hand_built_timeline_has_an_empty_table():
    tl = Timeline("x")
    t = tl.add_track("NULL", None, "slice", Role.QUEUE)
    t.ts.append(0)
    t.dur.append(5)
    t.names.append(tl.intern("E_4"))
    assert isinstance(tl.launches, LaunchTable) and len(tl.launches) == 0 and tl.launches.rows(t.uuid) == slice(0, 0)
    assert kernel_runs(tl) == []


def test_crafted_launches_fill_the_table_as_shown(tmp_path: Path):
    """Attack inputs: a name whose copy marker lies past the name cap (the category is the shown name's), program
    keys that are no bytes (no program), an empty key (a program of its own), two programs of one name launched in
    the reverse order of their first launch elsewhere, and a range ending before it starts (an instant)."""
    long = "E_" + "x" * NAME_CAP + " -> NULL:1"
    events = [tf.span("NULL:1", "r_2", 0.5, 0.8, profile_key=b"\x02"), tf.span("NULL:1", "r_2", 0.9, 1.0,
                                                                                profile_key=b"\x01"),
              tf.span(name=long, st=1.0, en=2.0), tf.span(name="E_4", st=3.0, en=4.0, profile_key=7),
              tf.span(name="E_4", st=5.0, en=6.0, profile_key="ab"), tf.span(name="E_4", st=7.0, en=8.0,
                                                                            profile_key=b""),
              tf.span(name="r_2", st=9.0, en=10.0, profile_key=b"\x01"),
              tf.span(name="r_2", st=11.0, en=12.0, profile_key=b"\x02"), tf.span(name="E_9", st=14.0, en=13.0)]
    path = tmp_path / "profile.pkl"
    path.write_bytes(tf.profile(*events))
    tl = vizexport.build_timeline(vizexport.load_profile(path))
    tab = tl.launches
    null = next(t for t in tl.tracks if t.name == "NULL" and t.role == Role.QUEUE)
    rows = tab.rows(null.uuid)
    names = [tl.strings[n] for n in tab.name[rows].tolist()]
    assert names[0] == capped(long) and " -> " not in names[0]
    assert [CATEGORIES[c] for c in tab.category[rows].tolist()] == ["elementwise"] * 4 + ["reduce"] * 2 + \
        ["elementwise"]
    keys = [tab.programs[p] if p != NONE else None for p in tab.program[rows].tolist()]
    assert keys == [None, None, None, b"", b"\x01", b"\x02", None] and tab.dur[rows].tolist()[-1] == -1
    runs = [r for r in kernel_runs(tl) if r.kernel.device == "NULL"]
    assert sorted((r.kernel.name[:3], b"-" if r.kernel.key is None else r.kernel.key, r.count) for r in runs) == [
        ("E_4", b"", 1), ("E_4", b"-", 2), ("E_x", b"-", 1), ("r_2", b"\x01", 1), ("r_2", b"\x02", 1)]
    # within a track, a name's programs in the order that track first launches them (as the args dicts gave them)
    assert [r.kernel.key for r in group_launches(tl) if r.kernel.device == "NULL:1"] == [b"\x02", b"\x01"]
    rc = run_cli("top", path, "--json")
    assert rc.returncode == 0 and rc.stderr == ""
    top = json.loads(rc.stdout)
    assert [k["program"] for k in top["kernels"] if k["device"] == "NULL" and k["name"] == "r_2"] == ["01", "02"]
