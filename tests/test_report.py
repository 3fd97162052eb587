"""`vizexport report`: each figure checked against the same figure computed straight from the profile's records."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

import vizexport
from vizexport.analysis import hostside
from vizexport.devices import device_root, is_copy
from vizexport.launchtable import COPY, ELEMENTWISE, REDUCE
from vizexport.records import to_json
from vizexport.report import report_text
from vizexport.tinygrad.launches import link_launches

from .answers import CORPUS, device_spans, exec_before, intersection, latest_exec, length, merged, unpack
from .conftest import ROOT, fixture_files, run_cli

SETS = ["master-null-train", "master-null-multi", "0.14.0-null-multi", "0.13.0-null-meta", "0.12.0-null-meta",
        "0.12.0-null-train", "0.11.0-null-multi", "0.14.0-cpu-sym", "master-null-sym"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """name → (profile, rewrites, report) for every corpus set above, loaded once."""
    folder = tmp_path_factory.mktemp("corpus")
    out = {}
    for name in SETS:
        p, r = unpack(name, folder)
        prof, log = vizexport.load_profile(p), vizexport.load_rewrites(r)
        out[name] = (prof, log, vizexport.api.report(prof, log, peak_gflops=50.0, peak_gbs=20.0))
    return out


@pytest.mark.parametrize("name", SETS)
def test_busy_time_is_the_union_of_each_devices_launches(runs: dict, name: str):
    prof, _, rep = runs[name]
    spans = device_spans(prof)
    assert {d.device for d in rep.devices} == set(spans)
    for d in rep.devices:
        union = merged(spans[d.device])
        assert d.busy_ns == length(union)
        assert d.launches == len(spans[d.device])
        assert d.active_ns == union[-1][1] - union[0][0]
        assert d.idle_ns == d.active_ns - d.busy_ns
        gaps = sorted((b[0] - a[1] for a, b in pairwise(union)), reverse=True)
        assert [g.dur_ns for g in d.gaps] == gaps[:len(d.gaps)] and len(d.gaps) == min(5, len(gaps))
        for g in d.gaps:  # named by the launches on either side
            assert g.after and g.before
        over_time = np.array(d.busy_over_time) * rep.span_ns / len(d.busy_over_time)
        assert over_time.sum() == pytest.approx(d.busy_ns, rel=0.05, abs=rep.span_ns * 1e-4)  # shares rounded
    assert rep.launches == sum(map(len, spans.values()))
    assert rep.launch_ns == sum(en - st for iv in spans.values() for st, en in iv)


@pytest.mark.parametrize("name", ["master-null-multi", "0.14.0-null-multi", "0.13.0-null-meta", "0.12.0-null-meta"])
def test_copy_compute_overlap(runs: dict, name: str):
    """Per device root: copies (copy engines, ranges named 'A -> B') against compute, from the records."""
    prof, _, rep = runs[name]
    copies: dict[str, list] = defaultdict(list)
    compute: dict[str, list] = defaultdict(list)
    for dev in device_spans(prof):
        for s in prof.spans:
            if s.device == dev and s.en is not None and s.en > s.st:
                (copies if is_copy(s) or " -> " in s.key.name else compute)[device_root(dev)].append((s.st, s.en))
    shown = {o.device: o for o in rep.overlap}
    roots = [r for r in set(copies) | set(compute) if copies[r] and compute[r]]
    assert set(shown) - {"all devices"} == set(roots)
    for root in roots:
        o = shown[root]
        a, b = merged(copies[root]), merged(compute[root])
        assert (o.copy_ns, o.compute_ns, o.both_ns) == (length(a), length(b), intersection(a, b))
    if name == "master-null-multi":  # the JIT'd exchange copies while it computes: real overlap
        assert shown["NULL"].both_ns > 0


@pytest.mark.parametrize("name", SETS)
def test_categories_and_histograms(runs: dict, name: str):
    prof, _, rep = runs[name]
    spans = device_spans(prof)
    by_dev: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for c in rep.categories:
        by_dev[c.device][c.category] = [c.launches, c.total_ns]
    for dev, iv in spans.items():
        assert sum(v[0] for v in by_dev[dev].values()) == len(iv)
        assert sum(v[1] for v in by_dev[dev].values()) == sum(en - st for st, en in iv)
    for k in rep.kernels:  # the category follows tinygrad's naming
        if k.name.startswith("r_"):
            assert k.category == REDUCE
        elif k.name.startswith("E_"):
            assert k.category == ELEMENTWISE
        elif " -> " in k.name:
            assert k.category == COPY
    for h in rep.histograms:
        assert sum(map(sum, h.counts.values())) == len(spans[h.device])
        assert h.edges_ns == sorted(h.edges_ns)


def test_kernel_durations(runs: dict):
    """Each kernel's launch count and duration quantiles, against the ranges of its program key in the pickle."""
    prof, _, rep = runs["master-null-train"]
    durs: dict[tuple[str, str], list] = defaultdict(list)
    for s in prof.spans:
        if s.profile_key and s.en is not None and s.en > s.st:
            durs[(s.device, s.profile_key.hex())].append(s.en - s.st)
    assert len(rep.kernels) == 20
    for k in rep.kernels:
        d = np.array(durs[(k.device, k.program)])
        assert k.launches == len(d) and k.total_ns == d.sum() and k.max_ns == d.max() and k.min_ns == d.min()
        assert (k.median_ns, k.p90_ns) == (np.median(d), np.percentile(d, 90))
    totals = [k.total_ns for k in rep.kernels]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("name", ["master-null-train", "master-null-multi", "0.13.0-null-meta", "0.12.0-null-meta"])
def test_launch_latency(runs: dict, name: str):
    """Device start − the host launch (exec event) the reader links it to (tinygrad/launches.py, tested on its own in
    test_launches.py): every device range with a duration and a launch counts once, on its device string."""
    prof, _, rep = runs[name]
    links = link_launches(prof)
    want: dict[str, list[int]] = defaultdict(list)
    for i, e in links.spans.items():
        s = prof.spans[i]
        if s.en is not None and s.en > s.st:
            want[s.device].append(s.st - prof.points[e].ts)
    assert want
    got = {x.device: x for x in rep.latency}
    assert set(got) == set(want)
    for dev, lat in want.items():
        assert sorted(got[dev].samples) == sorted(lat)
        assert got[dev].median_ns == np.median(lat) and got[dev].max_ns == max(lat)
        assert min(lat) > 0  # exec events are back-dated to the launch call: they come first


def test_jit_batches(runs: dict):
    """Each JIT graph batch's time, call after call: max end − min start of its entries, from the graph events."""
    prof, _, rep = runs["master-null-multi"]
    want = []
    for g in prof.graphs:
        st = min(prof.spans[i].st for i in g.entries)
        en = max(prof.spans[i].en for i in g.entries)
        want.append(en - st)
    (b,) = rep.batches
    assert b.name == f"batched {len(prof.graphs[0].entries)}" and b.calls == len(prof.graphs) == 3
    assert b.durations == want and b.first_ns == want[0] and b.steady_ns == np.median(want[1:])
    names = {prof.spans[i].key.name for i in prof.graphs[0].entries if prof.spans[i].device.startswith("NULL")}
    assert set(re.split(r", ", b.label.split(": ", 1)[1])) <= names


def test_call_sites_point_at_the_workloads_lines(runs: dict):
    """Device time by the line of the workload that led to it: every site is a line of the corpus workload whose
    code is shown as in the file, and the sites' times add up to all launch time."""
    prof, _, rep = runs["master-null-train"]
    tl = vizexport.build_timeline(prof)
    sites = hostside.call_sites(tl, hostside.exec_times(prof), n=1000)
    assert sum(s.device_ns for s in sites) == rep.launch_ns
    assert sum(s.launches for s in sites) == rep.launches
    workload = (ROOT / "tools" / "corpus" / "train.py").read_text().splitlines()
    for s in sites:
        if s.site != hostside.NO_SITE:
            file, line = re.match(r"(.*):(\d+) ", s.site).groups()
            assert file.endswith("tools/corpus/train.py"), s.site
            assert workload[int(line) - 1].strip() == s.code
    top = rep.call_sites[0]
    assert top.code == "opt.step()" and top.pct > 90  # the Adam step's first call dominates this run
    assert hostside.caller("/a/site-packages/tinygrad/tensor.py:1 w\n    x\n/a/site-packages/tinygrad/mixin/m.py:2 f"
                           "\n    y\n/usr/lib/python3.11/contextlib.py:3 g\n    z\n/home/u/run.py:4 main\n    go()"
                           ) == ("/home/u/run.py:4 main", "go()")


def test_tensor_calls(runs: dict):
    """0.12 records the Tensor calls of each launch (exec metadata): device time per call, from the records."""
    prof, _, rep = runs["0.12.0-null-meta"]
    execs = latest_exec(prof)
    want: dict[str, int] = defaultdict(int)
    for s in prof.spans:
        if s.graph < 0 and s.en is not None and s.en > s.st and s.device in execs and not is_copy(s):
            e = exec_before(execs, s.device, s.st)
            if e is not None and e.arg.metadata:
                want[", ".join(e.arg.metadata)] += s.en - s.st
    assert {t.site: t.device_ns for t in rep.tensor_calls} == want and "__mul__" in want


def test_achieved_against_peak(runs: dict):
    _, _, rep = runs["master-null-train"]
    assert rep.peaks.gflops == 50.0 and rep.peaks.source == "--peak-gflops and --peak-gbs"
    assert len(rep.achieved) == 42  # every program has estimates (the rewrites trace is given)
    for a in rep.achieved:
        assert a.flops_pct == pytest.approx(100 * a.gflops / 50) and a.bw_pct == pytest.approx(100 * a.gbs / 20)
        assert a.intensity is None or a.intensity == pytest.approx(a.gflops / a.gbs)


@pytest.mark.parametrize("profile", fixture_files("sqtt/gfx*/profile_gemm_run_0.pkl"), ids=lambda p: p.parent.name)
def test_device_properties_are_shown(profile: Path):
    prof = vizexport.load_profile(profile)
    rep = vizexport.api.report(prof)
    assert rep.peaks.properties == {d.device: d.props for d in prof.devices if d.props}
    assert rep.peaks.gflops is None and "no clock" in rep.peaks.source
    assert "gfx_target_version=" in report_text(rep)


def test_report_on_every_profile(tmp_path: Path):
    """Every fixture and corpus profile gives a report whose JSON is valid (no NaN) and whose text names each
    device, including the profiles without a kernel launch (0.10.x)."""
    files = list(fixture_files("tinygrad/*/profile.pkl"))
    files += [unpack(d.name, tmp_path)[0] for d in sorted(CORPUS.iterdir()) if (d / "profile.pkl.gz").exists()]
    for f in files:
        rep = vizexport.api.report(vizexport.load_profile(f))
        json.dumps(to_json(rep), allow_nan=False)
        text = report_text(rep)
        assert all(d.device in text for d in rep.devices), f


def test_report_command(tmp_path: Path):
    p, r = unpack("master-null-train", tmp_path)
    out = run_cli("report", p, r)
    assert out.returncode == 0 and out.stdout.startswith("Run report: ") and "Launch latency" in out.stdout
    for suffix in (".json", ".md", ".html"):
        res = run_cli("report", p, r, "-o", tmp_path / f"r{suffix}", "--peak-gflops", "50")
        assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["launches"] == 88 and data["peaks"]["gflops"] == 50 and data["devices"][0]["device"] == "NULL"
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("## Run report: master-null-train") and "### Launch latency" in md
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") == 8 and 'id="plot-roofline"' in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # one file: nothing fetched from anywhere
    bad = run_cli("report", p, "-o", tmp_path / "r.txt")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "unknown output format" in bad.stderr
    assert not (tmp_path / "r.txt").exists()


@pytest.mark.parametrize(("lo", "hi", "labels"), [
    (7_500, 12_000, {"8 µs", "9 µs", "10 µs"}),  # under half a decade: every minor tick
    (1_500, 12_000, {"2 µs", "5 µs", "10 µs"}),  # under one: 2× and 5× only
    (100, 200_000, {"100 ns", "1 µs", "10 µs", "100 µs"}),  # more: the decades alone
])
def test_log_duration_axes_label_their_ticks_as_durations(lo: float, hi: float, labels: set):
    """A log axis of durations reads in ns/µs/ms at every labelled tick, minor ones included (matplotlib's own
    minor labels would be 8×10³, in ns)."""
    from matplotlib.figure import Figure

    from vizexport.report.plots import _log_durations
    fig = Figure()
    ax = fig.subplots()
    ax.plot([lo, hi], [0, 1])
    _log_durations(ax)
    ax.set_xlim(lo, hi)
    fig.canvas.draw()
    axis = ax.xaxis
    shown = {fmt(x) for locator, fmt in ((axis.get_major_locator(), axis.get_major_formatter()),
                                         (axis.get_minor_locator(), axis.get_minor_formatter()))
             for x in locator() if lo <= x <= hi}
    assert shown - {""} == labels


def test_plot_ticks_are_plain_text(tmp_path: Path):
    """No plot needs mathtext (a parse per label, a tenth of a second per report): log axes read 0.01, 10⁵."""
    from vizexport.report.plots import report_plots, tick_decade
    p, r = unpack("master-null-train", tmp_path)
    plots = report_plots(vizexport.api.report(vizexport.load_profile(p), vizexport.load_rewrites(r)))
    assert "roofline" in plots and not [k for k, svg in plots.items() if "mathdefault" in svg]
    assert [tick_decade(x) for x in (1e-5, 1e-3, 1, 1e4, 1e6)] == ["10⁻⁵", "0.001", "1", "10000", "10⁶"]
