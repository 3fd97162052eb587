"""Convert a very large profile (default 20,000,000 events) and print time and peak memory.

The target (issue 3): a 20M-event profile converts on a 24 GiB, 2-core machine with peak RSS <= 8 GiB; tinygrad's own
loader needs ~19 GiB just to unpickle it. The profile is made once by benchmarks/make_big_profile.py (incrementally,
in a tinygrad 0.14.0 venv). Runs `vizexport PROFILE -o OUT.pftrace` in a fresh child process and reports the
child's peak RSS (ru_maxrss of the converting process; the writer's forked encoders are reported separately).

Usage: python benchmarks/bench_big.py [--events N] [--workdir DIR]
"""
import argparse
import json
import subprocess
from pathlib import Path

from bench_load import ROOT, venv_python
from bench_windows import convert


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--source", type=Path, default=ROOT / "vizexport" / "data" / "sample" / "profile.pkl")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    big = a.workdir / f"profile_{a.events}.pkl"
    if not big.exists():
        subprocess.run([venv_python("0.14.0"), str(ROOT / "benchmarks" / "make_big_profile.py"), str(a.source),
                        str(a.events), str(big)], check=True)
    out = a.workdir / f"trace_{a.events}.pftrace"
    from vizexport.windows import WINDOW_EVENTS
    r = convert(big, out, WINDOW_EVENTS)  # as `vizexport PROFILE -o OUT.pftrace` does by default
    gib = 2**30
    print(f"profile: {big} ({a.events:,} events, {big.stat().st_size / 1e9:.2f} GB)")
    print(f"  vizexport → {out.name}: {r['seconds']:.1f} s, peak RSS {r['rss'] / gib:.2f} GiB "
          f"({r['rss'] / a.events:.0f} B/event; target ≤ 8 GiB), encoder workers {r['workers_rss'] / gib:.2f} GiB, "
          f"output {out.stat().st_size / 1e6:.1f} MB")
    print(json.dumps({**r, "events": a.events}))


if __name__ == "__main__":
    main()
