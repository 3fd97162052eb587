"""Replay engines side by side: seconds to replay every step of every rewrite with the reference engine (each step
substituted into the whole graph, as tinygrad's viewer does) and with the speed-ups of replay.Engine, each one
left out in turn, and all together (the default).

Usage: python benchmarks/bench_replay.py [REWRITES.pkl ...] [--repeat N]

Without files it runs the largest rewrites fixture (../shared/fixtures/tinygrad/0.14.0-hcq2) and the MLP and
training-step traces of tinygrad 0.14.0 on the NULL device when tools/make_training_trace.py has made them.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import vizexport  # noqa: E402
from vizexport.tinygrad.replay import FAST, REFERENCE, Engine, Nodes, Replayer  # noqa: E402

BIGGEST = ROOT.parent / "shared" / "fixtures" / "tinygrad" / "0.14.0-hcq2" / "rewrites.pkl"
ENGINES = {"reference": REFERENCE, "no clean": Engine(clean=False), "no memo": Engine(memo=False),
           "no fast path": Engine(fast_path=False), "all (default)": FAST}


def made_traces() -> list[Path]:
    from make_training_trace import BENCH
    return [p for p in (BENCH / "mlp-null" / "rewrites.pkl", BENCH / "training-null" / "rewrites.pkl") if p.exists()]


def replay_all(log: vizexport.RewriteLog, engine: Engine) -> tuple[float, int]:
    """Seconds to replay every rewrite of every context (one session per context, as the writers do), and steps."""
    steps = 0
    t0 = time.perf_counter()
    for ctx in log.contexts:
        r = Replayer(Nodes(log), engine)
        for rw in ctx.rewrites:
            steps += len(r.replay(rw).steps)
    return time.perf_counter() - t0, steps


def bench(path: Path, repeat: int) -> None:
    log = vizexport.load_rewrites(path)
    print(f"{path}  ({len(log.contexts)} contexts)")
    base = None
    for name, engine in ENGINES.items():
        secs, steps = min(replay_all(log, engine) for _ in range(repeat))
        base = base or secs
        print(f"  {name:14s} {secs:8.2f} s  {steps:8,} steps  {base / secs:5.1f}x the reference", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per engine")
    args = ap.parse_args()
    for f in args.files or [p for p in (BIGGEST,) if p.exists()] + made_traces():
        bench(f, args.repeat)


if __name__ == "__main__":
    main()
