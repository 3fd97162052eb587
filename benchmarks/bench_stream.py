"""The streaming load against the whole-file load of one big profile (default 5,000,000 events, ~380 MB: both fit in
memory), in fresh child processes, alternated; medians of --repeat runs, with peak RSS. With --baseline, another
checkout's streaming load too (e.g. the code before a change), alternated with these.

Target (issue 21): the streaming reader is no slower per event than the whole load.

Usage: python benchmarks/bench_stream.py [--events N] [--workdir DIR] [--repeat K] [--baseline DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from bench_load import ROOT, venv_python

CHILD = """
import json, resource, sys, time
from vizexport.tinygrad import profile
if sys.argv[2] == "whole":
    profile.STREAM_MIN_BYTES = 1 << 62
t = time.perf_counter()
prof = profile.load_profile(sys.argv[1])
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "events": prof.n_events}))
"""


def load(code: Path, profile: Path, how: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), sysconfig.get_paths()["purelib"]])}
    r = subprocess.run([sys.executable, "-S", "-c", CHILD, str(profile), how], capture_output=True, text=True,
                       check=True, env=env, cwd=tempfile.gettempdir())
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    ap.add_argument("--source", type=Path, default=ROOT / "vizexport" / "data" / "sample" / "profile.pkl")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another vizexport checkout: its streaming load as well")
    a = ap.parse_args()
    big = a.workdir / f"profile_{a.events}.pkl"
    if not big.exists():
        a.workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run([venv_python("0.14.0"), str(ROOT / "benchmarks" / "make_big_profile.py"), str(a.source),
                        str(a.events), str(big)], check=True)
    runs = {"streamed": (ROOT, "stream"), "whole": (ROOT, "whole")}
    if a.baseline:
        runs["baseline streamed"] = (a.baseline, "stream")
    got: dict[str, list[dict]] = {k: [] for k in runs}
    for _ in range(a.repeat):
        for name, (code, how) in runs.items():
            got[name].append(load(code, big, how))
    print(f"profile: {big} ({got['whole'][0]['events']:,} events, {big.stat().st_size / 1e6:.0f} MB), "
          f"medians of {a.repeat}, alternated")
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in got.items()}
    for name, rs in got.items():
        secs = ", ".join(f"{r['seconds']:.1f}" for r in rs)
        print(f"  {name:18} {med[name]:6.1f} s ({secs})  peak RSS {max(r['rss'] for r in rs) / 2**30:.2f} GiB")
    print(f"  streamed / whole: {med['streamed'] / med['whole']:.2f}x per event (target <= 1.00x)")
    if a.baseline:
        print(f"  baseline streamed / streamed: {med['baseline streamed'] / med['streamed']:.2f}x")


if __name__ == "__main__":
    main()
