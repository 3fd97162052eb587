"""Reader details on the bundled sample (a tinygrad 0.14.0 NULL-device run, see tools/make_sample.py)."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

import vizexport
from vizexport import pickles
from vizexport.records import Alloc, Exec, Marker
from vizexport.tinygrad import common
from vizexport.tinygrad import profile as profile_reader
from vizexport.tinygrad.common import ns, ns_column, strip_ansi
from vizexport.tinygrad.profile import load_profile
from vizexport.tinygrad.releases import RELEASES, enum_table

from . import tinyfake as tf
from .conftest import FIXTURES, ROOT, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"


def test_ns_exact():
    assert ns("1244419994.622") == 1244419994622
    assert ns("1244419994.62") == 1244419994620
    assert ns("7") == 7000 and ns("-0.25") == -250 and ns("1E+3") == 1_000_000
    assert ns("12.3455") == 12346 and ns("12.3465") == 12346  # half-even below 1 ns


@pytest.mark.parametrize("long", [False, True])
def test_timestamp_columns(long, monkeypatch):
    """A column of timestamps is read at once (a long one in bulk when all are exactly-ns texts; a short one, such as
    a graph batch's signals, text by text): texts of every width, None, or one text in another form must give what
    `ns` gives for each."""
    bulk, parse = [], common._exact_ns
    monkeypatch.setattr(common, "_exact_ns", lambda texts: bulk.append(out := parse(texts)) or out)
    pad = ["2.000"] * (common.BULK_MIN if long else 0)
    exact = [*pad, "1.500", "1244419994.622", "0.001", "12345.678", "123456789012345.678"]
    assert ns_column(exact) == [2000] * len(pad) + [1500, 1244419994622, 1, 12345678, 123456789012345678]
    assert [out is not None for out in bulk] == ([True] if long else [])  # only a long one pays numpy's cost per call
    assert ns_column([*exact, None]) == [*ns_column(exact), None]
    assert ns_column([*pad, None, "7.250", None]) == [*ns_column(pad), None, 7250, None]
    others = ["12.3455", "1E+3", "-0.250", "1234567890123456.789", "12.5", "١.500", 7.25, "1_0.000", " 1.000"]
    for other in others:
        assert ns_column([*exact, other]) == [*ns_column(exact), ns(other)]
    assert ns("1_0.000") == 10000 and ns(" 1.000") == 1000  # what int() reads, the bulk parse leaves to `ns`
    with pytest.raises(ValueError, match="not a timestamp"):  # the reader names the field it came from
        ns_column([*pad, "1.500", "1x2.500"])
    with pytest.raises(ValueError, match="None, not a timestamp"):
        ns_column([*pad, "1.500", "1x2.500", None], none=False)


class Text(str):
    pass


@pytest.mark.skipif(common._fast is None, reason="the compiled parse is not built (no compiler at install)")
def test_the_compiled_bulk_parse_is_numpys():
    """_times.c parses what numpy's bulk parse (its reference) parses, to the same ns, and refuses what it refuses:
    every width, a misplaced or missing point, a non-digit (the bytes just outside '0'-'9', a non-ASCII digit),
    a non-text, a text subclass; on seeded random columns."""
    rng = random.Random(36)
    odd = ["", "1", "1.5", ".000", "0.000", "9" * 15 + ".999", "1" * 16 + ".000", "1.50/", "1.50:", "١.500", "1.5000",
           "12.34.", "-1.000", " 1.000", None, 7, b"1.000", Text("1.250"), "\x00.000"]
    for _ in range(3000):
        n = rng.randrange(0, 6)
        texts = [f"{rng.randrange(10**rng.randrange(1, 16))}.{rng.randrange(1000):03d}" for _ in range(n)]
        if rng.random() < 0.5:
            texts.insert(rng.randrange(n + 1), rng.choice(odd))
        fast, ref = common._exact_ns(texts), common._exact_ns_numpy(texts)
        assert (fast is None and ref is None) or fast.tolist() == ref.tolist(), texts
    with pytest.raises(ValueError, match="int64 per text"):
        common._fast.exact_ns(["1.000"], np.zeros(2, np.int64))


def _same_fields(a: object, b: object) -> bool:
    """Two _range_fields results hold the same objects (the events' own: compared by identity), or both None."""
    if a is None or b is None:
        return a is b
    return all(x is y if x is None or y is None else
               len(x) == len(y) and all(u is v or (type(u) is int and u == v) for u, v in zip(x, y, strict=False))
               for x, y in zip(a, b, strict=True))


def _both_fields(events: list, codes: dict, ids: dict) -> tuple:
    """What C, the reader's call (C, the reference where C raises) and the reference give, or their exceptions."""
    out = []
    for fn in (profile_reader._fast_ranges.fields, profile_reader._range_fields, profile_reader._range_fields_python):
        try:
            out.append(tuple(fn(events, codes, ids)))
        except Exception as e:
            out.append(e)
    return tuple(out)


@pytest.mark.skipif(profile_reader._fast_ranges is None, reason="the compiled gather is not built (no compiler)")
def test_the_compiled_range_gather_is_the_references():
    """_ranges.c gives the fields the Python reference gives, the same objects, and the same codes looked up (str names
    by value, others by id), on every fixture profile's ranges and on seeded events with fields missing, extra or odd
    (the reader's call then raises the reference's KeyError, naming the field it reads first)."""
    fixtures = sorted((FIXTURES / "tinygrad").glob("*/profile*.pkl"))
    for path in fixtures:
        obj, _ = pickles.load(path)
        events = [e for e in obj if type(e).__name__ == "ProfileRangeEvent"]
        names = [e.__dict__.get("name") for e in events]
        codes = {n: i for i, n in enumerate(names[::2]) if type(n) is str}
        ids = {id(n): i for i, n in enumerate(names[::3]) if type(n) is not str}
        fast, _, ref = _both_fields(events, codes, ids)
        assert _same_fields(fast, ref), path
        assert len(fast[0]) == len(events), path
    assert fixtures or not FIXTURES.is_dir()
    Range, Key = pickles.stub_class("tinygrad.device", "ProfileRangeEvent"), pickles.stub_class("x", "TracingKey")
    rng = random.Random(36)
    shared = [Key(), "E_4", "r_16"]
    values = [None, 0, 1, True, False, "CPU", "NULL", b"k", "1.000", Text("E_4"), Key(), *shared]
    for _ in range(2000):
        events = []
        for _ in range(rng.randrange(0, 6)):
            e = Range()
            for f in ("device", "name", "st", "en", "profile_key", "is_copy", "extra"):
                if rng.random() < (0.97 if f in ("device", "name", "st") else 0.5):
                    e.__dict__[f] = rng.choice(values)
            events.append(e)
        codes = {"E_4": 1, Text("r_16"): 2, "CPU": 3}
        ids = {id(shared[0]): 4, id(values[-4]): 5}
        fast, call, ref = _both_fields(events, codes, ids)
        if isinstance(ref, Exception):
            assert type(fast) in (KeyError, AttributeError) and type(ref) in (KeyError, AttributeError), (fast, ref)
            assert type(call) is type(ref) and call.args == ref.args, (call, ref)
        else:
            assert _same_fields(fast, ref) and _same_fields(call, ref), events
    with pytest.raises(AttributeError):
        profile_reader._fast_ranges.fields([7], {}, {})


def test_strip_ansi():
    assert strip_ansi("E\x1b[90m_\x1b[0m\x1b[97m4\x1b[0m\x1b[90m_\x1b[0m\x1b[33m4\x1b[0m") == ("E_4_4", "bright white")
    assert strip_ansi("plain") == ("plain", None)


def test_sample_profile_records():
    p = vizexport.load_profile(SAMPLE / "profile.pkl")
    assert p.release.name == "0.14.0" and p.release.confidence in ("certain", "likely")
    markers = [pt for pt in p.points if pt.kind == "marker"]
    assert [m.arg.name for m in markers][:4] == [f"jit step {i}" for i in range(4)]
    assert all(isinstance(m.arg, Marker) for m in markers) and markers[0].arg.color == "blue"
    assert len(p.graphs) == 3 and all(len(g.entries) == 5 for g in p.graphs)
    for g in p.graphs:  # entries are spans inside their batch's signal range
        for i in g.entries:
            s = p.spans[i]
            assert s.graph == p.graphs.index(g) and min(g.sigs) <= s.st <= s.en <= max(g.sigs)
    copies = [s for s in p.spans if "SDMA" in s.device]
    assert {s.key.name for s in copies} == {"NULL -> NULL:1", "NULL:1 -> NULL"}
    assert sum(s.graph < 0 for s in copies) == 2 and sum(s.graph >= 0 for s in copies) == 6
    allocs = [pt.arg for pt in p.points if pt.kind == "alloc"]
    assert all(isinstance(a, Alloc) for a in allocs) and {a.dtype for a in allocs} >= {"float"}
    assert all(a.nbytes == a.count * 4 for a in allocs if a.dtype == "float")
    execs = [pt.arg for pt in p.points if pt.kind == "exec"]
    assert all(isinstance(e, Exec) and "\x1b" not in e.name for e in execs)
    assert {tuple(e.var_vals.items()) for e in execs if e.var_vals} == {(("n", 8),), (("n", 24),)}
    assert all("\x1b" not in s.key.name for s in p.spans)
    user = [s for s in p.spans if s.device == "USER"]
    assert user and all(s.key.tb and len(s.key.tb[0]) == 4 for s in user)


def test_sample_rewrites_records():
    r = vizexport.load_rewrites(SAMPLE / "rewrites.pkl")
    assert r.release.name == "0.14.0"
    rws = [rw for c in r.contexts for rw in c.rewrites]
    assert all(rw.sink in r.uops for rw in rws)
    matches = [m for rw in rws for m in rw.matches]
    assert matches and all(m.before in r.uops and m.after in r.uops for m in matches)
    assert all(m.loc and m.loc[0].endswith(".py") and m.loc[1] > 0 and m.seconds >= 0 for m in matches)
    assert {u.op_name for u in r.uops.values()} >= {"SINK", "CONST", "ADD", "STORE", "INDEX"}
    assert any(rw.walk for rw in rws) or any(not rw.walk for rw in rws)
    assert sum(rw.depth > 0 for rw in rws) > 0 and any(rw.bottom_up for rw in rws)


def test_copy_bytes_on_amd():
    f = FIXTURES / "sqtt" / "gfx950" / "profile_gemm_run_0.pkl"
    if not f.exists():
        return
    p = vizexport.load_profile(f)
    copies = [(s.key.name, s.key.ret) for s in p.spans if s.device == "AMD:SDMA:0"]
    assert copies[:3] == [("TINY -> AMD", 4096), ("TINY -> AMD", 7289), ("AMD -> TINY", 4096)]


def test_enum_tables_match_fixtures():
    """Our shipped tables (tools/gen_enums.py, from the wheels) equal the fixtures' tables."""
    dirs = {r: ("HEAD" if r == "master" else r) for r in RELEASES}
    for release, d in dirs.items():
        f = FIXTURES / "tinygrad" / d / "enums.json"
        if not f.exists():
            continue
        theirs = json.loads(f.read_text())
        for enum in ("Ops", "AxisType", "AddrSpace", "OptOps"):
            want = {int(k): v for k, v in theirs.get(enum, {}).get("values", {}).items()}
            assert enum_table(release, enum) == want, (release, enum)


def test_demo(tmp_path):
    r = run_cli("demo", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    info = json.loads((tmp_path / "out" / "info.json").read_text())
    assert [s["kind"] for s in info] == ["profile", "rewrites"]
    assert info[0]["n_events"] == 643 and info[0]["memory_peak"] == {"NULL": 4932, "NULL:1": 2176}
    assert "release 0.14.0" in r.stdout


@pytest.mark.parametrize("host", [True, False])
def test_graph_entries_keep_their_places_among_the_spans(tmp_path, host):
    """A batch's ranges and graph entries become spans in the pickle's order, all their times parsed in one bulk
    pass (the entries' from their graph's signals); a range that never ended stays one, in bulk too."""
    sigs = [tf.us(1000.0), tf.us(1000.25), tf.us(1000.75)]
    entry = lambda st_id, en_id, **kw: tf.Fake("ProfileGraphEntry", device="NULL", name=f"E_{st_id}", st_id=st_id,  # noqa: E731
                                               en_id=en_id, profile_key=None, **kw)
    graph = tf.Fake("ProfileGraphEvent", ents=[entry(0, 2), entry(1, 2, is_copy=True)], deps=[[], [0]], sigs=sigs)
    ranges = [tf.span("TINY" if i % 2 else "NULL", st=float(i), en=None if i == 4 else i + 0.5)
              for i in range(2 * common.BULK_MIN)]
    mid = common.BULK_MIN
    (tmp_path / "p.pkl").write_bytes(tf.profile(*ranges[:mid], graph, *ranges[mid:]))
    prof = load_profile(tmp_path / "p.pkl", host=host)
    kept = [i for i in range(len(ranges)) if host or i % 2 == 0]  # without the host's: the TINY ranges left out
    before = sum(i < mid for i in kept)
    t = prof.spans
    assert t.st.tolist() == [i * 1000 for i in kept[:before]] + [1000000, 1000250] + [i * 1000 for i in kept[before:]]
    assert t.en.tolist() == ([i * 1000 + (0 if i == 4 else 500) for i in kept[:before]] + [1000750, 1000750] +
                             [i * 1000 + 500 for i in kept[before:]])
    assert [i for i, e in enumerate(t.ended.tolist()) if not e] == [kept.index(4)]
    assert t.graph.tolist() == [-1] * before + [0, 0] + [-1] * (len(kept) - before)
    assert t.is_copy.tolist() == [False] * (before + 1) + [True] + [False] * (len(kept) - before)
    assert [t.keys[k].name for k in t.key[before:before + 3]] == ["E_0", "E_1", "E_4"]
    assert prof.graphs[0].entries == [before, before + 1] and prof.graphs[0].sigs == [1000000, 1000250, 1000750]
