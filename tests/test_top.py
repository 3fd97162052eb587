"""`vizexport top`: per kernel and device, the totals and launch counts each release's OWN viewer shows (the corpus'
figures.json.gz, and tests/data/top_expected.json made by tools/top_figures.py for the fixtures and the sample);
`--between` keeps exactly the launches the viewer starts between the two markers; statistics and outputs."""
from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

import vizexport
from vizexport.analysis import kernel_table, tables
from vizexport.analysis.top import launch_tracks
from vizexport.launchtable import LaunchRows, LaunchTableBuilder
from vizexport.timeline import Role, Timeline

from . import tinyfake as tf
from .conftest import FIXTURES, ROOT, run_cli
from .test_corpus import COMPARE, SETS

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"
EXPECTED = json.loads((ROOT / "tests" / "data" / "top_expected.json").read_text())
HOST = ("TINY", "USER", "GC")
PROFILE_SETS = [d for d in SETS if (d / "profile.pkl.gz").exists()]
MARKER_SETS = [d for d in PROFILE_SETS if d.name.endswith(("-multi", "-meta")) and not d.name.startswith("0.11")]


def load_set(folder: Path, tmp: Path) -> tuple[vizexport.Profile, vizexport.RewriteLog | None]:
    prof = COMPARE.materialize(folder / "profile.pkl.gz", tmp)
    log = COMPARE.materialize(folder / "rewrites.pkl.gz", tmp)
    return vizexport.load_profile(prof), vizexport.load_rewrites(log) if log else None


def viewer_totals(tracks: dict, window: tuple[float, float] | None = None) -> dict:
    """(track, name) → [launches, Σ dur µs] of the viewer's device events (starting inside `window`, µs)."""
    out: dict = defaultdict(lambda: [0, 0.0])
    for track, events in tracks.items():
        if track in HOST:
            continue
        for e in events:
            if window is None or window[0] <= e[1] <= window[1]:
                row = out[(track, COMPARE.plain(e[0]))]
                row[0] += 1
                row[1] += e[2]
    return dict(out)


def top_totals(table: vizexport.analysis.KernelTable) -> dict:
    """(device, name) → [launches, Σ dur µs], programs of one name summed as the viewer sums them (JIT graph batches
    too: the viewer draws them on their graph track)."""
    out: dict = defaultdict(lambda: [0, 0.0])
    for k in table.kernels + table.batches:
        out[(k.device, k.name)][0] += k.launches
        out[(k.device, k.name)][1] += k.total_ns / 1e3
    return dict(out)


def assert_same_totals(view: dict, mine: dict) -> None:
    assert set(view) == set(mine)
    for key, (n, total) in view.items():
        assert mine[key][0] == n, key
        # the viewer's durations are float32 µs: the corpus comparison's tolerance for each launch
        assert abs(mine[key][1] - total) <= n * max(COMPARE.DUR_TOL_US, COMPARE.DUR_TOL_REL * total), key


@pytest.mark.parametrize("folder", PROFILE_SETS, ids=[d.name for d in PROFILE_SETS])
def test_totals_equal_the_release_viewer_on_the_corpus(folder: Path, tmp_path: Path):
    import gzip
    view = json.loads(gzip.decompress((folder / "figures.json.gz").read_bytes()))["profile"]
    prof, log = load_set(folder, tmp_path)
    table = kernel_table(vizexport.build_timeline(prof, log))
    assert_same_totals(viewer_totals(view["tracks"]), top_totals(table))
    assert sum(k.share for k in table.kernels if k.device == "NULL") == pytest.approx(100) or "NULL" not in {
        k.device for k in table.kernels}


FIXTURE_KEYS = sorted(k for k in EXPECTED if k != "sample/profile.pkl")


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_totals_equal_the_release_viewer_on_the_fixtures(key: str):
    path = FIXTURES / key
    if not path.exists():
        pytest.skip(f"../shared/fixtures/{key} not present")
    rewrites = path.with_name("rewrites.pkl")
    log = vizexport.load_rewrites(rewrites) if rewrites.exists() else None
    table = vizexport.kernel_table(vizexport.load_profile(path), log)
    exp = EXPECTED[key]
    if exp["tinygrad"] is None:  # 0.10.x: no viewer draws a profile, and it holds no device work
        assert not table.kernels and ("No module named 'tinygrad.viz'" in json.dumps(exp["reason"])
                                      or "has no get_profile" in json.dumps(exp["reason"]))
        return
    assert_same_totals(viewer_totals(exp["tracks"]), top_totals(table))


def test_totals_equal_the_release_viewer_on_the_sample():
    table = vizexport.kernel_table(vizexport.load_profile(SAMPLE / "profile.pkl"),
                                   vizexport.load_rewrites(SAMPLE / "rewrites.pkl"))
    assert_same_totals(viewer_totals(EXPECTED["sample/profile.pkl"]["tracks"]), top_totals(table))
    assert [(k.device, k.label, k.launches) for k in table.kernels[:3]] == [
        ("NULL", "E_4_4 [ff2977df]", 4), ("NULL:1:SDMA:0", "NULL:1 -> NULL", 4), ("NULL", "E_4_4 [50e19497]", 4)]
    assert [(k.device, k.label, k.launches, k.share) for k in table.batches] == [("NULL Graph", "batched 5", 3, 100)]


# ---- --between ----

def marker_pairs(markers: list) -> list[tuple[str, str, int, int]]:
    """Consecutive pairs of distinct marker names, each at its first occurrence (µs), as tinygrad picks them."""
    first: dict[str, int] = {}
    for name, ts in markers:
        first.setdefault(name, ts)
    names = sorted(first, key=first.__getitem__)
    return [(a, b, first[a], first[b]) for a, b in pairwise(names)]


def check_between(table_of, tracks: dict, markers: list) -> int:
    """Compare every marker pair's selection with the viewer's events starting between the markers (its µs are
    truncated, so a pair with a launch starting within 1 µs of a marker is not decidable and left out)."""
    checked = 0
    for a, b, ta, tb in marker_pairs(markers):
        starts = [e[1] for t, evs in tracks.items() if t not in HOST for e in evs]
        if any(abs(s - m) <= 1 for s in starts for m in (ta, tb)):
            continue
        view = viewer_totals(tracks, (ta, tb))
        assert_same_totals(view, top_totals(table_of((a, b))))
        checked += sum(n for n, _ in view.values())
    return checked


@pytest.mark.parametrize("folder", MARKER_SETS, ids=[d.name for d in MARKER_SETS])
def test_between_selects_the_launches_between_two_markers_corpus(folder: Path, tmp_path: Path):
    import gzip
    view = json.loads(gzip.decompress((folder / "figures.json.gz").read_bytes()))["profile"]
    prof, log = load_set(folder, tmp_path)
    tl = vizexport.build_timeline(prof, log)
    assert len(marker_pairs(view["markers"])) >= 1
    checked = check_between(lambda pair: kernel_table(tl, between=pair), view["tracks"], view["markers"])
    assert checked > 0 or not viewer_totals(view["tracks"])  # 0.14+ CPU sets: the viewer draws no device work


def test_between_on_the_sample_and_fixtures():
    prof, log = vizexport.load_profile(SAMPLE / "profile.pkl"), vizexport.load_rewrites(SAMPLE / "rewrites.pkl")
    exp = EXPECTED["sample/profile.pkl"]
    # 'jit step 0'..'symbolic done': the decidable pairs hold 21 launches in all (graph batches included)
    assert check_between(lambda pair: vizexport.kernel_table(prof, log, pair), exp["tracks"], exp["markers"]) == 21
    for key in ("tinygrad/0.14.0-null/profile.pkl", "tinygrad/0.13.0-null/profile.pkl"):
        if (FIXTURES / key).exists():
            p = vizexport.load_profile(FIXTURES / key)
            assert check_between(lambda pair, p=p: vizexport.kernel_table(p, None, pair), EXPECTED[key]["tracks"],
                                 EXPECTED[key]["markers"]) > 0


def test_between_bounds_are_inclusive_and_by_start():
    """A launch starting exactly at the end marker is in, one starting a nanosecond after it is out."""
    prof = vizexport.load_profile(SAMPLE / "profile.pkl")
    tl = vizexport.build_timeline(prof)
    table = kernel_table(tl, between=("jit step 1", "jit step 3"))
    a, b = table.window
    starts = [(t, i) for t in launch_tracks(tl) for i in range(len(t)) if t.dur[i] > 0]
    inside = [(t, i) for t, i in starts if a <= t.ts[i] <= b]
    assert sum(k.launches for k in table.kernels + table.batches) == len(inside) == 12
    # moving the window's end onto a launch's start keeps it; one ns earlier drops it
    t, i = max(inside, key=lambda x: x[0].ts[x[1]])
    tl_markers = next(m for m in tl.tracks if m.name == "Markers")
    end = tl_markers.names[[tl.strings[n] for n in tl_markers.names].index("jit step 3")]
    j = list(tl_markers.names).index(end)
    for shift, kept in ((t.ts[i] - b, 12), (t.ts[i] - b - 1, 11)):
        tl_markers.ts[j] = b + shift
        kept_table = kernel_table(tl, between=("jit step 1", "jit step 3"))
        assert sum(k.launches for k in kept_table.kernels + kept_table.batches) == kept
    tl_markers.ts[j] = b


def test_between_errors_name_the_file_and_the_markers():
    r = run_cli("top", SAMPLE / "profile.pkl", "--between", "jit step 1", "no such marker")
    assert r.returncode == 1 and not r.stdout
    assert "profile.pkl: no marker named 'no such marker' (markers: 'jit step 0', 'jit step 1'" in r.stderr
    r = run_cli("top", SAMPLE / "profile.pkl", "--between", "jit step 3", "jit step 1")
    assert r.returncode == 1 and "marker 'jit step 1' comes before marker 'jit step 3'" in r.stderr


# ---- statistics and outputs ----

def test_statistics_of_each_kernel_are_those_of_its_launches():
    tl = vizexport.build_timeline(vizexport.load_profile(SAMPLE / "profile.pkl"),
                                  vizexport.load_rewrites(SAMPLE / "rewrites.pkl"))
    table = kernel_table(tl)
    durs: dict = defaultdict(list)
    for t in launch_tracks(tl):
        for i in range(len(t)):
            if t.dur[i] > 0:
                args = t.args.get(i, {})
                durs[(t.name, args.get("profile_key") or tl.strings[t.names[i]])].append(t.dur[i])
    assert len(table.kernels) + len(table.batches) == len(durs) == 9 and len(table.batches) == 1
    for k in table.kernels + table.batches:
        d = np.array(durs[(k.device, k.program or k.name)])
        assert (k.launches, k.total_ns, k.min_ns, k.max_ns) == (len(d), d.sum(), d.min(), d.max())
        assert k.median_ns == np.median(d) and k.p90_ns == np.percentile(d, 90) and k.mean_ns == d.mean()
    by_dev: dict = defaultdict(float)
    for k in table.kernels + table.batches:
        by_dev[k.device] += k.share
    assert all(v == pytest.approx(100) for v in by_dev.values()) and "NULL Graph" not in table.device_ns
    r = next(k for k in table.kernels if k.name == "r_32_32_32")
    # tinygrad -t: 25 GFLOPS, 2 GB/s mem, 50 GB/s lds
    assert (r.category, round(r.gflops, 1), round(r.gbs, 2), round(r.gbs_lds, 1)) == ("reduce", 24.9, 1.56, 49.9)
    assert {k.category for k in table.kernels} == {"elementwise", "copy", "reduce"}
    assert {k.category for k in table.batches} == {"graph batch"}


def test_device_filter_and_rows():
    prof = vizexport.load_profile(SAMPLE / "profile.pkl")
    assert {k.device for k in vizexport.kernel_table(prof, device="NULL:1").kernels} == {"NULL:1", "NULL:1:SDMA:0"}
    assert {k.device for k in vizexport.kernel_table(prof, device="NULL:1:SDMA:0").kernels} == {"NULL:1:SDMA:0"}
    table = vizexport.kernel_table(prof)
    rows, other = table.top(3)
    assert len(rows) == 3 and other.launches == sum(k.launches for k in table.kernels[3:]) == 12
    r = run_cli("top", SAMPLE / "profile.pkl", "--device", "AMD")
    assert r.returncode == 1 and "no launches on device 'AMD' (devices: NULL, NULL:1, NULL:1:SDMA:0" in r.stderr


def test_cli_text_json_csv():
    args = (SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl")
    text = run_cli("top", *args, "-n", "4")
    assert text.returncode == 0 and "\x1b[" not in text.stdout  # piped: no ANSI codes
    lines = text.stdout.splitlines()
    assert lines[0] == "8 kernels, 24 launches" and lines[1].split()[:4] == ["device", "kernel", "total", "launches"]
    # 16 FLOPs a launch over 4.930 µs on average: 0.00325 GFLOPS (from the launches' rates rounded, 0.00295)
    assert lines[2] == ("NULL          E_4_4 [ff2977df]  19.720 µs        4  41.76%   4.930 µs  0.00325    0.026"
                        "    0.026  elementwise")
    assert lines[6].split()[:4] == ["Other", "29.258", "µs", "8"]  # 17.012 + 6.729 + 2.803 + 2.714 µs
    assert lines[-3:] == ["JIT graph batches: 3 runs (each entry is a launch of its device above too: not counted "
                          "again)",
                          "graph      batch                 total runs   share       mean",
                          "NULL Graph batched 5         30.000 µs    3 100.00%  10.000 µs"]
    assert max(map(len, lines)) <= tables.WIDTH
    data = json.loads(run_cli("top", *args, "--json").stdout)
    assert len(data["kernels"]) == 8 and data["other"] is None and len(data["batches"]) == 1
    assert sum(k["total_ns"] for k in data["kernels"] if k["device"] == "NULL") == data["device_ns"]["NULL"]
    rows = list(csv.DictReader(io.StringIO(run_cli("top", *args, "--csv").stdout)))
    assert [r["name"] for r in rows] == [k["name"] for k in data["kernels"] + data["batches"]]
    rows = rows[:-1]  # the batch
    assert rows[-1]["gflops"] and math.isclose(float(rows[-1]["gflops"]), data["kernels"][-1]["gflops"])
    between = json.loads(run_cli("top", *args, "--json", "--between", "jit step 1", "jit step 3").stdout)
    assert between["between"]["start"] == "jit step 1"
    assert sum(k["launches"] for k in between["kernels"] + between["batches"]) == 12


def test_text_colours_only_when_asked():
    table = vizexport.kernel_table(vizexport.load_profile(SAMPLE / "profile.pkl"))
    assert "\x1b[" not in tables.as_text(table) and "\x1b[1m" in tables.as_text(table, color=True)


@pytest.mark.parametrize("key", ["sample", "tinygrad/0.13.0", "tinygrad/0.12.0"])
def test_each_kernel_finds_the_program_that_made_it(key: str):
    """By profile_key on 0.14+ (the sample), by name before (0.12, 0.13): the context whose UOps decide a category."""
    folder = SAMPLE if key == "sample" else FIXTURES / key
    if not folder.exists():
        pytest.skip(f"{folder} not present")
    prof, log = vizexport.load_profile(folder / "profile.pkl"), vizexport.load_rewrites(folder / "rewrites.pkl")
    table = vizexport.kernel_table(prof, log)
    index = vizexport.analysis.ProgramIndex(log.contexts)
    kernels = [k for k in table.kernels if k.category not in ("copy", "graph batch")]
    assert kernels and all(k.program for k in kernels) == (key == "sample")
    for k in kernels:
        ctx = log.contexts[index.find(bytes.fromhex(k.program) if k.program else None, k.name)]
        assert ctx.key.name == k.name and ctx.program
    # the linked program's UOps reach the category: a WMMA among them makes the kernel a tensor-core matmul
    ctx = log.contexts[index.find(bytes.fromhex(kernels[0].program) if kernels[0].program else None,
                                  kernels[0].name)]
    ctx.program = [*ctx.program, "  99 Ops.WMMA              dtypes.float.vec(8)   [1, 2, 3]   x"]
    row = next(k for k in vizexport.kernel_table(prof, log).kernels if (k.device, k.program, k.name) == (
        kernels[0].device, kernels[0].program, kernels[0].name))
    assert row.category == "matmul (tensor cores)"


# ---- --by name, --host, --wide, widths, rates from totals, the untimed note ----

def test_by_name_sums_a_names_programs_and_host_lists_the_host_spans():
    prof, log = vizexport.load_profile(SAMPLE / "profile.pkl"), vizexport.load_rewrites(SAMPLE / "rewrites.pkl")
    by_program = kernel_table(vizexport.build_timeline(prof, log))
    by_name = kernel_table(vizexport.build_timeline(prof, log), by="name")
    null = [k for k in by_program.kernels if (k.device, k.name) == ("NULL", "E_4_4")]
    (e44,) = [k for k in by_name.kernels if (k.device, k.name) == ("NULL", "E_4_4")]
    assert len(null) == 2 and e44.program is None and e44.label == "E_4_4"
    assert e44.launches == sum(k.launches for k in null) == 8 and e44.total_ns == sum(k.total_ns for k in null)
    assert e44.share == pytest.approx(sum(k.share for k in null))
    host = kernel_table(vizexport.build_timeline(prof, log), host=True)
    assert host.host and not host.batches and set(host.device_ns) == {"TINY", "USER"}
    first = host.kernels[0]
    assert (first.device, first.name, first.launches) == ("USER", "realize", 12)
    with pytest.raises(ValueError, match="no grouping 'kernel'"):
        kernel_table(vizexport.build_timeline(prof, log), by="kernel")


def test_cli_host_wide_and_widths(tmp_path: Path):
    text = run_cli("top", SAMPLE / "profile.pkl", "--host", "--device", "TINY", "-n", "2")
    lines = text.stdout.splitlines()
    assert text.returncode == 0 and lines[0].startswith("95 host span names, 539 spans (nested spans count whole")
    assert lines[2].split()[:5] == ["TINY", "do_to_program", "for", "r_32_32_32", "273.021"]
    assert lines[-1] == "TINY: 1.613 s summed" and not any(x.startswith("note:") for x in lines)
    r = run_cli("top", SAMPLE / "profile.pkl", "--host", "--device", "NULL")
    assert r.returncode == 1 and "no spans on host track 'NULL' (tracks: TINY, USER)" in r.stderr
    wide = run_cli("top", SAMPLE / "profile.pkl", "--wide").stdout.splitlines()
    assert wide[1].split()[6:10] == ["median", "p90", "min", "max"] and max(map(len, wide)) > tables.WIDTH
    # a long name is cut in its middle, keeping its program key, so that the row fits
    key = "ab" * 16
    name = "r_" + "_".join(["1024"] * 30)
    events = [tf.span("NULL", name, 1.0 + i, 1.5 + i, profile_key=bytes.fromhex(k))
              for i, k in enumerate((key, key[::-1]))]
    (tmp_path / "p.pkl").write_bytes(tf.profile(*events))
    lines = run_cli("top", tmp_path / "p.pkl").stdout.splitlines()
    assert max(map(len, lines)) <= tables.WIDTH and lines[2].split()[1].startswith("r_1024_1024")
    assert "…" in lines[2] and f"[{key[:8]}]" in lines[2]
    whole = run_cli("top", tmp_path / "p.pkl", "--wide").stdout
    assert f"{name} [{key[:8]}]" in whole


def test_rates_come_from_the_launches_work_not_their_rounded_rates():
    """A 52 ms launch of 10,000 FLOPs: 0.000192 GFLOPS, which its rounded rate (0.0) would show as 0."""
    tl = Timeline("t")
    q = tl.add_track("CPU", tl.add_track("CPU", None, "group", Role.DEVICE), "slice", Role.QUEUE)
    for i, dur in enumerate((52_000_000, 8_000_000)):
        q.ts.append(i * 10**8)
        q.dur.append(dur)
        q.names.append(tl.intern("E_4"))
        q.args[i] = {"GFLOPS": 0.0, "GB/s mem": 0.001}  # rounded for display: the rates are not made of them
    table = LaunchTableBuilder()
    table.add(q.uuid, LaunchRows(np.array(q.ts, np.int64), np.array(q.dur, np.int64), np.array(q.names, np.int32),
                                 [None, None], np.zeros(2, np.int8), np.array([1e4, np.nan]),
                                 np.array([4e4, np.nan]), np.array([np.nan, np.nan])))
    tl.launches = table.table([q.uuid])
    (k,) = kernel_table(tl).kernels
    # over all 60 ms, as viz.cli -t: the second launch (no estimates) adds its time, no work
    assert k.gflops == pytest.approx(1e4 / 60e6) and k.gbs == pytest.approx(4e4 / 60e6)
    assert k.gbs_lds is None and k.category == "elementwise"
    row = tables.as_text(vizexport.analysis.KernelTable([k], {"CPU": k.total_ns})).splitlines()[2]
    assert row.split()[8:11] == ["0.000167", "0.000667", "-"]


def test_note_says_why_launches_are_missing(tmp_path: Path):
    from .answers import unpack
    prof, rewrites = unpack("0.14.0-cpu-sym", tmp_path)
    r = run_cli("top", prof, rewrites)
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "0 kernels, 0 launches"
    assert json.loads(run_cli("top", prof, rewrites, "--json").stdout)["note"].endswith("(run with HCQ2=1)")
    lines = r.stdout.splitlines()
    assert lines[-2:] == ["note: not timed on the device: launches the host made (exec events: CPU 12); tinygrad "
                          "0.14.0 times CPU kernels only on", "  its HCQ2 path (run with HCQ2=1)"]
    assert max(map(len, lines)) <= tables.WIDTH
    (tmp_path / "host.pkl").write_bytes(tf.profile(tf.span("TINY", "schedule", 1.0, 2.0)))
    r = run_cli("top", tmp_path / "host.pkl")
    assert r.stdout.splitlines()[-1] == "note: no device launches: the profile holds no work timed on a device"
    assert "note:" not in run_cli("top", SAMPLE / "profile.pkl").stdout
