"""`vizexport history check | site` and the verdicts of `diff` on real runs: twelve runs of one training workload
(tinygrad 0.14.0, NULL device, made by tools/make_runs.py on a shared two-core machine: real host timings, real
noise; kept as what `history add` stores, tests/data/history/train-null-runs.json.gz) and two more runs of it as
pickles. A copy with one kernel made slower on every launch is flagged — that kernel alone — by `history check`
against the twelve and by a paired `diff`; the unchanged runs are flagged by neither."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import vizexport
from vizexport.analysis.changepoints import change_points
from vizexport.analysis.history import BY_LAUNCH, check_kernels
from vizexport.analysis.launches import kernel_runs
from vizexport.analysis.stats import (
    FASTER,
    FEW,
    INCONCLUSIVE,
    PAIRED,
    SLOWER,
    UNCHANGED,
    UNPAIRED,
    adjust,
    compare,
    run_wide,
)
from vizexport.history.records import DeviceRecord, KernelRecord, RunMeta, RunRecord
from vizexport.history.store import normal_time, open_store

from .conftest import ROOT, run_cli
from .repickle import slow_down
from .test_history_store import PG, fresh_store, store_url  # noqa: F401 - the fixture: both backends
from .test_site import NODE_MODULES

DATA = ROOT / "tests" / "data" / "history"
SLOWED = ("NULL", "E_32_4")  # the workload's most launched kernel (17 launches a run, 7 programs)
SHOTS = ROOT / "test-output" / "history"
CHROMIUM = Path("/usr/bin/chromium")


def stored_runs(name: str = "train-null") -> list[RunRecord]:
    """The runs of a set as `history add` stores them (tools/make_runs.py --export)."""
    data = json.loads(gzip.decompress((DATA / f"{name}-runs.json.gz").read_bytes()))
    out = []
    for r in data["runs"]:
        kernels = [KernelRecord(k["device"], k["name"], k["category"], k["programs"],
                                np.array(k["durations"], np.int64), np.array(k["pattern"], np.int64))
                   for k in r["kernels"]]
        meta = RunMeta(f"{r['run']:02d}" + "c0ffee" * 6, "main", normal_time(f"2025-06-01T{r['run']:02d}:00:00Z"),
                       {"set": data["set"]}, "profile.pkl", "0.14.0", sum(k.launches for k in kernels),
                       sum(k.total_ns for k in kernels), r["span_ns"])
        out.append(RunRecord(meta, kernels, [DeviceRecord(*d) for d in r["devices"]]))
    return out


def profile(run: int, folder: Path) -> Path:
    out = folder / f"run{run}.pkl"
    if not out.exists():
        out.write_bytes(gzip.decompress((DATA / f"train-null-{run}.profile.pkl.gz").read_bytes()))
    return out


def slowed(src: Path, dst: Path, factor: float) -> Path:
    runs = kernel_runs(vizexport.build_timeline(vizexport.load_profile(src)))
    keys = {bytes.fromhex(r.kernel.program) for r in runs if (r.kernel.device, r.kernel.name) == SLOWED}
    assert slow_down(src, dst, keys, factor) == 17
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("runs")
    out = {"folder": folder, "12": profile(12, folder), "13": profile(13, folder)}
    for f in (1.5, 2.0):
        out[f] = slowed(out["12"], folder / f"slow{f}.pkl", f)
    return out


def fill(url: str) -> None:
    with open_store(url, create=True) as s:
        for r in stored_runs():
            s.add(r)


def check_json(url: str, pkl: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    r = run_cli("history", "check", url, pkl, "--branch", "main", "-o", out, *extra)
    return r, json.loads(out.read_text()) if out.exists() else {}


def test_check_flags_the_slowed_kernel_alone(store_url: str, runs: dict, tmp_path: Path):  # noqa: F811
    """Against the 12 earlier runs (on either backend), 1.5× and 2× on every launch of one kernel: that kernel is
    slower, nothing else is flagged, exit 3 with --fail-if-slower 10; the unchanged run: exit 0, nothing flagged."""
    fill(store_url)
    for factor in (1.5, 2.0):
        r, d = check_json(store_url, runs[factor], tmp_path / f"c{factor}.json", "--fail-if-slower", "10")
        assert r.returncode == 3, r.stderr
        flagged = [(k["device"], k["name"], k["verdict"]) for k in d["kernels"] if k["verdict"] in (SLOWER, FASTER)]
        assert flagged == [(*SLOWED, SLOWER)]
        k = d["kernels"][0]
        assert k["method"] == BY_LAUNCH and k["runs"] == 12 and k["launches"] == 17 and k["q"] < 0.05
        assert k["interval"][0] > 1.05 and abs(k["ratio"] / factor - 1) < 0.15
        assert r.stderr.startswith("vizexport: 1 kernel(s) significantly slower by more than 10%: E_32_4 on NULL (+")
    r, d = check_json(store_url, runs["12"], tmp_path / "same.json", "--fail-if-slower", "10")
    assert r.returncode == 0 and r.stderr == ""
    assert not [k for k in d["kernels"] if k["verdict"] in (SLOWER, FASTER)]
    assert len(d["earlier"]) == 12 and sum(d["verdicts"].values()) == len(d["kernels"]) == 16
    for k in d["kernels"]:  # same JSON shape as a diff's kernels
        assert {"name", "device", "verdict", "ratio", "interval", "p"} <= set(k)
    moved = [k for k in d["kernels"] if k["earlier_median_ns"] and abs(k["median_ns"] / k["earlier_median_ns"] - 1)
             > 0.10]
    assert moved and not [k for k in moved if k["verdict"] == UNCHANGED]  # moved >10%: never "unchanged"


@pytest.mark.skipif(not PG, reason="VIZEXPORT_TEST_PG unset")
def test_the_same_answers_on_both_backends(runs: dict, tmp_path: Path):
    """A check reads the same from a SQLite file and from PostgreSQL: byte for byte but for the store's name."""
    answers = []
    for backend in ("sqlite", "postgresql"):
        with fresh_store(backend, tmp_path) as url:
            fill(url)
            r = run_cli("history", "check", url, runs[2.0], "--branch", "main", "--time", "2025-06-03T00:00:00Z",
                        "-o", tmp_path / f"{backend}.md")
            assert r.returncode == 0, r.stderr
            answers.append((tmp_path / f"{backend}.md").read_text())
            answers.append(run_cli("history", "list", url, "--json").stdout)
    assert answers[0] == answers[2] and answers[1] == answers[3] and "1 slower" in answers[0]


def test_markdown_is_a_pull_request_comment(runs: dict, tmp_path: Path):
    url = str(tmp_path / "s.db")
    fill(url)
    r = run_cli("history", "check", url, runs[2.0], "--branch", "main", "--commit", "deadbeef99", "-o",
                tmp_path / "c.md")
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {tmp_path / 'c.md'}: 1 slower, ")
    md = (tmp_path / "c.md").read_text()
    assert md.startswith("## History check: slow2.0.pkl (deadbeef99 on main)\n\n1 slower, ")
    assert md.index("### Significant changes") < md.index("<details><summary><b>Kernels</b>")
    significant = md.split("### Significant changes")[1].split("<details>")[0]
    (row,) = [line for line in significant.splitlines() if line.startswith("| E_32_4 ")]
    assert row.endswith("| slower |") and "| NULL | same | 17 | 12 |" in row
    r = run_cli("history", "check", url, runs[2.0], "--branch", "feature")  # no runs of that branch: nothing to say
    assert r.returncode == 0 and "16 new (against 0 earlier runs of feature)" in r.stdout


def test_paired_diff_flags_the_slowed_kernel_alone(runs: dict, tmp_path: Path):
    """Two runs, one slowed 2× on every launch of one kernel: launch by launch, that kernel alone is slower;
    the two unchanged runs: nothing flagged."""
    out = tmp_path / "d.json"
    r = run_cli("diff", runs["13"], runs[2.0], "--fail-if-slower", "10", "-o", out)
    assert r.returncode == 3, r.stderr
    d = json.loads(out.read_text())
    flagged = [(k["device"], k["name"], k["verdict"], k["method"]) for k in d["kernels"]
               if k["verdict"] in (SLOWER, FASTER)]
    assert flagged == [(*SLOWED, SLOWER, PAIRED)]
    r = run_cli("diff", runs["13"], runs["12"], "--fail-if-slower", "10", "-o", out)
    assert r.returncode == 0
    d = json.loads(out.read_text())
    assert not [k for k in d["kernels"] if k["verdict"] in (SLOWER, FASTER)]
    assert {k["verdict"] for k in d["kernels"]} <= {INCONCLUSIVE, FEW, UNCHANGED}


def test_program_changed_keeps_its_name(runs: dict, tmp_path: Path):
    """A pull request that changed a kernel's code (new program keys, same name) still compares by name and
    device, labelled so."""
    from vizexport.pickles import class_name, load

    from .repickle import dumps
    events, _ = load(runs["12"])
    keys = {bytes.fromhex(r.kernel.program) for r in kernel_runs(vizexport.build_timeline(vizexport.load_profile(
        runs["12"]))) if (r.kernel.device, r.kernel.name) == SLOWED}
    for e in events:  # each of its programs another (its key reversed), launched as before
        if class_name(e) == "ProfileRangeEvent" and getattr(e, "profile_key", None) in keys:
            e.profile_key = e.profile_key[::-1]
        for ent in getattr(e, "ents", []) if class_name(e) == "ProfileGraphEvent" else []:
            if getattr(ent, "profile_key", None) in keys:
                ent.profile_key = ent.profile_key[::-1]
    (tmp_path / "new.pkl").write_bytes(dumps(events))
    d = vizexport.api.diff(vizexport.load_profile(runs["12"]), vizexport.load_profile(tmp_path / "new.pkl"))
    (k,) = [k for k in d.kernels if (k.device, k.name) == SLOWED]
    assert k.program_changed and k.matched == "name (program changed)" and k.launches_after == 17
    assert k.programs_after == sorted(key[::-1].hex() for key in keys)
    assert k.method == PAIRED and k.ratio == 1.0 and k.verdict == UNCHANGED  # the same launches: evidence
    assert all(not x.program_changed for x in d.kernels if x is not k)


# -- the statistics on the cases of issue #35 ------------------------------------------------------------------------

def test_every_launch_twice_as_long_is_found_launch_by_launch():
    """5 launches, a cold 12× first one in both runs, each launch exactly twice its counterpart: paired, slower;
    unpaired (as before) the cold launches hide it."""
    before = np.array([12_000, 1_000, 1_100, 950, 1_050], np.int64)
    after = 2 * before
    c = compare(before, after, paired=True)
    assert (c.method, c.verdict, c.ratio, c.low, c.high) == (PAIRED, SLOWER, 2.0, 2.0, 2.0)
    c = compare(before, after, paired=False)
    assert c.method == UNPAIRED and c.verdict == INCONCLUSIVE and c.low < 1 < c.high


def test_not_significant_is_not_unchanged():
    """+662% with 4 launches a side and wild noise: not shown to change, and certainly not unchanged."""
    before = np.array([1_000, 9_000, 1_100, 30_000], np.int64)
    after = np.array([7_620, 1_200, 60_000, 9_000], np.int64)
    c = compare(before, after)
    assert c.verdict == INCONCLUSIVE and c.p > 0.05 and c.low < 1 < c.high
    rng = np.random.default_rng(1)
    steady = rng.normal(1000, 5, 400).astype(np.int64)
    c = compare(steady, steady + rng.normal(3, 5, 400).astype(np.int64), paired=True)
    assert c.verdict == UNCHANGED and 0.95 <= c.low <= c.high <= 1.05


def test_false_flags_are_controlled_over_many_kernels():
    """200 kernels of pure heavy-tailed noise: p-values below 0.05 happen, flags do not (Benjamini–Hochberg)."""
    rng = np.random.default_rng(7)
    changes = []
    for _ in range(200):
        a, b = (np.exp(rng.standard_t(2, 12) * 0.3) * 1000 for _ in range(2))
        changes.append(compare(a.astype(np.int64) + 1, b.astype(np.int64) + 1, paired=True))
    assert sum(c.p < 0.05 for c in changes) >= 3
    adjust(changes)
    assert not [c for c in changes if c.verdict in (SLOWER, FASTER)]


def test_a_cpus_jitter_is_not_a_change():
    """As on our CPU runs: a 0.5 µs kernel takes 10 µs in one run (its launches caught in a slow state), a move other
    kernels make too; a factor of 20 by 9.5 µs is no change when 90% of the kernels move about as far. A long kernel
    made 2× slower moves far beyond that jitter and is flagged."""
    moves = [9_500.0, -9_400.0, 4_800.0, -4_700.0, 600.0, -300.0, 200.0, 1_500.0, -2_400.0, 9_800.0]
    sizes = [500.0, 10_800.0, 5_400.0, 8_200.0, 900.0, 1_200.0, 10_200.0, 3_100.0, 48_000.0, 10_900.0]
    wide = run_wide([(0.0, 0.1)] * len(moves), list(zip(sizes, moves, strict=True)))
    assert 9_400 <= wide.jitter <= 9_800
    tiny = np.array([500, 480, 520, 510, 490, 505], np.int64)
    c = compare(tiny, tiny + 9_000, paired=True, wide=wide)
    assert c.ratio > 15 and c.low > 1 and c.verdict == INCONCLUSIVE
    assert compare(tiny, tiny + 9_000, paired=True).verdict == SLOWER  # without the jitter set aside: flagged
    long = np.array([500_000, 480_000, 520_000, 510_000, 490_000, 505_000], np.int64)
    assert compare(long, 2 * long, paired=True, wide=wide).verdict == SLOWER


def test_a_run_where_the_others_moved_does_not_flag_the_one_that_stayed():
    """As on our CPU runs: earlier runs move all kernels alike by up to ±40% (the machine's state), a kernel's level
    follows. In the new run every other kernel is twice as fast and one kept its time: against the run-wide shift it
    is 2× slower, but its own time did not move, so it is not slower. Made 2.5× slower itself, it is."""
    rng = np.random.default_rng(5)
    others = {f"k{i}": 1_000 * (i + 1) for i in range(6)}

    def run(shift: float, own: float = 1.0) -> dict:
        out = {k: (np.round(v * shift * np.exp(rng.normal(0, 0.01, 8))).astype(np.int64), np.zeros(8, np.int64))
               for k, v in others.items()}
        out["kept"] = (np.round(50_000 * shift * own * np.exp(rng.normal(0, 0.01, 8))).astype(np.int64),
                       np.zeros(8, np.int64))
        return out

    earlier = [run(float(np.exp(0.35 * (-1) ** i))) for i in range(10)]  # the typical earlier run: no shift
    stayed, shift = check_kernels(earlier, run(0.5, 2.0))
    assert shift < 0.6 and stayed["kept"].ratio / stayed["kept"].shift > 1.8
    assert stayed["kept"].verdict == INCONCLUSIVE and all(stayed[k].verdict != SLOWER for k in others)
    slowed, _ = check_kernels(earlier, run(1.0, 2.5))
    assert slowed["kept"].verdict == SLOWER and all(slowed[k].verdict != SLOWER for k in others)


def test_change_points():
    rng = np.random.default_rng(3)
    noise = rng.standard_t(3, 40) * 0.08
    assert change_points(noise) == []
    spike = noise.copy()
    spike[12] += 2.0  # one wild run is not a step
    assert change_points(spike) == []
    step = noise.copy()
    step[25:] += np.log(1.5)
    (s,) = change_points(step)
    assert s.at == 25 and 1.35 < s.ratio < 1.65


def test_site_in_browser(runs: dict, tmp_path: Path):
    """`history site` of the 12 runs and the 2× copy added as the latest: it loads from file:// without console
    errors or broken links, a trend per kernel with a dot per run and the step marked where the copy is."""
    url = str(tmp_path / "s.db")
    fill(url)
    for i in range(3):  # the 2× copy, three times: a new level, a change point
        r = run_cli("history", "add", url, runs[2.0], "--commit", f"slowcopy{i}", "--branch", "main", "--time",
                    f"2025-06-02T0{i}:00:00Z")
        assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    r = run_cli("history", "site", url, "-o", site)
    assert r.returncode == 0 and r.stdout == f"wrote {site / 'index.html'}\n"
    index = (site / "index.html").read_text()
    assert index.count('<figure class="trend"') == 16 and len(list((site / "runs").glob("*.html"))) == 15
    assert 'href="runs/15.html"' in index
    if not (shutil.which("node") and (NODE_MODULES / "playwright-core").exists() and CHROMIUM.exists()):
        pytest.skip("headless Chromium + playwright-core not installed (../shared/tools/perfetto-check/install.sh)")
    if SHOTS.exists():
        shutil.rmtree(SHOTS)
    SHOTS.mkdir(parents=True)
    r = subprocess.run(["node", str(ROOT / "tests" / "browser" / "check_history.cjs"), str(site), str(SHOTS)],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
                       check=False)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert {p: v["errors"] for p, v in got["pages"].items() if v["errors"]} == {} and got["brokenLinks"] == []
    assert len(got["pages"]) == 16 and got["sorted"] == list(range(15, 0, -1))
    assert got["sections"][0] == "summary" and got["sections"][-2:] == ["trends", "runs"]
    trends = {t["title"]: t for t in got["trends"]}
    slow = trends["E_32_4 on NULL"]
    assert slow["dots"] == 15 and slow["width"] > 600 and slow["height"] > 120 and slow["changePoints"] == 1
    assert all(t["dots"] >= 1 for t in got["trends"])
    assert (SHOTS / "history.png").stat().st_size > 20_000
