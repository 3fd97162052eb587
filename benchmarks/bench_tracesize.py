"""Trace size against time: bytes per event of a .pftrace, raw and deflated at each level, and conversion time.

1. The timeline of a profile (default: the 1,000,000-event one bench_load.py makes) is encoded once per layout
   (proto.SPREAD: the layout written before, a sequence per segment and flags on every packet; proto.COMPACT: what
   is written now), one process, one job; then its packets are deflated in compressed_packets chunks as the writer
   cuts them, by zlib-ng (what is written) and by the standard library's zlib, at each level: bytes/event and seconds
   per level (best of --repeat).
   Then, for the decision on timestamps: the COMPACT bytes with each event's timestamp re-encoded as the delta from
   the packet before it on its sequence (what a sequence-scoped incremental clock would write; not written, since
   the ClockSnapshot that anchors such a clock makes the Perfetto UI add a System > Clock Snapshots track).
2. With --baseline DIR (a checkout of the code before, e.g. /work/main), the whole `vizexport PROFILE -o OUT.pftrace`
   (compressed, then --no-compress) runs in fresh processes for this checkout and the baseline, interleaved round by
   round, best of --repeat: seconds and bytes/event side by side.

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
from vizexport.perfetto.wire import COMPACT, SPREAD, TIMESTAMP_TAG, Trace, TracePacket, field, varint  # noqa: E402


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


def _fields(packet: bytes) -> list[tuple[int, int, int, int | None]]:
    """(field number, start, end, varint value or None) of each field of one packet."""
    out, i = [], 0
    while i < len(packet):
        start = i
        key, i = _varint_at(packet, i)
        value = None
        if key & 7 == 0:
            value, i = _varint_at(packet, i)
        elif key & 7 == 2:
            n, i = _varint_at(packet, i)
            i += n
        else:
            i += 8 if key & 7 == 1 else 4
        out.append((key >> 3, start, i, value))
    return out


def with_delta_timestamps(raw: bytes) -> list[bytes]:
    """The packets of raw trace bytes, each timestamp made the delta from the one before on its sequence (a packet
    that sets the sequence's defaults starts it again)."""
    TP, out, last, at = TracePacket, [], {}, 0
    for end in packet_ends(raw).tolist():
        packet = raw[at + 1:end]
        packet = packet[_varint_at(packet, 0)[1]:]  # past the length
        at, fields = end, _fields(packet)
        seq = next((v for f, _, _, v in fields if f == TP.TRUSTED_PACKET_SEQUENCE_ID), 0)
        if any(f == TP.TRACE_PACKET_DEFAULTS for f, *_ in fields):
            last.pop(seq, None)
        body = b""
        for f, a, b, v in fields:
            if f == TP.TIMESTAMP and v is not None:
                body += varint(TIMESTAMP_TAG[0]) + varint((v - last.get(seq, 0)) % (1 << 64))
                last[seq] = v
            else:
                body += packet[a:b]
        out.append(field(Trace.PACKET, body))
    return out


def delta_row(raw: bytes, n: int) -> None:
    packets = with_delta_timestamps(raw)
    data = b"".join(packets)
    bounds = list(proto.chunks(np.cumsum([len(p) for p in packets])))
    size = sum(len(zlib_ng.compress(data[a:b], proto.DEFLATE_LEVEL)) + 8 for a, b in bounds)
    print(f"now, timestamps as deltas (not written; see above): raw {len(data) / n:6.2f} B/event, zlib-ng level "
          f"{proto.DEFLATE_LEVEL}: {size / n:6.2f} B/event")


def levels_table(tl, levels: list[int], repeat: int) -> None:
    n = tl.n_events()
    for name, enc in (("before (SPREAD)", SPREAD), ("now (COMPACT)", COMPACT)):
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
        if enc is COMPACT:
            delta_row(raw, n)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def convert_once(checkout: Path, profile: Path, out: Path, compress: bool) -> tuple[float, float, int]:
    """Wall and CPU seconds (the child's and its workers': less swayed by a busy machine) and the trace's size."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    args = [sys.executable, "-m", "vizexport", str(profile), "-o", str(out), "--no-split"] + \
        ([] if compress else ["--no-compress"])
    t, cpu = time.perf_counter(), _children_cpu()
    subprocess.run(args, env=env, cwd=checkout, check=True, capture_output=True)  # `-m` puts the cwd first
    return time.perf_counter() - t, _children_cpu() - cpu, out.stat().st_size


def side_by_side(baseline: Path, profile: Path, n: int, repeat: int, workdir: Path) -> None:
    print(f"conversion, best of {repeat} (load {os.getloadavg()[0]:.1f} at the start):")
    for compress in (True, False):
        runs: dict[str, list[tuple[float, float, int]]] = {"baseline": [], "this": []}
        for _ in range(repeat):  # interleaved: a busy spell hits both alike
            for name, checkout in (("baseline", baseline), ("this", ROOT)):
                runs[name].append(convert_once(checkout, profile, workdir / f"tracesize_{name}.pftrace", compress))
        assert compress or runs["this"][0][2] != runs["baseline"][0][2], "the same code ran twice"
        for name, r in runs.items():
            kind = "compressed" if compress else "raw"
            print(f"  {name:8s} {kind:10s} wall {min(x[0] for x in r):6.2f} s  CPU {min(x[1] for x in r):6.2f} s  "
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
    tl = build_timeline(load_profile(a.profile))
    print(f"profile: {a.profile} ({tl.n_events():,} events); load {os.getloadavg()[0]:.1f}")
    if a.levels:  # "" skips the table
        levels_table(tl, [int(x) for x in a.levels.split(",")], a.repeat)
    if a.baseline:
        side_by_side(a.baseline, a.profile, tl.n_events(), a.repeat, a.workdir)


if __name__ == "__main__":
    main()
