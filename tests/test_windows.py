"""A trace too big for one browser tab: windows and an overview (windows.py, perfetto/split.py), checked in the real
Perfetto trace processor on real runs cut into many windows."""
from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import vizexport
from vizexport import forks, windows

from . import trace_rules
from .conftest import ROOT, run_cli, tpq

SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"
TRAIN = ROOT / "tests" / "data" / "corpus" / "master-null-train" / "profile.pkl.gz"
SLICES = ("select t.name as track, s.ts as ts, s.dur as dur, s.name as name from slice s "
          "join track t on s.track_id = t.id")
ERRORS = "select name, value from stats where value > 0 and severity in ('error', 'data_loss')"
COUNTERS = ("select t.name as track, c.ts as ts, c.value as value from counter c "
            "join counter_track t on c.track_id = t.id order by 1, 2")


@pytest.fixture(scope="module")
def train_profile(tmp_path_factory) -> Path:
    if not TRAIN.exists():
        pytest.skip("corpus not present")
    out = tmp_path_factory.mktemp("train") / "profile.pkl"
    out.write_bytes(gzip.decompress(TRAIN.read_bytes()))
    return out


@pytest.fixture(scope="module")
def split_run(train_profile: Path, tmp_path_factory) -> tuple[Path, Path]:
    """The training run (3,300 events) written whole and as windows of about 300 events (a dozen windows)."""
    tmp = tmp_path_factory.mktemp("split")
    assert run_cli(train_profile, "-o", tmp / "whole.pftrace", "--no-split").returncode == 0
    r = run_cli(train_profile, "-o", tmp / "run.pftrace", "--window-events", "300")
    assert r.returncode == 0 and "windows in" in r.stdout, r.stderr
    return tmp / "whole.pftrace", tmp / "run.pftrace"


def test_windows_hold_every_slice_once(split_run: tuple[Path, Path]):
    """Each window loads without error; together they hold exactly the whole trace's slices (track, start, duration,
    name: none lost, none twice, a slice crossing a cut whole in the window where it starts); each counter window
    opens with the value in force at its start."""
    whole, run = split_run
    index = json.loads((run.parent / "run.windows" / "index.json").read_text())
    assert len(index["windows"]) >= 8 and index["overview"] == "run.pftrace"
    want, errors = tpq(whole, SLICES, ERRORS)
    assert errors == [] and len(want) > 3000
    got: Counter = Counter()
    whole_counters = tpq(whole, COUNTERS)[0]
    for w in index["windows"]:
        rows, errs, counters = tpq(run.parent / "run.windows" / w["file"], SLICES, ERRORS, COUNTERS)
        assert errs == [] and all(w["start_ns"] <= r["ts"] < w["end_ns"] for r in rows)
        got.update((r["track"], r["ts"], r["dur"], r["name"]) for r in rows)
        for track in {c["track"] for c in counters}:  # the first sample: the whole trace's value at the cut
            first = next(c for c in counters if c["track"] == track)
            before = [c for c in whole_counters if c["track"] == track and c["ts"] <= first["ts"]]
            assert before and before[-1]["value"] == first["value"]
    assert got == Counter((r["track"], r["ts"], r["dur"], r["name"]) for r in want)


def test_delta_time_reaches_the_overview_and_every_window(split_run: tuple[Path, Path], train_profile: Path,
                                                          tmp_path: Path):
    """--delta-time writes the same overview and windows, each decoding to the events of its twin with absolute
    timestamps."""
    _, run = split_run
    r = run_cli(train_profile, "-o", tmp_path / "run.pftrace", "--window-events", "300", "--delta-time")
    assert r.returncode == 0, r.stderr
    index = json.loads((tmp_path / "run.windows" / "index.json").read_text())
    assert index == json.loads((run.parent / "run.windows" / "index.json").read_text())
    files = ["run.pftrace", *(f"run.windows/{w['file']}" for w in index["windows"])]
    for name in files:
        plain = trace_rules.check((run.parent / name).read_bytes())
        delta = trace_rules.check((tmp_path / name).read_bytes(), delta_time=True)
        assert (delta.slices, delta.instants, delta.counters) == (plain.slices, plain.instants, plain.counters), name
    assert len(files) > 8


def test_cuts_fall_at_batches_and_markers(train_profile: Path):
    """Where a JIT graph batch or a marker starts in the second half of a full window, the window ends there."""
    tl = vizexport.build_timeline(vizexport.load_profile(train_profile))
    natural = {int(x) for t in tl.tracks if t.role in windows.NATURAL for x in t.ts}
    times = np.sort(np.concatenate([np.asarray(t.ts) for t in tl.tracks if len(t)]))
    plan = windows.plan(tl, 500)
    assert sum(w.events for w in plan) == len(times) == tl.n_events()
    at_natural = 0
    for w in plan[:-1]:
        a = int(np.searchsorted(times, w.start))
        assert w.events <= 500
        if any(times[a + 250] < x <= times[a + 500] for x in natural):
            assert w.end in natural, w
            at_natural += 1
    assert at_natural >= 1  # (the run has batches and markers where cuts can fall)

def test_overview_keeps_long_slices_and_counts_the_rest(split_run: tuple[Path, Path], train_profile: Path,
                                                         tmp_path: Path):
    """The overview loads without error; per track, its whole slices (the longest) plus the counts of its folded
    summaries equal the whole trace's slices, and each summary names a window of the run."""
    whole, _ = split_run
    tl = vizexport.build_timeline(vizexport.load_profile(train_profile))
    split = vizexport.write_windows(tl, tmp_path / "run.pftrace", 300, overview_slices=400)
    every = Counter(r["track"] for r in tpq(whole, SLICES)[0])
    want = Counter({t: n for t, n in every.items() if not t.endswith(" Buffers")})  # left to the windows
    assert sum(every.values()) - sum(want.values()) > 10
    rows, errors, folded = tpq(split.overview, SLICES, ERRORS, (
        "select t.name as track, a.int_value as n, w.string_value as window from slice s "
        "join track t on s.track_id = t.id join args a on a.arg_set_id = s.arg_set_id "
        "join args w on w.arg_set_id = s.arg_set_id where a.key = 'debug.count' and w.key = 'debug.window'"))
    assert errors == []
    kept = Counter(r["track"] for r in rows if not r["track"].endswith(" · folded"))
    summed: Counter = Counter()
    for f in folded:
        summed[f["track"].removesuffix(" · folded")] += f["n"]
    assert {t: kept[t] + summed[t] for t in want} == dict(want) and not any(t.endswith(" Buffers") for t in kept)
    assert sum(summed.values()) > 1000 and sum(kept.values()) <= 400 + want["Markers"]
    labels = {w.label(split.windows[0].start) for w in split.windows}
    assert {f["window"] for f in folded} <= labels and len({f["window"] for f in folded}) > 3


def _files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


@pytest.mark.skipif(not forks.can_fork(), reason="no fork on this platform")
def test_forked_window_writers_write_the_same_bytes_and_all_or_nothing(train_profile: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """Whole windows (and the overview) written by forked workers are the bytes written here, one by one; a window
    that fails leaves no overview, no folder and an earlier output as it was."""
    from vizexport.perfetto import split
    tl = vizexport.build_timeline(vizexport.load_profile(train_profile))
    here, there = tmp_path / "here", tmp_path / "there"
    monkeypatch.setattr(split, "PARALLEL_MIN", 10**12)
    vizexport.write_windows(tl, here / "run.pftrace", 300)
    monkeypatch.setattr(split, "PARALLEL_MIN", 0)
    got = vizexport.write_windows(tl, there / "run.pftrace", 300)
    assert _files(here) == _files(there) and len(got.windows) >= 8 \
        and not any(name.startswith("run.windows/overview") for name in _files(there))
    before = _files(there)
    cutter = split.Cutter.__call__

    def failing(self, w):
        if w.index == len(got.windows) - 1:
            raise ValueError("disk full")
        return cutter(self, w)
    monkeypatch.setattr(split.Cutter, "__call__", failing)
    with pytest.raises(ValueError, match="disk full"):
        vizexport.write_windows(tl, there / "run.pftrace", 300)
    assert _files(there) == before and sorted(p.name for p in there.iterdir()) == ["run.pftrace", "run.windows"]
    with pytest.raises(ValueError, match="disk full"):
        vizexport.write_windows(tl, tmp_path / "new" / "run.pftrace", 300)
    assert not any((tmp_path / "new").iterdir())


def test_open_at_serves_the_window_holding_that_time(split_run: tuple[Path, Path]):
    _, run = split_run
    index = json.loads((run.parent / "run.windows" / "index.json").read_text())
    w = index["windows"][3]
    at = f"{(w['start_s'] + w['end_s']) / 2:.6f}s"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "vizexport", "open", str(run), "--at", at, "--no-browser",
                             "--port", str(port)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert w["file"] in proc.stdout.readline()
        for _ in range(50):
            try:
                ui = {"Origin": "https://ui.perfetto.dev"}  # the server answers the UI only
                with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/{w['file']}",
                                                                   headers=ui)) as r:
                    assert r.read() == (run.parent / "run.windows" / w["file"]).read_bytes()
                break
            except OSError:
                time.sleep(0.1)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    bad = run_cli("open", run, "--at", "99999s", "--no-browser")
    assert bad.returncode == 1 and "outside the run" in bad.stderr and bad.stderr.count("\n") == 1


def test_small_trace_stays_whole_and_site_lists_windows(tmp_path: Path, train_profile: Path):
    """Below the budget, one trace as before; a site of a big run offers each window (and the overview)."""
    import re
    assert run_cli(SAMPLE, "-o", tmp_path / "s.pftrace").returncode == 0
    assert not (tmp_path / "s.windows").exists()
    r = run_cli(train_profile, "-o", tmp_path / "site/", "--window-events", "1000")
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    files = re.findall(r'class="open-perfetto window" style="[^"]*" data-trace="([^"]+)"', html)
    index = json.loads((tmp_path / "site" / "trace.windows" / "index.json").read_text())
    assert files == [f"trace.windows/{w['file']}" for w in index["windows"]] and len(files) > 2
    assert all((tmp_path / "site" / f).stat().st_size > 0 for f in files)
    assert 'id="open-perfetto" class="open-perfetto" data-trace="trace.pftrace"' in html


def test_trace_processor_gets_the_chosen_window(split_run: tuple[Path, Path], tmp_path: Path):
    """--trace-processor runs `PATH --httpd TRACE` on the window asked for (here PATH is a script that records its
    command line: no native trace processor can be fetched on this machine) and returns its exit status."""
    _, run = split_run
    record = tmp_path / "argv.json"
    tool = tmp_path / "trace_processor"
    tool.write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    tool.chmod(0o755)
    r = run_cli("open", run, "--window", "2", "--trace-processor", tool, "--no-browser")
    index = json.loads((run.parent / "run.windows" / "index.json").read_text())
    assert r.returncode == 0, r.stderr
    assert json.loads(record.read_text()) == ["--httpd", str(run.parent / "run.windows" / index["windows"][2]["file"])]
    missing = run_cli("open", run, "--trace-processor", tmp_path / "nope", "--no-browser")
    assert missing.returncode == 1 and "cannot run" in missing.stderr and missing.stderr.count("\n") == 1
