"""How often do `diff` and `history check` flag noise, and how small a slowdown do they find? Measured on the runs
tools/make_runs.py made (issue #35).

Usage: python tools/verdict_rates.py [--runs /tmp/runs] [--sets S,..] [--history 10] [--pairs 40] [--json OUT]
       python tools/verdict_rates.py --export-launches SET --which 1,2 OUT.json.gz

Per set (a workload on a device, run many times):
- false flags: `diff` of every pair of independent runs (earlier → later), and `history check` of every run from
  the (history+1)-th on against the `history` runs before it; a pair or check with any kernel slower or faster is
  a false flag (and a kernel whose median moved by more than 10% but is called unchanged is counted too);
- slowdowns: the set's most launched kernel (name and device), and the one (of 4 launches or more) with the most
  device time, made 1.1, 1.2, 1.5, 2 and 3 times as long on every launch in the later run (as tools/slow_copy.py
  does to a pickle): found when that kernel is slower and nothing else is flagged, by `diff` of each run against the
  one before it (at most `--pairs`) and by `history check` of each run as above.
The comparisons are those of the command (analysis.diff.kernel_changes, history.check.check_run) on the runs'
launches as vizexport reads them; the pickles are read once.
--export-launches writes what a diff compares of some runs of a set (per kernel its device, name, program,
category, launch start times from the run's first launch, and durations) as gzip'd JSON: a few kB a run, the tests'
real CPU runs (tests/test_diff_neighbours.py).
"""
import argparse
import gzip
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vizexport
from vizexport.analysis.diff import kernel_changes
from vizexport.analysis.launches import Runs, kernel_runs
from vizexport.analysis.stats import FASTER, SLOWER, UNCHANGED
from vizexport.history.check import check_run
from vizexport.history.records import RunMeta, launches_record

FACTORS = (1.1, 1.2, 1.5, 2.0, 3.0)
FLAGS = (SLOWER, FASTER)
MIN_LAUNCHES = 4  # per run, for the heaviest kernel slowed: one or two launches a run show little


def load(folder: Path) -> list[list[Runs]]:
    return [kernel_runs(vizexport.build_timeline(vizexport.load_profile(p)))
            for p in sorted(folder.glob("*/profile.pkl"))]


def slowed(runs: list[Runs], key: tuple[str, str], factor: float) -> list[Runs]:
    return [replace(r, dur=np.round(r.dur * factor).astype(np.int64)) if (r.kernel.device, r.kernel.name) == key
            else r for r in runs]


def record(runs: list[Runs], i: int):
    return launches_record(runs, RunMeta(f"run{i}", "main", f"{i:04d}", {}, "profile.pkl", "", 0, 0, 0))


def diff_flags(a: list[Runs], b: list[Runs]) -> tuple[list[tuple[str, str, str]], int]:
    kernels, _ = kernel_changes(a, b)
    bad = sum(1 for k in kernels if k.verdict == UNCHANGED and k.median_before_ns and k.median_after_ns and
              abs(k.median_after_ns / k.median_before_ns - 1) > 0.10)
    return [(k.device, k.name, k.verdict) for k in kernels if k.verdict in FLAGS], bad


def check_flags(earlier: list, new) -> tuple[list[tuple[str, str, str]], int]:
    c = check_run(new, earlier)
    bad = sum(1 for k in c.kernels if k.verdict == UNCHANGED and k.earlier_median_ns and
              abs(k.median_ns / k.earlier_median_ns - 1) > 0.10)
    return [(k.device, k.name, k.verdict) for k in c.kernels if k.verdict in FLAGS], bad


def rates(name: str, runs: list[list[Runs]], history: int, max_pairs: int) -> dict:
    records = [record(r, i) for i, r in enumerate(runs)]
    pairs = list(itertools.combinations(range(len(runs)), 2))
    out: dict = {"set": name, "runs": len(runs)}
    flagged = [diff_flags(runs[i], runs[j]) for i, j in pairs]
    out["diff"] = {"pairs": len(pairs), "flagged": sum(bool(f) for f, _ in flagged),
                   "kernels_flagged": sum(len(f) for f, _ in flagged),
                   "moved_but_unchanged": sum(b for _, b in flagged),
                   "examples": [f for f, _ in flagged if f][:3]}
    checks = [check_flags(records[r - history:r], records[r]) for r in range(history, len(runs))]
    out["history"] = {"checks": len(checks), "flagged": sum(bool(f) for f, _ in checks),
                      "kernels_flagged": sum(len(f) for f, _ in checks),
                      "moved_but_unchanged": sum(b for _, b in checks),
                      "examples": [f for f, _ in checks if f][:3]}
    for label, key in chosen(runs[0]).items():
        out[label] = slowdowns(runs, records, key, history, max_pairs)
    return out


def chosen(runs: list[Runs]) -> dict[str, tuple[str, str]]:
    """The kernels to slow down: the most launched (name and device), and of those launched MIN_LAUNCHES times or
    more the one with the most device time."""
    counts: dict[tuple[str, str], int] = {}
    times: dict[tuple[str, str], int] = {}
    for r in runs:
        if r.kernel.program:  # a kernel (copies have no program: tools/slow_copy.py finds programs by key)
            key = (r.kernel.device, r.kernel.name)
            counts[key] = counts.get(key, 0) + r.count
            times[key] = times.get(key, 0) + int(r.dur.sum())
    most = max(counts, key=lambda k: (counts[k], k))
    often = [k for k in times if counts[k] >= MIN_LAUNCHES]
    return {"slowed": most, "slowed_heaviest": max(often, key=lambda k: (times[k], k)) if often else most}


def slowdowns(runs: list[list[Runs]], records: list, key: tuple[str, str], history: int, max_pairs: int) -> dict:
    """How often `key` made FACTORS times as long is found alone, by diff and by history check."""
    launches = sum(r.count for r in runs[0] if (r.kernel.device, r.kernel.name) == key)
    out: dict = {"kernel": list(key), "launches": launches, "diff": {}, "history": {}}
    alone = {(key[0], key[1], SLOWER)}  # in a diff, one or more of the name's programs; nothing else
    for f in FACTORS:
        hits = [set(diff_flags(runs[i], slowed(runs[i + 1], key, f))[0]) == alone
                for i in range(min(max_pairs, len(runs) - 1))]
        out["diff"][f] = [sum(hits), len(hits)]
        hits = [set(check_flags(records[r - history:r], record(slowed(runs[r], key, f), r))[0]) == alone
                for r in range(history, len(runs))]
        out["history"][f] = [sum(hits), len(hits)]
    return out


def always(found: dict) -> float | None:
    """The smallest factor found in every comparison, and in every one with a larger factor."""
    out = None
    for f in sorted(found, reverse=True):
        hit, n = found[f]
        if not n or hit < n:
            break
        out = f
    return out


def export_launches(folder: Path, which: list[int], dst: Path) -> None:
    runs = {}
    for i in which:
        launches = kernel_runs(vizexport.build_timeline(vizexport.load_profile(folder / f"{i:02d}" / "profile.pkl")))
        t0 = min(int(r.ts.min()) for r in launches)
        runs[str(i)] = [{"device": r.kernel.device, "name": r.kernel.name, "program": r.kernel.program,
                         "category": r.category, "ts": (r.ts - t0).tolist(), "dur": r.dur.tolist()} for r in launches]
    dst.write_bytes(gzip.compress(json.dumps({"set": folder.name, "runs": runs}).encode(), mtime=0))
    print(f"wrote {dst}: runs {which} of {folder.name}, {dst.stat().st_size:,} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, default=Path("/tmp/runs"))
    ap.add_argument("--export-launches", metavar="SET", help="export runs --which of --runs/SET to OUT instead")
    ap.add_argument("--which", default="1,2", help="the runs to export (numbers)")
    ap.add_argument("out", nargs="?", type=Path, help="the --export-launches file")
    ap.add_argument("--sets", help="comma-separated (default: every folder of --runs)")
    ap.add_argument("--history", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.export_launches:
        if a.out is None:
            ap.error("--export-launches needs OUT")
        export_launches(a.runs / a.export_launches, [int(x) for x in a.which.split(",")], a.out)
        return
    names = a.sets.split(",") if a.sets else sorted(p.name for p in a.runs.iterdir() if p.is_dir())
    results = []
    for name in names:
        r = rates(name, load(a.runs / name), a.history, a.pairs)
        results.append(r)
        d, h = r["diff"], r["history"]
        found = " | ".join(f"{s['kernel'][1]} ({s['launches']} launches) slowed, found alone: diff {s['diff']} "
                           f"history {s['history']} (always from ×{always(s['diff'])} / ×{always(s['history'])})"
                           for s in (r["slowed"], r["slowed_heaviest"]))
        print(f"{name}: {r['runs']} runs | diff: {d['flagged']}/{d['pairs']} pairs flagged ({d['kernels_flagged']} "
              f"kernels), moved>10% but unchanged {d['moved_but_unchanged']} | history: {h['flagged']}/{h['checks']} "
              f"checks flagged, moved>10% but unchanged {h['moved_but_unchanged']} | {found}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
