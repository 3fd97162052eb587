"""The public API (docs/library.md) used as a user would, on the bundled sample: every function the package
exports, and the one definition of a device's memory peak."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import vizexport
from vizexport.records import Alloc, Point, Profile, Release
from vizexport.timeline import ARG_GFLOPS, ARG_PROGRAM, Role

from .conftest import needs_dot
from .trace_rules import check

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"


@pytest.fixture(scope="module")
def sample() -> tuple[vizexport.Profile, vizexport.RewriteLog]:
    return vizexport.load_profile(SAMPLE / "profile.pkl"), vizexport.load_rewrites(SAMPLE / "rewrites.pkl")


def test_exports():
    assert set(vizexport.__all__) >= {"load_profile", "load_rewrites", "build_timeline", "write_trace",
                                      "render_rewrites", "build_site", "summarize"}
    assert all(hasattr(vizexport, name) for name in vizexport.__all__)


def test_timeline_and_traces(sample, tmp_path: Path):
    prof, log = sample
    tl = vizexport.build_timeline(prof, log)
    assert [t.name for t in tl.tracks if not t.parent] == ["TINY", "USER", "NULL", "NULL:1", "Markers"]
    by_role = {r: [t for t in tl.tracks if t.role == r] for r in Role}
    assert [t.name for t in by_role[Role.QUEUE]] == ["NULL", "NULL:1"]
    assert [(t.name, len(t)) for t in by_role[Role.GRAPH]] == [("NULL Graph", 3)]
    assert {t.name: max(t.values) for t in by_role[Role.MEMORY]} == {"NULL Memory": 4932, "NULL:1 Memory": 2176}
    kernels = [a for t in by_role[Role.QUEUE] for a in t.args.values() if ARG_GFLOPS in a]
    assert kernels and all(len(a[ARG_PROGRAM]) == 64 for a in kernels)  # estimates need the rewrites trace

    size = vizexport.write_trace(tl, tmp_path / "t.pftrace")
    assert size == (tmp_path / "t.pftrace").stat().st_size
    n_slices = sum(d >= 0 for t in tl.tracks for d in t.dur)
    decoded = check((tmp_path / "t.pftrace").read_bytes())
    assert sum(map(len, decoded.slices.values())) == n_slices > 100
    vizexport.write_trace(tl, str(tmp_path / "t.json.gz"))  # a name as text, as the API's docstring shows it
    events = json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == n_slices
    with pytest.raises(ValueError):
        vizexport.write_trace(tl, tmp_path / "t.txt")


def test_summaries(sample):
    prof, log = sample
    s = vizexport.summarize(prof)
    assert (s.kind, s.n_events, s.memory_peak) == ("profile", 643, {"NULL": 4932, "NULL:1": 2176})
    assert s.span_ns == [247354627137, 248185967551] and s.tinygrad.release == "0.14.0"
    r = vizexport.summarize(log)
    assert (r.kind, r.contexts, r.rewrites, r.matches, r.uops) == ("rewrites", 20, 502, 1215, 6143)


@needs_dot
def test_rewrites_and_site(sample, tmp_path: Path):
    prof, log = sample
    m = vizexport.render_rewrites(log, tmp_path / "rw", ctx="^E_", jobs=1)
    assert (m.summary.contexts, m.summary.rewrites, m.summary.matches, m.summary.steps) == (4, 179, 263, 442)
    assert all((tmp_path / "rw" / s.svg).read_bytes().startswith(b"<?xml")
               for c in m.contexts for r in c.rewrites for s in r.steps if s.svg)
    assert json.loads((tmp_path / "rw" / "manifest.json").read_text())["summary"]["steps"] == 442
    graphs = vizexport.step_graphs(log)  # the neutral model the writers draw from
    session = graphs.session()
    steps = session.replay(graphs.contexts[3].rewrites[0]).steps
    assert steps[0].sink is not None and session.nodes.op[steps[0].sink] == "SINK"
    assert session.nodes.label(steps[0].sink).startswith("SINK")

    index = vizexport.build_site(tmp_path / "site", prof, log, jobs=1)
    assert index == tmp_path / "site" / "index.html"
    html = index.read_text()
    assert "E_4_4" in html and "r_32_32_32" in html and (tmp_path / "site" / "trace.pftrace").stat().st_size > 0
    with pytest.raises(vizexport.InputError):
        vizexport.render_rewrites(prof, tmp_path / "no")


def _point(kind: str, ts: int, key: int, nbytes: int = 0) -> Point:
    return Point("NULL", kind, ts, key, Alloc(nbytes, "float", nbytes // 4) if kind == "alloc" else None)


def test_memory_peak_follows_time():
    """Points out of time order in the pickle: the peak is the most bytes alive at any one time (100 here: A is
    freed at 10, before B is allocated at 20), in the summary and on the Memory track alike."""
    prof = Profile("x.pkl", Release("0.14.0", "certain", "test"), 3,
                   points=[_point("alloc", 0, 1, 100), _point("alloc", 20, 2, 100), _point("free", 10, 1)])
    assert vizexport.summarize(prof).memory_peak == {"NULL": 100}
    (mem,) = [t for t in vizexport.build_timeline(prof).tracks if t.role == Role.MEMORY]
    assert (list(mem.ts), list(mem.values)) == ([0, 10, 20], [100, 0, 100])


def test_kernel_categories_from_names_roles_and_uops():
    """tinygrad's naming (r_ reduces, E_ does not, copies are 'a -> b'), the track's role, and a WMMA in the
    program's UOps; every kernel of the sample gets one."""
    from vizexport.timeline import Role
    from vizexport.tinygrad.categories import category
    assert category("r_32_32_32") == "reduce" and category("E_4_4") == "elementwise"
    assert category("E") == category("En8") == "elementwise" and category("r") == category("r_8_4n1") == "reduce"
    assert category("Eval") == category("rand") == "other"
    assert category("NULL -> NULL:1", Role.QUEUE) == category("x", Role.COPY) == "copy"
    assert category("batched 3", Role.GRAPH) == "graph batch" and category("custom_fn") == "other"
    assert category("r_16_16", uops=["   7 Ops.WMMA              dtypes.float.vec(8) [1, 2, 3] x"]) == \
        "matmul (tensor cores)"
    tl = vizexport.build_timeline(vizexport.load_profile(SAMPLE / "profile.pkl"))
    cats = {(k.device, k.name): category(k.name) for k in vizexport.analysis.top_kernels(tl)}
    assert cats[("NULL", "r_32_32_32")] == "reduce" and cats[("NULL:SDMA:0", "NULL -> NULL:1")] == "copy"
