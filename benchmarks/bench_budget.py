"""The resource budget against crafted input: seconds, the whole process tree's peak private memory (sampled from
/proc, Linux), bytes and files written, exit code and first stderr line, for each attack of issue 33:

  contexts  the bundled sample's rewrites with its largest context listed 200 times more (memo references), to a
            folder (the SVG export and its site)
  traceback 1,000 spans sharing one 100,000-frame traceback, to Chrome JSON
  name      200 events sharing one 1 MB name, to Chrome JSON
  workers   8 contexts whose replay builds 200 copies of a 20,000-UOp chain each, to a folder with --jobs 4
            --memory-limit 1 (each worker alone could use gigabytes)

Usage: python benchmarks/bench_budget.py [--baseline DIR] [--only NAME,...] [--timeout SEC]
       (--baseline DIR: the same runs with another checkout of vizexport, e.g. `git archive <commit> | tar -x -C DIR`)
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from treemem import descendants, rollup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.repickle import dumps as repickle  # noqa: E402
from tests.test_budget import chains, shared_name, shared_traceback  # noqa: E402
from vizexport.pickles import load  # noqa: E402

SAMPLE = ROOT / "vizexport" / "data" / "sample"
GIB = 1 << 30


def listed_again(times: int) -> bytes:
    """The sample's rewrites trace with its context of most matches listed `times` more."""
    trace, _ = load(SAMPLE / "rewrites.pkl")
    d = trace.__dict__
    big = max(range(len(d["rewrites"])), key=lambda i: sum(len(r.__dict__.get("matches") or ())
                                                            for r in d["rewrites"][i]))
    d["keys"] = list(d["keys"]) + [d["keys"][big]] * times
    d["rewrites"] = list(d["rewrites"]) + [d["rewrites"][big]] * times
    return repickle(trace)


CASES = {  # name → (input, output name, extra arguments)
    "contexts": (lambda: listed_again(200), "out/", ("--jobs", "2")),
    "traceback": (lambda: shared_traceback(1000, 100_000), "out.json", ()),
    "name": (lambda: shared_name(200, 1 << 20)[1], "out.json", ()),
    "workers": (lambda: chains(8, 20_000, 200), "out/", ("--jobs", "4", "--memory-limit", "1")),
}


def tree_private(pid: int) -> int:
    """Private memory (resident and swapped) of a process and its descendants."""
    return sum(rollup(p, ("Private_", "Swap:")) for p in [pid, *descendants(pid)])


def written(out: Path) -> tuple[int, int]:
    files = [f for f in out.parent.rglob("*") if f.is_file() and f.name != "case.pkl"]
    return sum(f.stat().st_size for f in files), len(files)


def run(checkout: Path, case: Path, out: Path, extra: tuple[str, ...], timeout: float) -> str:
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "vizexport", str(case), "-o", str(out), *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, "PYTHONPATH": str(checkout)}, cwd=checkout)
    peak = 0
    while p.poll() is None and time.monotonic() - t0 < timeout:
        peak = max(peak, tree_private(p.pid))
        time.sleep(0.05)
    killed = p.poll() is None
    if killed:
        os.killpg(p.pid, 9)
    seconds = time.monotonic() - t0
    err = p.communicate()[1].strip().splitlines()
    size, files = written(out)
    status = f"killed at {timeout:.0f} s" if killed else f"exit {p.returncode}"
    return (f"{seconds:7.1f} s  peak {peak / GIB:5.2f} GiB  {size / 1e6:9.1f} MB  {files:7,} files  {status}  "
            f"{err[0][:90] if err else ''}{f' (+{len(err) - 1} lines)' if len(err) > 1 else ''}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, help="another checkout of vizexport, run side by side")
    ap.add_argument("--only", help="comma-separated case names (default: all)")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    sides = [("this", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    for name in names:
        make, out_name, extra = CASES[name]
        with tempfile.TemporaryDirectory(prefix="bench-budget-") as tmp:
            case = Path(tmp) / "case.pkl"
            case.write_bytes(make())
            print(f"{name}: {case.stat().st_size / 1e6:.2f} MB of pickle")
            for label, checkout in sides:
                work = Path(tmp) / label
                work.mkdir()
                shutil.copy(case, work / "case.pkl")
                print(f"  {label:8} {run(checkout, work / 'case.pkl', work / out_name, extra, args.timeout)}",
                      flush=True)
                shutil.rmtree(work)


if __name__ == "__main__":
    main()
