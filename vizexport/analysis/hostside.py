"""The host side of launches: how long after the host launched a kernel the device started it, and which Python
call sites (host spans' tracebacks) and Tensor calls (`metadata`) the device time goes back to."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..records import Profile
from ..timeline import ARG_EXEC, ARG_METADATA, ARG_TB, Role, Timeline, Track
from .launches import device_tracks

EXEC = "exec"  # records.Point kind of a host-side launch
MAX_SITES = 15
MAX_KERNELS = 3  # kernel names shown per call site
NO_SITE = "(no exec event: JIT graph entries, copy engines)"


@dataclass
class Latency:
    """Device start − host launch (its exec event) over the launches of one device that have both."""

    device: str
    launches: int
    median_ns: float
    p90_ns: float
    max_ns: int
    min_ns: int
    samples: list[int] = field(default_factory=list)  # every launch's latency, in launch order (ns)


@dataclass
class CallSite:
    """Device time that launches from one place in the program took."""

    site: str  # "file:line function", or NO_SITE
    code: str  # the source line
    launches: int
    device_ns: int
    pct: float  # of all launch time
    kernels: list[str]  # the costliest kernels launched from there


def exec_times(prof: Profile | None) -> dict[tuple[str, Any], int]:
    """(device, exec key) → when the host launched (ns): each exec event of the profile."""
    if prof is None:
        return {}
    return {(pt.device, pt.key): pt.ts for pt in prof.points if pt.kind == EXEC and _hashable(pt.key)}


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _launches(tl: Timeline) -> Iterator[tuple[Track, int, dict]]:
    """Device-track slices with a duration and args."""
    for t in device_tracks(tl):
        for i, a in t.args.items():
            if t.dur[i] > 0:
                yield t, i, a


def latency(tl: Timeline) -> list[Latency]:
    """Per device track name, the launch latency of each launch the reader linked to its host launch (its exec
    event; a JIT graph entry's is its batch's unless it has its own): the launch table's latency column."""
    per: dict[str, list[tuple[int, int]]] = defaultdict(list)
    tab = tl.launches
    for t in device_tracks(tl):
        rows = tab.rows(t.uuid)
        linked = (tab.dur[rows] > 0) & (tab.latency[rows] >= 0)
        if linked.any():
            per[t.name] += zip(tab.ts[rows][linked].tolist(), tab.latency[rows][linked].tolist(), strict=True)
    out = []
    for device, rows in per.items():
        lat = np.array([d for _, d in sorted(rows)], np.int64)
        out.append(Latency(device, len(lat), float(np.median(lat)), float(np.percentile(lat, 90)), int(lat.max()),
                           int(lat.min()), lat.tolist()))
    return out


def call_sites(tl: Timeline, execs: dict[tuple[str, Any], int], n: int = MAX_SITES) -> list[CallSite]:
    """Launch time by the Python line that led to it: the outermost host span with a traceback around the launch's
    exec event, and in that traceback the first frame outside the folder of its innermost frame (the profiler's
    own wrapper, in the library): the caller's line. Launches without an exec event count as NO_SITE."""
    spans = _traced_spans(tl)
    time: dict[str, list] = defaultdict(lambda: [0, 0, defaultdict(int), ""])
    total = 0
    for t, i, a in _all_launches(tl):
        d = t.dur[i]
        total += d
        key = a.get(ARG_EXEC)
        launched = execs.get((t.name, key)) if key is not None and _hashable(key) else None
        site, code = spans(launched) if launched is not None else (NO_SITE, "")
        row = time[site]
        row[0] += 1
        row[1] += d
        row[2][tl.strings[t.names[i]]] += d
        row[3] = code
    rows = sorted(time.items(), key=lambda kv: -kv[1][1])[:n]
    return [CallSite(site, code, k, ns, 100.0 * ns / total if total else 0.0,
                     [name for name, _ in sorted(names.items(), key=lambda kv: -kv[1])[:MAX_KERNELS]])
            for site, (k, ns, names, code) in rows if ns]


def tensor_calls(tl: Timeline, n: int = MAX_SITES) -> list[CallSite]:
    """Launch time by its `metadata` (the Tensor calls tinygrad 0.12/0.13 record on each launch)."""
    time: dict[str, list] = defaultdict(lambda: [0, 0, defaultdict(int)])
    total = 0
    for t, i, a in _launches(tl):
        total += t.dur[i]
        meta = a.get(ARG_METADATA)
        if isinstance(meta, str) and meta:
            row = time[meta]
            row[0] += 1
            row[1] += t.dur[i]
            row[2][tl.strings[t.names[i]]] += t.dur[i]
    rows = sorted(time.items(), key=lambda kv: -kv[1][1])[:n]
    return [CallSite(meta, "", k, ns, 100.0 * ns / total if total else 0.0,
                     [name for name, _ in sorted(names.items(), key=lambda kv: -kv[1])[:MAX_KERNELS]])
            for meta, (k, ns, names) in rows]


def _all_launches(tl: Timeline) -> Iterator[tuple[Track, int, dict]]:
    for t in device_tracks(tl):
        for i in range(len(t)):
            if t.dur[i] > 0:
                yield t, i, t.args.get(i, {})


def _traced_spans(tl: Timeline) -> Any:
    """A function: time → (call site, code line) of the outermost host span with a traceback around it."""
    rows = [(t.ts[i], t.ts[i] + max(t.dur[i], 0), a[ARG_TB]) for t in tl.tracks if t.role == Role.HOST
            and t.kind == "slice" for i, a in t.args.items() if isinstance(a.get(ARG_TB), str)]
    rows.sort(key=lambda r: (r[0], -r[1]))
    st = np.array([r[0] for r in rows], np.int64)
    reach = np.maximum.accumulate(np.array([r[1] for r in rows], np.int64)) if rows else st
    sites: dict[int, tuple[str, str]] = {}

    def find(x: int) -> tuple[str, str]:
        j = int(np.searchsorted(reach, x, "left"))  # the earliest-starting span still open at x
        if j >= len(rows) or st[j] > x:
            return NO_SITE, ""
        if j not in sites:
            sites[j] = caller(rows[j][2])
        return sites[j]
    return find


def caller(tb: str) -> tuple[str, str]:
    """Where the program called into the library, from a traceback text (innermost frame first): the first frame
    that is neither in the innermost frame's package (its folder; for an installed package, the package's folder
    under site-packages) nor in the Python installation (the standard library); the outermost frame if none is."""
    lines = tb.split("\n")
    frames = [(lines[k], lines[k + 1].strip() if k + 1 < len(lines) else "") for k in range(0, len(lines), 2)]
    package = _package(frames[0][0].rsplit(":", 1)[0])
    for where, code in frames:
        path = where.rsplit(":", 1)[0]
        if not path.startswith(package) and not any(p in path for p in INSTALLED):
            return where, code
    return frames[-1]


INSTALLED = ("/lib/python", "<frozen ")  # the interpreter's own library (and installed packages)


def _package(path: str) -> str:
    """The folder of the package a file belongs to: `…/site-packages/<pkg>/` for installed ones, else its folder."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            head, tail = path.split(marker, 1)
            return f"{head}{marker}{tail.split('/', 1)[0]}/"
    return path.rsplit("/", 1)[0] + "/"
