"""Buffer lifetimes (issue #20): a `<device> Buffers` slice per allocation, whose open sizes add up to the
`<device> Memory` counter at every time, with the kernels that used each buffer; checked in the trace processor."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from vizexport import load_profile
from vizexport.records import Alloc, Exec, Key, Point, Profile, Release, Span, SpanTable
from vizexport.tinygrad.buffers import MAX_USERS, lifetimes, slices
from vizexport.tinygrad.timeline import build_timeline

from .conftest import FIXTURES, ROOT, run_cli, tpq, trace_params
from .test_launches import CORPUS, SAMPLE, _pickle

SETS = {"sample": SAMPLE, "tinygrad/0.14.0-null": FIXTURES / "tinygrad/0.14.0-null/profile.pkl",
        "tinygrad/0.12.0": FIXTURES / "tinygrad/0.12.0/profile.pkl",
        "corpus/master-null-train": CORPUS / "master-null-train/profile.pkl.gz",
        "corpus/0.13.0-cpu-multi": CORPUS / "0.13.0-cpu-multi/profile.pkl.gz"}
TN = """with tn as (select t.id, coalesce(th.name, t.name) as name from track t
            left join thread_track tt on tt.id = t.id left join thread th using(utid))"""
BUFFERS = TN + """, buf as (select s.ts, s.dur, replace(tn.name, ' Buffers', '') as dev,
  (select int_value from args a where a.arg_set_id = s.arg_set_id and a.key in ('debug.bytes', 'args.bytes')) as bytes
  from slice s join tn on s.track_id = tn.id where tn.name like '% Buffers'),
cnt as (select c.id, c.track_id, replace(t.name, ' Memory', '') as dev, c.ts, c.value from counter c
        join counter_track t on c.track_id = t.id where t.name like '% Memory'),
last as (select * from cnt where id in (select max(id) from cnt group by track_id, ts))
select last.dev, last.ts, last.value, (select coalesce(sum(bytes), 0) from buf where buf.dev = last.dev and
  buf.ts <= last.ts and buf.ts + buf.dur > last.ts) as live from last
where last.ts < (select max(ts + dur) from buf)"""
PER_DEVICE = TN + """ select replace(tn.name, ' Buffers', '') as dev, count(*) as n from slice s join tn
  on s.track_id = tn.id where tn.name like '% Buffers' group by 1"""
USERS = """select s.name, a.key, a.display_value from slice s join args a using(arg_set_id)
  where a.key like '%.users[%].name' limit 5"""


@pytest.mark.parametrize(("key", "fmt"), trace_params(SETS, ("sample", "corpus/master-null-train")))
def test_buffer_slices_add_up_to_the_counter(tmp_path: Path, key: str, fmt: str):
    pkl = _pickle(SETS[key], tmp_path)
    out = tmp_path / f"t{fmt}"
    assert run_cli(pkl, "-o", out).returncode == 0
    stats, rows, per_device, users = tpq(
        out, "select name, value from stats where value > 0 and severity in ('error', 'data_loss')", BUFFERS,
        PER_DEVICE, USERS)
    prof = load_profile(pkl)
    allocs = Counter(pt.device for pt in prof.points if pt.kind == "alloc" and isinstance(pt.arg, Alloc))
    assert stats == [] and {r["dev"]: r["n"] for r in per_device} == dict(allocs)
    assert len(rows) > 10 and all(r["value"] == r["live"] for r in rows), [r for r in rows if r["value"] != r["live"]]
    assert any(r["live"] > 0 for r in rows) and users  # kernels named as users


def test_lifetimes_follow_the_counter_rules():
    """Built records: a free ends its buffer, a never-freed one lasts to the profile's end, an alloc of a live key
    leaves the earlier one open (as the counter does), users are the device's execs naming the key before its free."""
    pts = [Point("NULL", "alloc", 10, 1, Alloc(64, "float", 16)), Point("NULL", "exec", 5, 100,
           Exec("E_4", None, {}, [1, 2], (1,), (0,))), Point("NULL", "alloc", 20, 2, Alloc(8, "int", 2)),
           Point("NULL", "alloc", 30, 2, Alloc(16, "int", 4)), Point("NULL", "free", 40, 1, None),
           Point("NULL", "free", 50, 2, None), Point("NULL:1", "exec", 45, 101, Exec("E_2", None, {}, [1], (), (0,)))]
    prof = Profile("t", Release("0.14.0", "override", "test"), len(pts), points=pts,
                   spans=SpanTable.of([Span("NULL", Key("E_4"), 15, 70)]))
    found = lifetimes(prof)["NULL"]
    got = [(a["buf"], st, en, a["bytes"], [u["mode"] for u in a["users"]], named)
           for st, en, named, a in zip(found.st.tolist(), found.en.tolist(), *slices(prof, found), strict=True)]
    assert got == [(1, 10, 40, 64, ["out"], (64, "float")), (2, 20, 70, 8, [], (8, "int")),
                   (2, 30, 50, 16, ["in"], (16, "int"))]
    assert found.n_users.tolist() == [1, 0, 1] and found.users.tolist() == [[1, 0], [1, 1]]  # (exec point, position)
    tl = build_timeline(prof)
    lanes = [t for t in tl.tracks if t.name == "NULL Buffers"]
    assert sum(len(t) for t in lanes) == 3 and len(lanes) == 2  # 20-70 and 30-50 nest; 10-40 overlaps both


def test_a_buffer_lists_its_first_users_and_counts_them_all():
    """A weight read by every step lists MAX_USERS users (the first, in time order) and says how many there were."""
    n = MAX_USERS + 5
    pts = [Point("NULL", "alloc", 1, 7, Alloc(64, "float", 16)), Point("NULL", "alloc", 2, 8, Alloc(8, "int", 2))]
    pts += [Point("NULL", "exec", 10 + k, 100 + k, Exec(f"E_{k % 3}", None, {}, [8, 7], (1,), (0,))) for k in range(n)]
    prof = Profile("t", Release("0.14.0", "override", "test"), len(pts), points=pts,
                   spans=SpanTable.of([Span("NULL", Key("E_0"), 15, 20)]))
    found = lifetimes(prof)["NULL"]
    assert found.n_users.tolist() == [n, n] and found.first_user.tolist() == [0, MAX_USERS, 2 * MAX_USERS]
    (first, second) = slices(prof, found)[1]
    assert [u["exec"] for u in first["users"]] == list(range(100, 100 + MAX_USERS)) and first["users (all)"] == n
    assert {u["mode"] for u in first["users"]} == {"in"} and {u["mode"] for u in second["users"]} == {"out"}
    assert first["buf"] == 7 and second["buf"] == 8 and first["users"][4]["name"] == "E_1"


def test_site_and_analyses_ignore_buffer_tracks():
    """Buffer slices are memory, not work: the top-kernels analysis of the sample is the same with them."""
    from vizexport.analysis import top_kernels
    tl = build_timeline(load_profile(ROOT / "vizexport" / "data" / "sample" / "profile.pkl"))
    names = {r.name for r in top_kernels(tl)}
    assert names and not any("B " in n for n in names)
