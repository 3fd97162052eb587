"""`vizexport diff`: a run against itself, against a copy with one kernel made 2× slower (or faster) — rewritten
through vizexport's own reader so the whole command path runs — and real pairs of runs from two releases."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import vizexport
from vizexport.analysis.diff import BY_NAME, BY_PROGRAM, NEW, VANISHED, launch_order
from vizexport.analysis.launches import kernel_runs
from vizexport.analysis.stats import FASTER, FEW, INCONCLUSIVE, PAIRED, SLOWER, UNCHANGED, reachable
from vizexport.text import markdown

from .answers import unpack
from .conftest import ROOT, run_cli
from .repickle import dumps, slow_down
from .test_site import browser_check

SHOTS = ROOT / "test-output" / "answers"
NOT_SIGNIFICANT = {UNCHANGED, INCONCLUSIVE, FEW}


@pytest.fixture(scope="module")
def train(tmp_path_factory) -> dict:
    """The master training run, the same run with its most-launched kernel (every program of its name: E_32_4, 17
    launches of 7 programs) 2× slower and 2× faster."""
    folder = tmp_path_factory.mktemp("train")
    base, rewrites = unpack("master-null-train", folder)
    runs = kernel_runs(vizexport.build_timeline(vizexport.load_profile(base)))
    count = Counter()
    for r in runs:
        count[(r.kernel.device, r.kernel.name)] += r.count
    (device, name), _ = count.most_common(1)[0]
    group = [r for r in runs if (r.kernel.device, r.kernel.name) == (device, name)]
    keys = sorted(r.kernel.program for r in group)
    out = {"base": base, "rewrites": rewrites, "device": device, "name": name, "keys": keys,
           "kernels": {r.kernel for r in group}, "durations": launch_order(group)[0]}
    for label, factor in (("slow", 2.0), ("fast", 0.5)):
        out[label] = folder / f"{label}.pkl"
        out[f"{label}_changed"] = slow_down(base, out[label], {bytes.fromhex(k) for k in keys}, factor)
    return out


def test_rewritten_pickle_reads_as_the_original(train: dict, tmp_path: Path):
    """The rewriting itself changes nothing it is not asked to: a copy written back unchanged gives the same
    launches, and the slowed copy differs in that one program's durations only."""
    from vizexport.pickles import load
    same = tmp_path / "same.pkl"
    same.write_bytes(dumps(load(train["base"])[0]))

    def launches(p: Path) -> dict:
        return {r.kernel: r.dur.tolist() for r in kernel_runs(vizexport.build_timeline(vizexport.load_profile(p)))}
    base, slow = launches(train["base"]), launches(train["slow"])
    assert launches(same) == base
    assert train["slow_changed"] == len(train["durations"]) == 17 and len(train["kernels"]) == 7
    assert {key for key in base if base[key] != slow[key]} == train["kernels"]
    assert all(slow[k] == [2 * d for d in base[k]] for k in train["kernels"])


def test_a_run_against_itself_changes_nothing(train: dict, tmp_path: Path):
    out = tmp_path / "d.json"
    r = run_cli("diff", train["base"], train["base"], "--fail-if-slower", "10", "-o", out)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert set(d["verdicts"]) <= NOT_SIGNIFICANT and sum(d["verdicts"].values()) == 16  # names: 42 programs
    assert all(k["ratio"] == 1.0 and k["match"] == BY_PROGRAM for k in d["kernels"])
    assert all(k["p"] is None or k["p"] == 1.0 for k in d["kernels"])


@pytest.mark.parametrize("name", ["0.14.0-null-multi", "0.12.0-null-train", "0.13.0-null-meta", "master-null-sym"])
def test_other_runs_against_themselves(tmp_path: Path, name: str):
    p, r = unpack(name, tmp_path)
    prof, log = vizexport.load_profile(p), vizexport.load_rewrites(r)
    d = vizexport.api.diff(prof, prof, log, log)
    assert set(d.verdicts) <= NOT_SIGNIFICANT and not d.slowdowns(0)
    assert all(t.total_before_ns == t.total_after_ns for t in d.devices + d.categories)
    assert all(i.busy_before_ns == i.busy_after_ns for i in d.intervals)


def test_a_kernel_made_twice_as_slow_is_flagged_alone(train: dict, tmp_path: Path):
    out = tmp_path / "d.json"
    r = run_cli("diff", train["base"], train["slow"], "--fail-if-slower", "10", "-o", out)
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip() == (f"vizexport: 1 kernel(s) significantly slower by more than 10%: {train['name']} on "
                                f"{train['device']} (+100.0%)")
    d = json.loads(out.read_text())
    flagged = [x for x in d["kernels"] if x["verdict"] not in NOT_SIGNIFICANT]
    assert [(x["name"], x["programs_after"], x["verdict"]) for x in flagged] == [(train["name"], train["keys"], SLOWER)]
    (x,) = flagged
    assert x["ratio"] == 2.0 and x["low"] > 1.05 and x["p"] < 0.05
    assert x["median_after_ns"] == 2 * np.median(train["durations"]) and x["launches_after"] == 17
    assert all(y["ratio"] == 1.0 for y in d["kernels"] if y is not x)
    assert x["method"] == PAIRED and x["interval"] == [x["low"], x["high"]] and x["q"] < 0.05
    # the copy's other kernels are launched alike, each launch as long: paired, every ratio 1, so the kernels with
    # 3 launches or more a side are unchanged with evidence (2 before, of 42 programs, when 3 launches a side could
    # not reject)
    assert d["verdicts"] == {SLOWER: 1, UNCHANGED: 11, FEW: 4}
    assert r.stdout.startswith(f"wrote {out}: 1 slower")


def test_the_threshold_and_the_other_direction(train: dict):
    r = run_cli("diff", train["base"], train["slow"], "--fail-if-slower", "150")  # +100% is within 150%
    assert r.returncode == 0 and "Significant changes" in r.stdout and r.stderr == ""
    r = run_cli("diff", train["base"], train["fast"], "--fail-if-slower", "10")
    assert r.returncode == 0
    sig = r.stdout.split("Significant changes")[1].split("\n\n")[0]
    assert f"{train['name']} " in sig and FASTER in sig and SLOWER not in sig
    r = run_cli("diff", train["base"], train["slow"], "--min-effect", "150")  # a doubling is below that effect
    assert "Significant changes" not in r.stdout


def test_outputs_for_a_pull_request(train: dict, tmp_path: Path):
    """Markdown for a comment (the significant change up front), one HTML file with SVG plots."""
    for suffix in (".md", ".html"):
        r = run_cli("diff", train["base"], train["slow"], "--base-rewrites", train["rewrites"], "--pr-rewrites",
                    train["rewrites"], "-o", tmp_path / f"d{suffix}")
        assert r.returncode == 0, r.stderr
    md = (tmp_path / "d.md").read_text()
    assert md.startswith("## Diff: ") and "1 slower, 11 unchanged, 4 too few launches" in md
    significant = md.split("### Significant changes")[1].split("<details>")[0]
    (row,) = [line for line in significant.splitlines() if line.startswith(f"| {markdown(train['name'])} ")]
    assert "| +100.0% |" in row and row.endswith("| slower |")
    assert "Mann–Whitney U" in md and "bootstrap" in md
    page = (tmp_path / "d.html").read_text()
    assert page.count("<svg") == 2 and 'id="plot-ratios"' in page and 'id="significant"' in page


def test_real_pair_of_releases(tmp_path: Path):
    """0.14.0 and master ran the same workload: every kernel is matched (its name's programs by key, copies by
    name), the marker stretches line up, and nothing is new or vanished."""
    (a, ra), (b, rb) = unpack("0.14.0-null-multi", tmp_path), unpack("master-null-multi", tmp_path)
    base, pr = vizexport.load_profile(a), vizexport.load_profile(b)
    d = vizexport.api.diff(base, pr, vizexport.load_rewrites(ra), vizexport.load_rewrites(rb))
    assert (d.base.release, d.pr.release) == ("0.14.0", "master") and d.base.launches == d.pr.launches == 21
    # per name and device: 9 programs of 4 kernels, and the two copy directions (no program keys)
    assert Counter(k.match for k in d.kernels) == {BY_PROGRAM: 4, BY_NAME: 2}
    assert all(" -> " in k.name for k in d.kernels if k.match == BY_NAME)
    assert [i.name for i in d.intervals] == ["start → copies done", "copies done → jit done", "jit done → end"]
    assert [(t.name, t.launches_before, t.launches_after) for t in d.devices] == [
        ("NULL", 7, 7), ("NULL:1", 8, 8), ("NULL:SDMA:0", 5, 5), ("NULL:1:SDMA:0", 1, 1)]
    for k in d.kernels:
        assert k.verdict in NOT_SIGNIFICANT
        assert k.method == PAIRED or k.ratio == k.median_after_ns / k.median_before_ns
    # 5 or 6 launches a side, launched alike: paired, and their intervals (e.g. +2% … +81%) do not bound the change
    # within ±5% — inconclusive, not unchanged (their programs read "unchanged" before, p = 0.11 and 0.24: not
    # significant is not unchanged)
    paired = [k for k in d.kernels if k.method == PAIRED]
    assert [(k.launches_before, k.verdict) for k in paired] == [(6, INCONCLUSIVE), (5, INCONCLUSIVE), (6, INCONCLUSIVE)]
    assert all(k.low is not None and k.high is not None and k.high > 1.05 for k in paired)


def test_real_pair_across_naming_schemes(tmp_path: Path):
    """0.12 names repeated kernels r_…n1, n2 …, master tells them apart by program: kernels of one name match,
    the renamed ones are new and vanished — and the totals still add up."""
    (a, ra), (b, rb) = unpack("0.12.0-null-train", tmp_path), unpack("master-null-train", tmp_path)
    d = vizexport.api.diff(vizexport.load_profile(a), vizexport.load_profile(b), vizexport.load_rewrites(ra),
                           vizexport.load_rewrites(rb))
    count = Counter(k.verdict for k in d.kernels)
    assert count[NEW] and count[VANISHED] and all(k.match == BY_NAME for k in d.kernels if k.verdict not in
                                                  (NEW, VANISHED))
    assert sum(k.launches_before for k in d.kernels) == d.base.launches == 81
    assert sum(k.launches_after for k in d.kernels) == d.pr.launches == 88
    assert any(k.name == "r_8_32_16n3" for k in d.kernels if k.verdict == VANISHED)


def test_bad_inputs(train: dict, tmp_path: Path):
    r = run_cli("diff", train["rewrites"], train["base"])
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not a profile" in r.stderr
    r = run_cli("diff", train["base"], train["base"], "-o", tmp_path / "d.txt")
    assert r.returncode == 1 and "unknown output format" in r.stderr and not (tmp_path / "d.txt").exists()
    r = run_cli(train["base"], "-o", tmp_path / "t.json", "--baseline", train["base"])
    # a usage error since --baseline on a trace is refused before reading (exit 2)
    assert r.returncode == 2 and "--baseline shapes a site" in r.stderr and not (tmp_path / "t.json").exists()


def test_stats_reach():
    """The exact two-sided U test cannot reject at 5% with 3 launches a side (smallest p = 0.1), can with 4; a
    single launch on one side is never enough."""
    assert not reachable(3, 3, 0.05) and reachable(4, 4, 0.05) and reachable(2, 8, 0.05)
    assert not reachable(1, 100, 0.05) and not reachable(2, 4, 0.05)


def test_site_with_baseline_in_browser(train: dict, tmp_path: Path):
    """`-o site/ --baseline BASE.pkl`: index links the report and the diff; both pages load without console
    errors, their plots are laid out, their tables sort (screenshots under test-output/answers/)."""
    site = tmp_path / "site"
    r = run_cli(train["slow"], "-o", f"{site}/", "--baseline", train["base"], "--peak-gbs", "20")
    assert r.returncode == 0, r.stderr
    index = (site / "index.html").read_text()
    assert 'href="report.html"' in index and 'href="diff.html"' in index and "1 slower" in index
    if SHOTS.exists():
        shutil.rmtree(SHOTS)
    result = browser_check(site, SHOTS)
    assert {p: v["errors"] for p, v in result["pages"].items() if v["errors"]} == {}
    assert result["brokenLinks"] == []
    report, diff = result["answers"]["report.html"], result["answers"]["diff.html"]
    assert [p["id"] for p in diff["plots"]] == ["plot-ratios", "plot-totals"]
    assert {"plot-busy", "plot-spread", "plot-histograms", "plot-latency", "plot-batches"} <= {p["id"] for p in
                                                                                               report["plots"]}
    for p in report["plots"] + diff["plots"]:
        assert p["width"] > 300 and p["height"] > 80 and p["texts"] > 5  # drawn, with its labels as text
    for page in (report, diff):
        assert page["sorted"] == sorted(page["sorted"], reverse=True) and len(page["sorted"]) > 5
    assert diff["sections"][:2] == ["summary", "significant"]
    for shot in ("report.png", "diff.png", "index.png"):
        assert (SHOTS / shot).stat().st_size > 20_000
