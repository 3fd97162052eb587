"""`vizexport top PROFILE` against a full conversion `vizexport PROFILE -o OUT.pftrace` of the same 1,000,000-event
profile, side by side: each the whole command in a fresh child process (interpreter start, imports, load, work,
output), alternated round by round so a busy spell on the machine hits both alike; best of --repeat rounds. With
--baseline, another checkout's `top` (e.g. the code before a change) is alternated with them.

Target (issue 37): `top` takes ≤ 0.6× the conversion's time.

Usage: python benchmarks/bench_top.py [--events N] [--workdir DIR] [--repeat K] [--baseline DIR]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from bench_load import ROOT

TARGET = 0.6  # top's time / the conversion's


def command(code: Path, args: list[str]) -> tuple[float, float]:
    """Seconds and CPU seconds (its worker processes' too) of `python -m vizexport ARGS` run with the vizexport in
    `code` (-S and another cwd: an editable install of one checkout cannot shadow another), its output to /dev/null."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), sysconfig.get_paths()["purelib"]])}
    before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-S", "-m", "vizexport", *args], stdout=subprocess.DEVNULL, check=True, env=env,
                   cwd=tempfile.gettempdir())
    dt, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another vizexport checkout: its `top` as well")
    a = ap.parse_args()
    big = a.workdir / f"profile_{a.events}.pkl"
    if not big.exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_load.py"), "--events", str(a.events),
                        "--repeat", "1"], check=True)
    out = a.workdir / f"top_convert_{a.events}.pftrace"
    jobs = {"top": (ROOT, ["top", str(big)]), "convert": (ROOT, [str(big), "-o", str(out)])}
    if a.baseline:
        jobs["baseline top"] = (a.baseline, ["top", str(big)])
    for code, args in jobs.values():  # warm: bytecode compiled, the profile in the page cache
        command(code, args)
    runs: dict[str, list[float]] = {k: [] for k in jobs}
    cpu: dict[str, list[float]] = {k: [] for k in jobs}
    for _ in range(a.repeat):
        for name, (code, args) in jobs.items():
            secs, used = command(code, args)
            runs[name].append(secs)
            cpu[name].append(used)
    best = {k: min(v) for k, v in runs.items()}
    print(f"profile: {big} ({a.events:,} events), best of {a.repeat}, alternated")
    for name, secs in runs.items():
        print(f"  vizexport {name:13s} {best[name]:6.2f} s  (runs: {', '.join(f'{s:.2f}' for s in secs)}; CPU "
              f"{min(cpu[name]):.2f} s, workers included)")
    per = sorted(t / c for t, c in zip(runs["top"], runs["convert"], strict=True))
    print(f"  ratio top/convert: {best['top'] / best['convert']:.2f}× (target ≤ {TARGET}×); per round "
          f"{', '.join(f'{x:.2f}' for x in per)}; of CPU seconds {min(cpu['top']) / min(cpu['convert']):.2f}×")
    if a.baseline:
        print(f"  ratio baseline top/convert: {best['baseline top'] / best['convert']:.2f}×")


if __name__ == "__main__":
    main()
