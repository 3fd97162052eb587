"""The static site of a run: build seconds, size, files — and, in headless Chromium, how fast a random step shows.

Usage: python benchmarks/bench_site.py [--runs mlp-cpu,mlp-null,training-null] [--baseline DIR] [--browser N]
       [--keep DIR] [--repeat K]

Runs (made once by tools/make_training_trace.py, tinygrad 0.14.0): mlp-cpu / mlp-null, a 2-layer MLP with 5 Adam
steps and a JIT'd inference (~29k matches), and training-null, one training step of a small CNN (~49k matches, the
trace of bench_rewrites.py). Each site is built by the command, as a user would: `vizexport PROFILE REWRITES -o
SITE/`, with the package's bytecode compiled beforehand as `pip install` does. --baseline DIR builds the same sites
with another checkout of vizexport (e.g. `git worktree add /tmp/old <commit>`), side by side; --repeat K builds each
K times, alternated, and prints the median seconds (this machine's timings drift by 15 % from one minute to the
next). --browser N opens the largest context page of each site and shows N random steps of at most 400 drawn boxes,
printing the median and 90th percentile time until each is drawn (issue 18: MLP site ≤ 4 s and ≤ 5 MB, training site
≤ 15 s and ≤ 20 MB, a step ≤ 500 ms median).
"""
from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

RUNS = {"mlp-cpu": ("mlp", "CPU"), "mlp-null": ("mlp", "NULL"), "training-null": ("training", "NULL")}


def run_folder(name: str) -> Path:
    from make_training_trace import BENCH, make
    folder = BENCH / name
    if not (folder / "rewrites.pkl").exists():
        print(f"making {folder} with tinygrad 0.14.0 (tools/make_training_trace.py) ...", flush=True)
        make(*RUNS[name])
    return folder


def build(code: Path, run: Path, out: Path) -> tuple[float, float, int]:
    """Seconds, MB and files of the site `code`'s command builds from `run`."""
    shutil.rmtree(out, ignore_errors=True)
    # -S and another cwd: neither an editable install of this checkout nor the cwd can shadow `code`
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), sysconfig.get_paths()["purelib"]])}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-m", "vizexport", str(run / "profile.pkl"), str(run / "rewrites.pkl"),
                    "-o", f"{out}/"], env=env, check=True, capture_output=True, cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - t0
    files = [p for p in out.rglob("*") if p.is_file()]
    return seconds, sum(p.stat().st_size for p in files) / 1e6, len(files)


def largest_context(site: Path) -> Path:
    def steps(page: Path) -> int:
        text = page.read_text()
        return int(text.split(" steps")[0].split()[-1].replace(",", "")) if " steps." in text else 0
    return max((site / "ctx").glob("*.html"), key=steps)


def browse(site: Path, n: int) -> str:
    from tests.browser import viewer
    if not viewer.have_browser():
        return "no headless Chromium + playwright-core (../shared/tools/perfetto-check/install.sh)"
    got = viewer.drive(largest_context(site), {"random": n, "seed": 1, "maxNodes": 400})
    ms = sorted(x["ms"] for x in got["random"])
    right = sum(x["boxStep"] == x["key"] and set(x["created"]) <= {"ok"} and set(x["rebuilt"]) <= {"ok"}
                for x in got["random"])
    return (f"{len(ms)} random steps: median {statistics.median(ms):.0f} ms, p90 {ms[int(0.9 * len(ms))]:.0f} ms, "
            f"max {ms[-1]:.0f} ms; {right}/{len(ms)} showed their own graph; first graph after "
            f"{got['firstGraphMs']} ms; console errors {len(got['errors'])}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--baseline", type=Path, help="another vizexport checkout to build the same sites with")
    ap.add_argument("--browser", type=int, default=0, metavar="N", help="N random steps in headless Chromium")
    ap.add_argument("--keep", type=Path, help="keep the sites in this folder")
    ap.add_argument("--repeat", type=int, default=1, metavar="K", help="K builds per side, alternated; the median")
    args = ap.parse_args()
    keep = args.keep or Path(tempfile.mkdtemp(prefix="vizexport-bench-site-"))
    codes = [("this", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    # as pip installs it: bytecode compiled (PYTHONDONTWRITEBYTECODE would recompile at every build: ~0.12 s here)
    for _, code in codes:
        compileall.compile_dir(code / "vizexport", quiet=1)
    print(f"{'run':14} {'code':9} {'seconds':>8} {'MB':>7} {'files':>6}")
    for name in args.runs.split(","):
        run = run_folder(name)
        builds: dict[str, list[tuple[float, float, int]]] = {label: [] for label, _ in codes}
        for _ in range(args.repeat):  # alternated, so a slow spell of the machine hits both sides
            for label, code in codes:
                builds[label].append(build(code, run, keep / label / name))
        results = {}
        for label, got in builds.items():
            s, mb, files = results[label] = statistics.median(b[0] for b in got), got[-1][1], got[-1][2]
            spread = f"  ({', '.join(f'{b[0]:.2f}' for b in got)})" if len(got) > 1 else ""
            print(f"{name:14} {label:9} {s:8.2f} {mb:7.2f} {files:6d}{spread}", flush=True)
        if args.baseline:
            (s0, mb0, _), (s1, mb1, _) = results["this"], results["baseline"]
            print(f"{name:14} {'ratio':9} {s1 / s0:7.2f}x {mb1 / mb0:6.2f}x  (baseline / this)")
        if args.browser:
            print(f"{name:14} browser   {browse(keep / 'this' / name, args.browser)}", flush=True)
    if not args.keep:
        shutil.rmtree(keep, ignore_errors=True)


if __name__ == "__main__":
    main()
