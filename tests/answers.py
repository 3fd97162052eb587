"""Shared by the report and diff tests: corpus sets unpacked once, and figures computed straight from the profile's
records (not through the Timeline or the analysis), to compare the report's with."""
from __future__ import annotations

import bisect
import gzip
from collections import defaultdict
from pathlib import Path

from vizexport.devices import HOST
from vizexport.records import Profile

from .conftest import ROOT

CORPUS = ROOT / "tests" / "data" / "corpus"


def unpack(name: str, folder: Path) -> tuple[Path, Path]:
    """A corpus set's profile.pkl and rewrites.pkl, decompressed into `folder/name/`."""
    out = folder / name
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in ("profile.pkl", "rewrites.pkl"):
        if not (out / f).exists():
            (out / f).write_bytes(gzip.decompress((CORPUS / name / f"{f}.gz").read_bytes()))
        paths.append(out / f)
    return paths[0], paths[1]


def device_spans(prof: Profile) -> dict[str, list[tuple[int, int]]]:
    """Per device string, the (start, end) of every range with a duration that ran on a device (host spans left
    out): what the report calls launches."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for s in prof.spans:
        if s.device not in HOST and s.en is not None and s.en > s.st:
            out[s.device].append((s.st, s.en))
    return out


def merged(iv: list[tuple[int, int]]) -> list[list[int]]:
    """The union of intervals, by the textbook loop."""
    out: list[list[int]] = []
    for st, en in sorted(iv):
        if out and st <= out[-1][1]:
            out[-1][1] = max(out[-1][1], en)
        else:
            out.append([st, en])
    return out


def length(iv: list[list[int]]) -> int:
    return sum(en - st for st, en in iv)


def intersection(a: list[list[int]], b: list[list[int]]) -> int:
    """How long two unions (each disjoint and sorted) cover at once: two pointers."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def latest_exec(prof: Profile) -> dict[str, tuple[list[int], list]]:
    """Per device, its exec events in time order: (times, points)."""
    out: dict[str, list] = defaultdict(list)
    for pt in prof.points:
        if pt.kind == "exec":
            out[pt.device].append(pt)
    return {d: ([p.ts for p in sorted(v, key=lambda p: p.ts)], sorted(v, key=lambda p: p.ts)) for d, v in out.items()}


def exec_before(execs: dict[str, tuple[list[int], list]], device: str, ts: int):
    """The latest exec event of `device` at or before `ts` (tinygrad back-dates exec to the launch call)."""
    times, points = execs.get(device, ([], []))
    i = bisect.bisect_right(times, ts) - 1
    return points[i] if i >= 0 else None
