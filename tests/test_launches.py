"""Host launch → device work (issue #20): flows from each exec event on `Launches` to the device slices it started,
launch latency, copy bytes, a JIT graph entry's buffers, checked in the real trace processor and on every profile."""
from __future__ import annotations

import gzip
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from vizexport import load_profile
from vizexport.devices import HOST
from vizexport.records import Alloc, Exec, Key, Point, Profile, Release, Span, SpanTable
from vizexport.timeline import ARG_BYTES, ARG_GBS, ARG_LAUNCH_LATENCY, FLOW_LAUNCH, Role, Timeline
from vizexport.tinygrad.launches import LAUNCH_PREFIX, Placed, function_name, link_launches
from vizexport.tinygrad.timeline import build_timeline

from .conftest import FIXTURES, ROOT, run_cli, tpq, trace_params

CORPUS = ROOT / "tests" / "data" / "corpus"
SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"
COPY_BYTES = re.compile(r"^copy\s+([\d,]+)\s*B?,")  # "copy 256 B, NULL:1 <- NULL" (0.12: "copy 16, CPU <- PYTHON")
BATCH = re.compile(r"^<?batched \d+>?$")
# device slices with no exec recorded for them: copies back to the host (0.12/0.13 CPU, read by the host itself) and
# 0.12's NULL copies
NO_EXEC = {"tinygrad/0.12.0": Counter({"CPU -> TINY": 7}), "corpus/0.12.0-null-multi":
           Counter({"NULL -> NULL:1": 3, "NULL:1 -> NULL": 1})}
SETS = {"sample": SAMPLE, "tinygrad/0.14.0-null": FIXTURES / "tinygrad/0.14.0-null/profile.pkl",
        "tinygrad/0.12.0": FIXTURES / "tinygrad/0.12.0/profile.pkl",
        "corpus/master-null-multi": CORPUS / "master-null-multi/profile.pkl.gz",
        "corpus/0.13.0-null-multi": CORPUS / "0.13.0-null-multi/profile.pkl.gz",
        "corpus/0.12.0-null-multi": CORPUS / "0.12.0-null-multi/profile.pkl.gz",
        "corpus/0.12.0-cpu-sym": CORPUS / "0.12.0-cpu-sym/profile.pkl.gz"}
DEVICE_SLICES = """
with tn as (select t.id, coalesce(th.name, t.name) as name from track t left join thread_track tt on tt.id = t.id
            left join thread th using(utid)),
launch as (select f.slice_in as id, s1.ts as lts, substr(s1.name, 8) as lname from flow f
           join slice s1 on f.slice_out = s1.id join tn on s1.track_id = tn.id
           where tn.name = 'Launches' and s1.name like 'launch %')
select s.name, tn.name as track, s.dur, count(l.id) as n, min(s.ts - l.lts) as lat, max(l.lname) as lname,
  (select int_value from args a where a.arg_set_id = s.arg_set_id and a.key like '%.launch latency') as arg,
  (select int_value from args a where a.arg_set_id = s.arg_set_id and a.key in ('debug.bytes', 'args.bytes')) as bytes,
  (select real_value from args a where a.arg_set_id = s.arg_set_id and a.key in ('debug.GB/s', 'args.GB/s')) as gbs,
  (select count(*) from args a where a.arg_set_id = s.arg_set_id and a.key like '%.buffers[%].buf') as bufs
from slice s join tn on s.track_id = tn.id left join launch l on l.id = s.id
where tn.name not in ('TINY', 'USER', 'GC', 'Launches', 'Markers') and tn.name not like '% Buffers'
group by s.id"""


def _pickle(path: Path, tmp_path: Path) -> Path:
    if path.suffix != ".gz":
        return path
    out = tmp_path / path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


@pytest.mark.parametrize(("key", "fmt"), trace_params(SETS, ("sample", "corpus/master-null-multi")))
def test_launch_flows_in_the_trace_processor(tmp_path: Path, key: str, fmt: str):
    """Every device slice whose launch was recorded has exactly one incoming launch flow, from an exec of its own
    name (a kernel), a copy exec (a copy) or its batch's exec (a JIT graph batch and its entries); latency ≥ 0 and
    equal to the argument; copies carry the bytes the exec names and the bandwidth; graph entries their buffers."""
    out = tmp_path / f"t{fmt}"
    assert run_cli(_pickle(SETS[key], tmp_path), "-o", out).returncode == 0
    stats, rows = tpq(out, "select name, value from stats where value > 0 and severity in ('error', 'data_loss')",
                      DEVICE_SLICES)
    assert stats == [] and rows
    assert Counter(r["name"] for r in rows if r["n"] == 0) == NO_EXEC.get(key, Counter())
    linked = [r for r in rows if r["n"]]
    assert all(r["n"] == 1 and r["lat"] >= 0 and r["arg"] == r["lat"] for r in linked)
    copies = kernels = batched = 0
    for r in linked:
        if r["lname"].startswith("copy"):
            copies += 1
            assert r["bytes"] == int(COPY_BYTES.match(r["lname"]).group(1).replace(",", "")), r
            assert r["gbs"] == pytest.approx(round(r["bytes"] / r["dur"], 3)), r
        elif BATCH.match(r["lname"]):
            batched += 1
            # entries carry their batch's buffers (0.12/0.13 batch execs name none)
            assert r["bufs"] > 0 or r["name"].startswith("batched") or re.search(r"0\.1[23]", key), r
        else:
            kernels += 1
            assert function_name(r["lname"]) == r["name"], r
    assert kernels and (copies or "multi" not in key or key in NO_EXEC) and (batched or "0.12.0" in key)


def _every_profile() -> list[Path]:
    found = sorted(CORPUS.glob("*/profile.pkl.gz")) + sorted(FIXTURES.glob("tinygrad/*/profile.pkl"))
    return [SAMPLE, *found, *sorted(FIXTURES.glob("sqtt/*/profile_*_run_0.pkl"))]


@pytest.mark.parametrize("path", _every_profile(), ids=lambda p: "/".join(p.parts[-2:]))
def test_launch_links_on_every_profile(tmp_path: Path, path: Path):
    """On every profile: a launch flow per linked slice, one at most per slice, each from an instant of `Launches`
    at or before the slice; a kernel's exec has its name; no launch is linked where the profile has no exec."""
    prof = load_profile(_pickle(path, tmp_path))
    tl = build_timeline(prof)
    launches = [t for t in tl.tracks if t.name == "Launches"]
    n_exec = sum(pt.kind == "exec" for pt in prof.points)
    links = link_launches(prof)
    assert bool(launches) == bool(links.spans) and (n_exec or not links.spans)
    if not launches:
        return
    src = {f: (launches[0], i) for i, fs in launches[0].flows_out.items() for f in fs}
    incoming = 0
    for t in tl.tracks:
        if t.role.value in ("host", "launches"):
            continue
        for j, fs in t.flows_in.items():
            mine = [f for f in fs if tl.flow_kinds.get(f) == FLOW_LAUNCH]
            assert len(mine) <= 1 and all(f in src for f in mine)
            for f in mine:
                incoming += 1
                i = src[f][1]
                assert t.args[j][ARG_LAUNCH_LATENCY] == t.ts[j] - launches[0].ts[i] >= 0
                name = tl.strings[launches[0].names[i]].removeprefix(LAUNCH_PREFIX)
                if not name.startswith(("copy", "batched", "<batched")) and t.role.value == "queue":
                    assert function_name(name) == tl.strings[t.names[j]]
    assert incoming == len(links.spans) + len(links.graphs) == len(src)
    assert all(prof.spans[s].device not in HOST for s in links.spans)


def test_copy_bytes_on_a_two_device_run():
    """The issue's case: copies between NULL and NULL:1 (0.14.0) carry bytes and GB/s, JIT graph entries buffers
    (their batch's: a batch records one exec for all its entries)."""
    path = FIXTURES / "tinygrad/0.14.0-null/profile.pkl"
    if not path.exists():
        pytest.skip("fixture absent")
    tl = build_timeline(load_profile(path))
    copies = [t.args.get(i, {}) for t in tl.tracks if t.role.value in ("queue", "copy") for i in range(len(t))
              if "->" in tl.strings[t.names[i]]]
    alone = [a for a in copies if "buffers" not in a]  # the two copies outside JIT graphs; 6 are graph entries
    assert len(copies) == 8 and len(alone) == 2 and all(a[ARG_BYTES] == 64 and a[ARG_GBS] > 0 for a in alone)
    launched = [t.args[i] for t in tl.tracks if t.role.value in ("queue", "copy") for i in t.args
                if ARG_LAUNCH_LATENCY in t.args[i]]
    assert len(launched) == 21 and sum("buffers" in a for a in launched) == 19  # all but the two copies
    assert all(b["mode"] and "buf" in b for a in launched for b in a.get("buffers", ()))


def test_placed_spans_are_found_as_placed():
    """Placed.spans: each span row's track and event, the latest placing of a row winning, rows never placed (or out
    of range, or negative) not found."""
    tl = Timeline()
    a, b = (tl.add_track(n, None, "slice", Role.QUEUE) for n in ("A", "B"))
    placed = Placed()
    assert placed.spans(np.array([0, 5]))[0].tolist() == [False, False]  # nothing placed yet
    placed.add_spans(a, np.array([7, 3, 9]))
    placed.add_spans(b, np.array([4, 9]))  # 9 placed again: on b now
    found, tracks, events = placed.spans(np.array([9, 3, 0, 4, -1, 7, 100]))
    assert found.tolist() == [True, True, False, True, False, True, False]
    assert [(placed.tracks[t].name, j) for t, j in zip(tracks.tolist(), events.tolist(), strict=True)] == \
        [("B", 1), ("A", 1), ("B", 0), ("A", 0)]


def test_links_match_a_row_by_row_search():
    """Each kernel range links to the latest exec of its own function name on its own device at or before its start
    (the last recorded of those at one time), with many names, shared times, names on two devices and ranges before
    any exec: as a search exec by exec finds it."""
    rng = random.Random(7)
    names = [f"k{n}" for n in range(40)] + ["r_(j*32)"]  # launched as r_28j2A3229
    points = [Point(rng.choice(["NULL", "NULL:1"]), "exec", rng.randrange(0, 500, 5), n,
                    Exec(rng.choice(names), None, {}, [], (), ())) for n in range(300)]
    points.insert(100, Point("NULL", "alloc", 3, 0, Alloc(8, "float", 2)))  # not an exec: never linked
    spans = [Span(rng.choice(["NULL", "NULL:1"]), Key(function_name(rng.choice(names))), rng.randrange(0, 520, 5),
                  600) for _ in range(400)]
    p = Profile("many", Release("0.14.0", "override", "test"), len(spans) + len(points))
    p.spans, p.points = SpanTable.of(spans), points

    def expected(s: Span) -> int | None:
        mine = [(pt.ts, i) for i, pt in enumerate(points) if pt.kind == "exec" and pt.device == s.device
                and function_name(pt.arg.name) == s.key.name and pt.ts <= s.st]
        return max(mine)[1] if mine else None

    want = {i: e for i, s in enumerate(spans) if (e := expected(s)) is not None}
    assert link_launches(p).spans == want and 300 < len(want) < 400  # most link, some start before their first exec
