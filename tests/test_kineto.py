"""`--flavor kineto`: Chrome JSON as the PyTorch profiler writes it, read by the real Holistic Trace Analysis (the
`holistictraceanalysis` package, which .ci/run installs; without it that check skips): its kernel breakdown's
per-kernel totals and counts equal `vizexport top`'s on the sample, the fixtures and corpus sets; and the dialect's
layout as HTA's parser needs it."""
from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import vizexport
from vizexport.analysis import kernel_table
from vizexport.perfetto.kineto import HOST_PID, LEFT_OUT, kineto_name, memcpy_name
from vizexport.timeline import Role

from .conftest import FIXTURES, fixture_files, run_cli
from .test_corpus import COMPARE, CORPUS

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"
DEVICE_CATS = ("kernel", "gpu_memcpy")
HTA_RANK = re.compile(r'"rank":\s+(\d+)')  # how HTA finds a trace's rank (hta/common/trace_file.py)


def inputs() -> list:
    """(profile, rewrites) pairs with device work: the sample, fixtures of every release that records it, an AMD
    capture, and corpus sets (multi-device copies, a training step)."""
    out = [pytest.param(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", id="sample")]
    for key in ("tinygrad/0.11.0", "tinygrad/0.12.0", "tinygrad/0.13.0", "tinygrad/0.14.0-null",
                "tinygrad/0.14.0-hcq2", "tinygrad/HEAD"):
        if (FIXTURES / key).is_dir():
            out.append(pytest.param(FIXTURES / key / "profile.pkl", FIXTURES / key / "rewrites.pkl", id=key))
    out += [pytest.param(f, None, id=str(f.relative_to(FIXTURES))) for f in fixture_files("sqtt/gfx1100/*gemm*_0.pkl")]
    for name in ("0.13.0-null-multi", "master-null-train", "0.12.0-cpu-sym"):
        out.append(pytest.param(CORPUS / name / "profile.pkl.gz", CORPUS / name / "rewrites.pkl.gz", id=name))
    return out


def load(profile: Path, rewrites: Path | None, tmp: Path) -> tuple[vizexport.Profile, vizexport.RewriteLog | None]:
    if profile.suffix == ".gz":
        profile, rewrites = COMPARE.materialize(profile, tmp), COMPARE.materialize(rewrites, tmp)
    return vizexport.load_profile(profile), vizexport.load_rewrites(rewrites) if rewrites else None


def top_by_kineto_name(table) -> dict:
    """name as the Kineto flavour writes it → [launches, Σ dur µs, min, max] over devices, as HTA aggregates."""
    out: dict = defaultdict(lambda: [0, 0.0, float("inf"), 0.0])
    for k in table.kernels:
        if k.category == "graph batch":  # gpu_user_annotation: not a kernel
            continue
        row = out[kineto_name(k.name, k.category)[1]]
        row[0] += k.launches
        row[1] += k.total_ns / 1e3
        row[2] = min(row[2], k.min_ns / 1e3)
        row[3] = max(row[3], k.max_ns / 1e3)
    return dict(out)


@pytest.mark.parametrize(("profile", "rewrites"), inputs())
def test_hta_kernel_breakdown_equals_top(profile: Path, rewrites: Path | None, tmp_path: Path, monkeypatch):
    hta = pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed (.ci/run installs "
                              "it; it is not in the [test] extra: it pulls in jupyterlab)")
    if not profile.exists():
        pytest.skip(f"{profile} not present")
    prof, log = load(profile, rewrites, tmp_path)
    tl = vizexport.build_timeline(prof, log)
    folder = tmp_path / "traces"
    folder.mkdir()
    vizexport.write_trace(tl, folder / "trace.json.gz", flavor="kineto")
    # HTA rounds ns-resolution starts up and ends down to whole µs unless told not to (pytorch/pytorch#122425)
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    analysis = hta.TraceAnalysis(trace_dir=str(folder))
    _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=1 << 30,
                                                   include_memory_kernels=True)
    df = analysis.t.get_trace(0)
    names = analysis.t.symbol_table.get_sym_table()
    counts = df[df["stream"].ne(-1)].groupby("name").size()
    hta_rows = {r["name"]: (int(counts[names.index(r["name"])]), r["sum (us)"], r["min (us)"], r["max (us)"])
                for _, r in kernels.iterrows()}
    mine = top_by_kineto_name(kernel_table(tl))
    assert set(hta_rows) == set(mine) and mine
    for name, (n, total, lo, hi) in hta_rows.items():
        assert n == mine[name][0], name
        assert total == pytest.approx(mine[name][1], rel=1e-9, abs=1e-6), name
        assert (lo, hi) == pytest.approx((mine[name][2], mine[name][3]), rel=1e-9, abs=1e-6), name
    assert set(kernels["kernel_type"]) <= {"COMPUTATION", "MEMORY"}
    assert all(r["kernel_type"] == ("MEMORY" if r["name"].startswith("Memcpy") else "COMPUTATION")
               for _, r in kernels.iterrows())


def test_layout_as_kineto_writes_it(tmp_path: Path):
    prof, log = vizexport.load_profile(SAMPLE / "profile.pkl"), vizexport.load_rewrites(SAMPLE / "rewrites.pkl")
    tl = vizexport.build_timeline(prof, log)
    out = tmp_path / "t.json"
    vizexport.write_trace(tl, out, flavor="kineto")
    text = out.read_text()
    assert text.index('"deviceProperties"') < text.index('"traceEvents"')  # HTA's streaming parsers read it first
    assert HTA_RANK.search(text).group(1) == "0"
    trace = json.loads(text)
    assert trace["schemaVersion"] == 1 and trace["deviceProperties"] == [{"id": 0, "name": "NULL"},
                                                                          {"id": 1, "name": "NULL:1"}]
    events = trace["traceEvents"]
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    assert len(device) == sum(1 for t in tl.tracks if t.role in (Role.QUEUE, Role.COPY) for d in t.dur if d >= 0)
    assert len({e["args"]["correlation"] for e in device}) == len(device)
    assert all(e["pid"] == e["args"]["device"] and e["tid"] == e["args"]["stream"] for e in device)
    assert {e["pid"] for e in device} == {0, 1}
    copies = sorted({e["name"] for e in device if e["cat"] == "gpu_memcpy"})
    assert copies == ["Memcpy DtoD (NULL -> NULL:1)", "Memcpy DtoD (NULL:1 -> NULL)"]
    graphs = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    assert [e["name"] for e in graphs] == ["batched 5"] * 3 and all("stream" not in e.get("args", {}) for e in graphs)
    host = [e for e in events if e.get("cat") == "cpu_op"]
    assert len(host) == sum(1 for t in tl.tracks if t.role == Role.HOST for d in t.dur if d >= 0) > 500
    assert all(e["pid"] == HOST_PID for e in host) and len({e["args"]["External id"] for e in host}) == len(host)
    meta = {(e["pid"], e["name"]): e["args"] for e in events if e["ph"] == "M" and e["name"].startswith("process")}
    assert meta[(0, "process_labels")] == {"labels": "GPU 0"} and meta[(HOST_PID, "process_labels")] == {
        "labels": "CPU"}
    streams = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 0}
    assert {s.split(" ", 2)[2] for s in streams} == {"NULL", "NULL Graph", "NULL:SDMA:0"}


def test_device_properties_and_no_sqtt(tmp_path: Path):
    files = fixture_files("sqtt/gfx1100/profile_plus_run_0.pkl")
    if not files:
        pytest.skip("../shared/fixtures/sqtt not present")
    tl = vizexport.build_timeline(vizexport.load_profile(files[0]))
    assert any(t.role == Role.SQTT for t in tl.tracks)
    out = tmp_path / "t.json.gz"
    vizexport.write_trace(tl, out, flavor="kineto")
    trace = json.loads(gzip.decompress(out.read_bytes()))
    props = trace["deviceProperties"]
    assert [(p["id"], p["name"]) for p in props] == [(0, "AMD"), (1, "PYTHON")]  # PYTHON: a copy's host side
    assert (props[0]["gfx_target_version"], props[0]["simd_count"]) == (110000, 192) and len(props[1]) == 2
    names = {e.get("name") for e in trace["traceEvents"]}
    assert not any(str(n).startswith(("SE", "wave", "SQTT")) for n in names)  # Kineto has no thread traces
    assert sum(e.get("cat") == "kernel" for e in trace["traceEvents"]) == sum(
        1 for t in tl.tracks if t.role == Role.QUEUE for d in t.dur if d >= 0)


def test_copy_names():
    assert memcpy_name("NULL -> NULL:1") == "Memcpy DtoD (NULL -> NULL:1)"
    assert memcpy_name("CPU -> TINY") == "Memcpy HtoH (CPU -> TINY)"
    assert memcpy_name("PYTHON -> AMD:1") == "Memcpy HtoD (PYTHON -> AMD:1)"
    assert memcpy_name("AMD -> DISK:/tmp/x") == "Memcpy DtoH (AMD -> DISK:/tmp/x)"
    assert memcpy_name("copy 4.00K") == "Memcpy (copy 4.00K)"


def test_cli_flavor(tmp_path: Path):
    r = run_cli(SAMPLE / "profile.pkl", "-o", tmp_path / "k.json.gz", "--flavor", "kineto")
    assert r.returncode == 0, r.stderr
    events = json.loads(gzip.decompress((tmp_path / "k.json.gz").read_bytes()))["traceEvents"]
    assert sum(e.get("cat") == "kernel" for e in events) == 16  # E_4_4 4+4+4, r_n 2, E_64_4 1, r_32_32_32 1
    for out, message in (("k.pftrace", "--flavor kineto writes Chrome JSON"), ("site/", "not a folder")):
        r = run_cli(SAMPLE / "profile.pkl", "-o", tmp_path / out, "--flavor", "kineto")
        assert r.returncode == 1 and message in r.stderr and not (tmp_path / out).exists(), r.stderr
    tl = vizexport.build_timeline(vizexport.load_profile(SAMPLE / "profile.pkl"))
    with pytest.raises(ValueError, match=r"no 'kineto' flavour of Perfetto TrackEvent .* \(it is for \.json\)"):
        vizexport.write_trace(tl, tmp_path / "k.pftrace", flavor="kineto")
    plain = tmp_path / "plain.json"
    assert run_cli(SAMPLE / "profile.pkl", "-o", plain).returncode == 0
    assert '"cat":"kernel"' not in plain.read_text() and plain.read_text().startswith('{"traceEvents":[')


def test_perfetto_opens_the_kineto_flavour(tmp_path: Path):
    """The dialect is still Chrome JSON: the real trace processor finds every slice."""
    from .conftest import tpq
    prof = vizexport.load_profile(SAMPLE / "profile.pkl")
    tl = vizexport.build_timeline(prof)
    out = tmp_path / "k.json"
    vizexport.write_trace(tl, out, flavor="kineto")
    (rows, errors), = [tpq(out, "select count(*) as n from slice", "select name, value from stats where value > 0 "
                           "and severity in ('error', 'data_loss')")]
    kept = [t for t in tl.tracks if t.kind == "slice" and t.role not in LEFT_OUT]
    assert rows[0]["n"] == sum(map(len, kept)) > 600 and errors == []
