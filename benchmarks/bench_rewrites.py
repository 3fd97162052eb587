"""Rewrite trace → SVG step sequences with the default policy: SVGs per second, total seconds, cap hits.

Usage: python benchmarks/bench_rewrites.py [REWRITES.pkl ...] [--jobs N] [--max-nodes N] [--all-steps] [--matches N]
       [--keep DIR]

Without files it runs the largest rewrites fixture (../shared/fixtures/tinygrad/0.14.0-hcq2) and a training-step
trace of tinygrad 0.14.0 on the NULL device (made once by tools/make_training_trace.py, ~49,000 matches). The goal
(issue 5) is a 40k-match trace in under 2 minutes on 2 cores: `python benchmarks/bench_rewrites.py --matches 40000`
renders the first contexts of the training trace up to 40,000 matches.
"""
from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import vizexport.api  # noqa: E402 (the package face is lazy: the API loads here, not in the timed load)

BIGGEST = ROOT.parent / "shared" / "fixtures" / "tinygrad" / "0.14.0-hcq2" / "rewrites.pkl"


def training_trace() -> Path:
    from make_training_trace import BENCH, make
    trace = BENCH / "training-null" / "rewrites.pkl"
    if not trace.exists():
        print(f"making {trace} with tinygrad 0.14.0 (tools/make_training_trace.py) ...", flush=True)
        make("training", "NULL")
    return trace


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def first_contexts(log: vizexport.RewriteLog, matches: int) -> vizexport.RewriteLog:
    """The trace cut after its first contexts that hold at least `matches` matches."""
    total = k = 0
    while k < len(log.contexts) and total < matches:
        total += sum(len(rw.matches) for rw in log.contexts[k].rewrites)
        k += 1
    return dataclasses.replace(log, contexts=log.contexts[:k])


def bench(path: Path, out: Path, args: argparse.Namespace) -> None:
    t0, c0 = time.perf_counter(), cpu_seconds()
    log = vizexport.load_rewrites(path)
    if args.matches:
        log = first_contexts(log, args.matches)
    t1 = time.perf_counter()
    m = vizexport.render_rewrites(log, out, all_steps=args.all_steps, max_nodes=args.max_nodes, jobs=args.jobs)
    t2, c2 = time.perf_counter(), cpu_seconds()
    s = m.summary
    print(f"{path}")
    print(f"  trace    {s.contexts} contexts, {s.rewrites} rewrites, {s.matches:,} matches, {s.steps:,} steps")
    print(f"  output   {s.svg_files:,} SVGs ({s.unique_graphs:,} distinct layouts), {size_mb(out):,.0f} MB")
    print(f"  time     {t2 - t0:.1f} s total (load {t1 - t0:.1f} s, render {t2 - t1:.1f} s), "
          f"{s.svg_files / (t2 - t0):.0f} SVGs/s, {c2 - c0:.0f} CPU s over {args.jobs} jobs")
    print(f"  limits   {s.capped:,} graphs above --max-nodes {args.max_nodes} (neighbourhood drawn), "
          f"{s.timeouts} timeouts, {s.render_errors} dot errors, {s.replay_errors} replay errors", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-nodes", type=int, default=400)
    ap.add_argument("--all-steps", action="store_true")
    ap.add_argument("--matches", type=int, help="only the first contexts, up to about this many matches (e.g. 40000)")
    ap.add_argument("--keep", type=Path, help="write the SVGs here (default: a temporary folder, removed)")
    args = ap.parse_args()
    files = args.files or [p for p in (BIGGEST,) if p.exists()] + [training_trace()]
    for i, f in enumerate(files):
        if args.keep:
            bench(f, args.keep / f"{i}-{f.parent.name}", args)
            continue
        with tempfile.TemporaryDirectory(prefix="bench-rewrites-") as tmp:
            bench(f, Path(tmp), args)


if __name__ == "__main__":
    main()
