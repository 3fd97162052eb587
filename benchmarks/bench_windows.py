"""A very large run written as one trace and as overview + windows, side by side; then each window and the overview
loaded in the real Perfetto UI (perfetto-check's tpqmem: load seconds, browser memory, error stats), in the 64-bit
and the 32-bit engine.

Usage: python benchmarks/bench_windows.py [--events N] [--workdir DIR] [--no-ui] [--skip-single] [--baseline DIR]
                                        [--repeat K]

The profile is made once by benchmarks/make_big_profile.py (bench_big.py does the same). Targets (issue 21): overview
+ windows in <= 0.7x the single trace's conversion time and <= 8 GiB peak RSS; every window and the overview load in
<= 20 s with <= 1 GB more browser memory than a tiny trace; the windows' slices per track add up to the run's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from bench_load import ROOT

TOOLS = ROOT.parent / "shared" / "tools" / "perfetto-check"
CHILD = """
import json, resource, sys, time
from pathlib import Path
from vizexport.cli import convert
t = time.perf_counter()
kw = {} if sys.argv[3] == "0" else {"window_events": int(sys.argv[3])}  # "0": one trace (in any version)
convert([Path(sys.argv[1])], Path(sys.argv[2]), quiet=True, **kw)
dt = time.perf_counter() - t
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": dt, "rss": me.ru_maxrss * 1024, "workers_rss": kids.ru_maxrss * 1024}))
"""
COUNTS = "select t.name as track, count(*) as n from slice s join track t on s.track_id = t.id group by 1"
ERRORS = "select name, value from stats where value > 0 and severity in ('error', 'data_loss')"
GIB = 2**30
SINGLE_TIMEOUT = 1800  # seconds for the whole 20M run as one trace in the UI (430-600+ s here)


def convert(profile: Path, out: Path, window_events: int, code: Path = ROOT) -> dict:
    """Convert in a child process running the vizexport in `code` (-S and another cwd: an editable install of this
    checkout cannot shadow another one)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), sysconfig.get_paths()["purelib"]])}
    r = subprocess.run([sys.executable, "-S", "-c", CHILD, str(profile), str(out), str(window_events)],
                       capture_output=True, text=True, check=True, env=env, cwd=tempfile.gettempdir())
    return json.loads(r.stdout.strip().splitlines()[-1])


def ui_load(trace: Path, engine32: bool = False, timeout: int = 600) -> tuple[int, float, int, list, list]:
    """(exit code, seconds, peak browser-tree MB, per-track slice counts, error stats) of `trace` in the real UI."""
    env = dict(os.environ)
    if engine32:
        env["TPQ_WEB_DIST"] = subprocess.run([str(TOOLS / "web_dist32.sh")], capture_output=True, text=True,
                                             check=True).stdout.strip()
    r = subprocess.run([str(TOOLS / "tpqmem"), "--timeout", str(timeout), str(trace), COUNTS, ERRORS],
                       capture_output=True, text=True, env=env, check=False)
    lines = r.stdout.splitlines()
    rc, secs, mb = lines[0].split()
    rows = [json.loads(x) for x in lines[1:3]] if int(rc) == 0 else [[], []]
    return int(rc), float(secs), int(mb), rows[0], rows[1]


def _median(runs: list[dict]) -> dict | None:
    """The run of median time, of an even count the faster middle one (peak RSS: the largest of any run)."""
    if not runs:
        return None
    mid = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]
    return {**mid, "rss": max(r["rss"] for r in runs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    ap.add_argument("--window-events", type=int, default=0, help="default: vizexport's")
    ap.add_argument("--no-ui", action="store_true")
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="conversions of each kind, alternated (medians)")
    ap.add_argument("--baseline", type=Path, help="another vizexport checkout (e.g. before windows) for the one trace")
    a = ap.parse_args()
    big = a.workdir / f"profile_{a.events}.pkl"
    if not big.exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_big.py"), "--events", str(a.events),
                        "--workdir", str(a.workdir)], check=True)
    from vizexport.windows import WINDOW_EVENTS
    budget = a.window_events or WINDOW_EVENTS
    runs: dict[str, list[dict]] = {"single": [], "mine": [], "split": []}
    for _ in range(a.repeat):  # alternated: this machine's speed drifts over minutes
        if not a.skip_single:
            runs["single"].append(convert(big, a.workdir / f"single_{a.events}.pftrace", 0, a.baseline or ROOT))
            if a.baseline:
                runs["mine"].append(convert(big, a.workdir / f"mine_{a.events}.pftrace", 0, ROOT))
        runs["split"].append(convert(big, a.workdir / f"run_{a.events}.pftrace", budget))
    single, mine, split = (_median(runs[k]) for k in ("single", "mine", "split"))
    mine = mine or single
    spread = "; ".join(f"{k} " + ", ".join(f"{r['seconds']:.1f}" for r in v) + " s" for k, v in runs.items() if v)
    print(f"profile {big} ({a.events:,} events, {big.stat().st_size / 1e9:.2f} GB)"
          + (f"; medians of {a.repeat} runs, alternated: {spread}" if a.repeat > 1 else ""))
    if single:
        print(f"  one trace:          {single['seconds']:7.1f} s, peak RSS {single['rss'] / GIB:.2f} GiB "
              f"({'vizexport at ' + str(a.baseline) if a.baseline else 'this vizexport'}, --no-split)")
    if mine is not single:
        print(f"  one trace:          {mine['seconds']:7.1f} s, peak RSS {mine['rss'] / GIB:.2f} GiB (this vizexport, "
              f"--no-split)")
    print(f"  overview + windows: {split['seconds']:7.1f} s, peak RSS {split['rss'] / GIB:.2f} GiB"
          + (f"  ({split['seconds'] / single['seconds']:.2f}x the one trace's time)" if single else ""))
    if a.no_ui:
        return
    index = json.loads((a.workdir / f"run_{a.events}.windows" / "index.json").read_text())
    tiny = a.workdir / "tiny.pftrace"  # the browser and the UI alone, for comparison
    convert(ROOT / "vizexport" / "data" / "sample" / "profile.pkl", tiny, 0)
    tiny_mb = ui_load(tiny)[2]
    print(f"  a tiny trace: browser {tiny_mb:,} MB")
    totals: dict[str, int] = {}
    traces = [("overview", a.workdir / f"run_{a.events}.pftrace")] + [
        (w["file"], a.workdir / f"run_{a.events}.windows" / w["file"]) for w in index["windows"]]
    for name, path in traces:
        for engine32 in (False, True):
            rc, secs, mb, counts, errors = ui_load(path, engine32)
            print(f"  {name:40} {'32-bit' if engine32 else '64-bit'}: exit {rc}, {secs:5.1f} s, browser "
                  f"{mb:,} MB ({mb - tiny_mb:+,} MB vs tiny), errors {errors}")
            if name != "overview" and not engine32:
                for row in counts:
                    totals[row["track"]] = totals.get(row["track"], 0) + row["n"]
    print("  slices per track over the windows:", json.dumps(totals, sort_keys=True))
    if mine:  # this vizexport's one trace in the 64-bit engine, for its counts (minutes and GBs: why windows)
        rc, secs, mb, counts, errors = ui_load(a.workdir / f"{'mine' if a.baseline else 'single'}_{a.events}.pftrace",
                                               timeout=SINGLE_TIMEOUT)
        want = {row["track"]: row["n"] for row in counts}
        print(f"  one trace: exit {rc}, {secs:.1f} s, browser {mb:,} MB; windows add up to it per track: "
              f"{want == totals}")


if __name__ == "__main__":
    main()
