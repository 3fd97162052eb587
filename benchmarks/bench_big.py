"""Convert a very large profile (default 20,000,000 events) with default options (overview + windows) and print time
and peak memory; with --baseline, side by side with another checkout (e.g. the code before a change), alternated.

Targets (issue 36): in <= 0.5x the baseline's time and <= 4 GiB peak RSS (a standard CI runner has 7 GB). The profile
is made once by benchmarks/make_big_profile.py (incrementally, in a tinygrad 0.14.0 venv). Each conversion runs
`vizexport.cli.convert` in a fresh child process; peak RSS is that process's ru_maxrss (its forked workers' largest
is reported apart), and the whole tree's memory its processes' PSS summed (treemem: what a runner's limit sees).

The timed conversions run alone; the tree's memory is sampled in one more conversion each (sampling /proc every
0.25 s costs a third of a core, which slowed the conversions it timed by 7 %).

Usage: python benchmarks/bench_big.py [--events N] [--workdir DIR] [--baseline CHECKOUT] [--repeat K]
"""
import argparse
import json
import subprocess
from pathlib import Path

from bench_load import ROOT, venv_python
from bench_windows import convert
from treemem import TreePss

GIB = 2**30


def _line(who: str, r: dict, events: int) -> str:
    return (f"  {who}: {r['seconds']:.1f} s, peak RSS {r['rss'] / GIB:.2f} GiB ({r['rss'] / events:.0f} B/event), "
            f"workers {r['workers_rss'] / GIB:.2f} GiB, whole tree (summed PSS) {r['tree_pss'] / GIB:.2f} GiB, "
            f"output {r['bytes'] / 1e6:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--source", type=Path, default=ROOT / "vizexport" / "data" / "sample" / "profile.pkl")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    ap.add_argument("--baseline", type=Path, help="another vizexport checkout, converted alternately with this one")
    ap.add_argument("--repeat", type=int, default=1, help="conversions of each, alternated (best time, peak RSS)")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    big = a.workdir / f"profile_{a.events}.pkl"
    if not big.exists():
        subprocess.run([venv_python("0.14.0"), str(ROOT / "benchmarks" / "make_big_profile.py"), str(a.source),
                        str(a.events), str(big)], check=True)
    from vizexport.windows import WINDOW_EVENTS
    codes = {"this": ROOT} | ({"baseline": a.baseline} if a.baseline else {})
    runs: dict[str, list[dict]] = {who: [] for who in codes}
    outs = {who: a.workdir / f"trace_{a.events}_{who}.pftrace" for who in codes}
    for _ in range(a.repeat):  # timed alone: the tree's sampler reads /proc smaps, ~0.1 s a sample, a third of a core
        for who, code in codes.items():
            r = convert(big, outs[who], WINDOW_EVENTS, code)  # as `vizexport PROFILE -o OUT.pftrace` does by default
            windows = outs[who].with_suffix(".windows")  # the windows beside the overview (docs/commands/convert.md)
            size = outs[who].stat().st_size + sum(f.stat().st_size for f in windows.glob("*.pftrace"))
            runs[who].append({**r, "bytes": size})
    tree_pss, tree_rss = {}, {}
    for who, code in codes.items():  # then one more conversion each, for the whole tree's memory
        with TreePss() as tree:
            tree_rss[who] = convert(big, outs[who], WINDOW_EVENTS, code)["rss"]
        tree_pss[who] = tree.peak or 0
    best = {who: {**min(rs, key=lambda r: r["seconds"]), "rss": max(tree_rss[who], *(r["rss"] for r in rs)),
                  "tree_pss": tree_pss[who]} for who, rs in runs.items()}
    print(f"profile: {big} ({a.events:,} events, {big.stat().st_size / 1e9:.2f} GB); best of {a.repeat}")
    for who, r in best.items():
        print(_line(who, r, a.events))
    if a.baseline:
        t, b = best["this"], best["baseline"]
        print(f"  this/baseline: time {t['seconds'] / b['seconds']:.2f}x (target <= 0.5), peak RSS "
              f"{t['rss'] / GIB:.2f} GiB (target <= 4)")
    print(json.dumps({"events": a.events, **best}))


if __name__ == "__main__":
    main()
