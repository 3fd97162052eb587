"""Trace size against time: bytes per profile event of a .pftrace, raw and deflated at each level, and conversion time.

1. The timeline of a profile (default: the 1,000,000-event one bench_load.py makes) is encoded once per layout
   (wire.SPREAD: the layout written before, a sequence per segment and flags on every packet; wire.COMPACT: what
   is written by default; wire.DELTA: what --delta-time writes, timestamps as deltas on each segment's incremental
   clock, which makes the Perfetto UI show a System > Clock Snapshots track), one process, one job; then its packets
   are deflated in compressed_packets chunks as the writer cuts them, by zlib-ng (what is written) and by the standard
   library's zlib, at each level: bytes/event and seconds per level (best of --repeat).
2. With --baseline DIR (a checkout of the code before, e.g. /work/main), the whole `vizexport PROFILE -o OUT.pftrace`
   (compressed, then --no-compress) runs in fresh processes for this checkout and the baseline, and this checkout's
   with --delta-time, interleaved round by round, best of --repeat: seconds and bytes/event side by side.

Usage: python benchmarks/bench_tracesize.py [--profile PKL] [--levels 1,2,3,6,9] [--baseline DIR] [--repeat K]
"""
import argparse
import io
import os
import resource
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from zlib_ng import zlib_ng

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from vizexport.api import build_timeline, load_profile  # noqa: E402
from vizexport.perfetto import proto  # noqa: E402
from vizexport.perfetto.wire import COMPACT, DELTA, SPREAD  # noqa: E402


def _varint_at(data: bytes, i: int) -> tuple[int, int]:
    """The varint at data[i] and where it ends."""
    n = shift = 0
    while True:
        c = data[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 128:
            return n, i


def packet_ends(data: bytes) -> np.ndarray:
    """Where each top-level packet of raw trace bytes ends."""
    ends, i = [], 0
    while i < len(data):
        n, i = _varint_at(data, i + 1)  # past the Trace.packet tag: the length
        i += n
        ends.append(i)
    return np.array(ends, np.int64)


def levels_table(tl, n: int, levels: list[int], repeat: int) -> None:
    for name, enc in (("before (SPREAD)", SPREAD), ("now (COMPACT)", COMPACT), ("--delta-time (DELTA)", DELTA)):
        out = io.BytesIO()
        t = time.perf_counter()
        proto.write(tl, out, compress=False, encoding=enc)
        encode = time.perf_counter() - t
        raw = out.getvalue()
        bounds = list(proto.chunks(packet_ends(raw)))
        print(f"{name}: raw {len(raw) / n:6.2f} B/event, encoded in {encode:5.2f} s (one job)")
        for deflater, compress in (("zlib-ng", zlib_ng.compress), ("zlib", zlib.compress)):
            for level in levels:
                times = []
                for _ in range(repeat):  # best of: the machine may be busy
                    t = time.perf_counter()
                    size = sum(len(compress(raw[a:b], level)) + 8 for a, b in bounds)  # + the wrappers' framing
                    times.append(time.perf_counter() - t)
                dt = min(times)
                print(f"  {deflater:7s} level {level}: {size / n:6.2f} B/event  {dt:5.2f} s  "
                      f"({dt * 1e9 / n:5.0f} ns/event)")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def convert_once(checkout: Path, profile: Path, out: Path, options: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds (the child's and its workers': less swayed by a busy machine) and the trace's size."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    args = [sys.executable, "-m", "vizexport", str(profile), "-o", str(out), "--no-split", *options]
    t, cpu = time.perf_counter(), _children_cpu()
    subprocess.run(args, env=env, cwd=checkout, check=True, capture_output=True)  # `-m` puts the cwd first
    return time.perf_counter() - t, _children_cpu() - cpu, out.stat().st_size


def side_by_side(baseline: Path, profile: Path, n: int, repeat: int, workdir: Path) -> None:
    print(f"conversion, best of {repeat} (load {os.getloadavg()[0]:.1f} at the start):")
    for compress in (True, False):
        raw = [] if compress else ["--no-compress"]
        ways = {"baseline": (baseline, raw), "this": (ROOT, raw), "this --delta-time": (ROOT, [*raw, "--delta-time"])}
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in ways}
        for _ in range(repeat):  # interleaved: a busy spell hits all alike
            for name, (checkout, options) in ways.items():
                out = workdir / f"tracesize_{name.replace(' --', '_')}.pftrace"
                runs[name].append(convert_once(checkout, profile, out, options))
        for name, r in runs.items():
            kind = "compressed" if compress else "raw"
            print(f"  {name:17s} {kind:10s} wall {min(x[0] for x in r):6.2f} s  CPU {min(x[1] for x in r):6.2f} s  "
                  f"{r[0][2] / n:6.2f} B/event")
    print(f"  (load {os.getloadavg()[0]:.1f} at the end)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", type=Path, default=Path("/tmp/vizexport-bench/profile_1000000.pkl"))
    ap.add_argument("--levels", default="1,2,3,4,5,6,9")
    ap.add_argument("--baseline", type=Path, help="a checkout of the code to compare with (its conversion time)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each timing (the best is shown)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vizexport-bench"))
    a = ap.parse_args()
    if not a.profile.exists():
        sys.exit(f"{a.profile}: missing (benchmarks/bench_load.py --events N makes it)")
    prof = load_profile(a.profile)
    tl, n = build_timeline(prof), prof.n_events  # bytes per profile event, as the command reports them
    print(f"profile: {a.profile} ({n:,} events, {tl.n_events():,} on the timeline); load {os.getloadavg()[0]:.1f}")
    if a.levels:  # "" skips the table
        levels_table(tl, n, [int(x) for x in a.levels.split(",")], a.repeat)
    if a.baseline:
        side_by_side(a.baseline, a.profile, n, a.repeat, a.workdir)


if __name__ == "__main__":
    main()
