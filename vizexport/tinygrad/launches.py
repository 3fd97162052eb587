"""Which host launch (an `exec` point event) started each piece of device work.

tinygrad records an `exec` point on the host for every kernel run, copy and JIT graph batch, dated to the call's
start (master back-dates it: realize.py), and the work itself as a device range. Neither names the other, so the
link is made as tinygrad's viewer makes it for a kernel's variables: the latest exec at or before the work starts
on the host clock (device ranges are already shifted by their device's clock offset). Two refinements keep a
launch from being credited with another one's work:
- a kernel takes an exec of its own name on its own device (names compared as tinygrad turns a display name into a
  function name: `r_(j*32)` launches `r_28j2A3229`), so two execs queued before either kernel ran link correctly;
- a copy takes a copy exec (`copy 256 B, NULL:1 <- NULL`, recorded on the destination device) with the same source
  and destination as the range (`NULL -> NULL:1`, on the source's copy engine); `TINY` in a range name is the host
  memory that the exec calls `PYTHON` or `CPU`;
- a JIT graph batch takes the latest exec on the batch's device before its first entry, and so do its entries,
  unless one has an exec of its own name since then (0.14's HCQ2 batches gather kernels launched one by one).
Because only execs at or before the start are taken, launch latency (device start - host launch) is never negative;
a device range the clock offset places before its own exec links to an earlier launch of the same name, as in the
viewer, or to none.
"""
from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..devices import HOST, is_copy
from ..records import Alloc, Exec, Profile, Span
from ..timeline import ARG_BYTES, ARG_EXEC, ARG_GBS, ARG_LAUNCH_LATENCY, ARG_METADATA, FLOW_LAUNCH, Timeline, Track

LAUNCH_PREFIX = "launch "  # launch instants are not named as the kernel: a query for a kernel's name finds its runs
LAUNCHES = "TINY"  # the host root whose `Launches` track holds the exec events (tinygrad's runtime runs there)

_COPY_EXEC = re.compile(r"^copy\b[^,]*,\s*(\S+)\s*<-\s*(\S+)\s*$")  # "copy 256 B, NULL:1 <- NULL": dest, src
_COPY_RANGE = re.compile(r"^(\S+)\s*->\s*(\S+)$")  # "NULL -> NULL:1": src, dest
_HOST_MEMORY = "TINY"  # how copy ranges name host memory; execs say PYTHON (or CPU for the host device)
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@lru_cache(maxsize=65536)  # a run launches a few hundred kernels, each many times
def function_name(name: str) -> str:
    """A kernel's display name as the function name tinygrad compiles (and names device ranges by): every character
    outside [A-Za-z0-9_] as two hex digits."""
    return "".join(c if c in _WORD else f"{ord(c):02X}" for c in name)


def copy_ends(exec_name: str) -> tuple[str, str] | None:
    """(source, destination) a copy exec names, None for a kernel's."""
    m = _COPY_EXEC.match(exec_name)
    return (m.group(2), m.group(1)) if m else None


def _same_end(range_end: str, exec_end: str) -> bool:
    return range_end in (exec_end, _HOST_MEMORY)


@dataclass(frozen=True)
class LaunchLinks:
    """Index into Profile.points of the exec that launched each device span (by index into Profile.spans) and each
    graph batch (by index into Profile.graphs)."""

    spans: dict[int, int]
    graphs: dict[int, int]


@dataclass(frozen=True)
class Placed:
    """Where the timeline put the device work: each device span (by index into Profile.spans) and each graph batch
    (by index into Profile.graphs) → (its track, its event's index there)."""

    spans: dict[int, tuple[Track, int]]
    batches: dict[int, tuple[Track, int]]


class _Execs:
    """Exec points of a profile, sorted by time, grouped for the three kinds of look-up."""

    def __init__(self, prof: Profile) -> None:
        self.named: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # (device, function name)
        self.kernels: dict[str, list[tuple[int, int]]] = defaultdict(list)  # device → any non-copy exec
        self.copies: list[tuple[int, int, str, str]] = []  # (ts, point index, source, destination)
        for i, pt in enumerate(prof.points):
            if pt.kind != "exec" or not isinstance(pt.arg, Exec):
                continue
            ends = copy_ends(pt.arg.name)
            if ends is not None:
                self.copies.append((pt.ts, i, *ends))
            else:
                self.named[(pt.device, function_name(pt.arg.name))].append((pt.ts, i))
            self.kernels[pt.device].append((pt.ts, i))
        for rows in (*self.named.values(), *self.kernels.values(), self.copies):
            rows.sort()
        self.copy_ts = [c[0] for c in self.copies]

    @staticmethod
    def latest(rows: list[tuple[int, int]], st: int) -> int | None:
        k = bisect.bisect_right(rows, (st, 1 << 62)) - 1
        return rows[k][1] if k >= 0 else None

    def copy(self, name: str, st: int) -> int | None:
        m = _COPY_RANGE.match(name)
        if m is None:
            return None
        src, dst = m.groups()
        for k in range(bisect.bisect_right(self.copy_ts, st) - 1, -1, -1):
            _, i, esrc, edst = self.copies[k]
            if _same_end(src, esrc) and _same_end(dst, edst):
                return i
        return None


def _entry_launch(prof: Profile, execs: _Execs, s: Span, batch: int) -> int:
    """A graph entry's exec: one of its own name recorded since its batch's (HCQ2 batches gather kernels launched one
    by one), else the batch's."""
    own = execs.latest(execs.named.get((s.device, function_name(s.key.name)), []), s.st)
    return own if own is not None and prof.points[own].ts >= prof.points[batch].ts else batch


def link_launches(prof: Profile, device_spans: Iterable[int] | None = None) -> LaunchLinks:
    """The exec point that launched each device range, graph batch and graph entry (where one can be told).
    `device_spans`: the indexes of the spans not on a host device, in order, if known (most spans are host spans)."""
    execs = _Execs(prof)
    spans: dict[int, int] = {}
    graphs: dict[int, int] = {}
    if not execs.kernels:
        return LaunchLinks(spans, graphs)
    batches = [g for g, batch in enumerate(prof.graphs) if batch.entries]
    starts = prof.spans.batch_extents([prof.graphs[g].entries for g in batches])[0].tolist()
    for g, st in zip(batches, starts, strict=True):
        entries = prof.graphs[g].entries
        hit = execs.latest(execs.kernels.get(prof.graphs[g].device, []), st)
        if hit is not None:
            graphs[g] = hit
            spans.update((i, _entry_launch(prof, execs, s, hit)) for i, s in zip(entries, prof.spans.rows(entries),
                                                                                  strict=True))
    if device_spans is None:
        device_spans = prof.spans.where_device(lambda d: d not in HOST)
    device_spans = np.asarray(device_spans, np.int64)
    for i, s in zip(device_spans.tolist(), prof.spans.rows(device_spans), strict=True):
        if s.graph >= 0:
            continue
        hit = execs.latest(execs.named.get((s.device, function_name(s.key.name)), []), s.st)
        if hit is None and is_copy(s):
            hit = execs.copy(s.key.name, s.st)
        if hit is not None:
            spans[i] = hit
    return LaunchLinks(spans, graphs)


class ExecArgs:
    """A launch's arguments, made once per exec event (its Launches instant, its device slice and its JIT batch's
    entries share them): its exec key, buffers (key, mode, and from their allocations bytes and dtype), variables
    and the Tensor calls that led to it."""

    def __init__(self, buffers: dict[Any, Alloc]) -> None:
        self.buffers = buffers  # buffer key → its allocation
        self.made: dict[int, dict] = {}  # id(exec) → its arguments (never changed once made)

    def __call__(self, key: Any, e: Exec) -> dict:
        args = self.made.get(id(e))
        if args is None:
            args = self.made[id(e)] = self._make(key, e)
        return args

    def _make(self, key: Any, e: Exec) -> dict:
        bufs = []
        for n, b in enumerate(e.bufs):
            a = self.buffers.get(b)
            bufs.append({"buf": b, "mode": e.mode(n), **({"bytes": a.nbytes, "dtype": a.dtype} if a else {})})
        args: dict = {ARG_EXEC: key, "buffers": bufs}
        if e.var_vals:
            args["var_vals"] = dict(e.var_vals)
        if e.metadata:
            args[ARG_METADATA] = ", ".join(e.metadata)
        return args


def add_launches(tl: Timeline, track: Track, prof: Profile, links: LaunchLinks, placed: Placed, exec_args: ExecArgs
                 ) -> None:
    """Every exec that launched something as an instant on `track` (the host's `Launches`), with a flow to each
    device slice it started; those slices get the launch latency (in the launch table, and in their args for
    display), a JIT graph entry its batch's buffers, a copy the bytes its destination buffer holds (and the
    bandwidth) when its range does not say."""
    used = sorted(set(links.spans.values()) | set(links.graphs.values()), key=lambda i: (prof.points[i].ts, i))
    at: dict[int, int] = {}
    for i in used:
        pt = prof.points[i]
        at[i] = len(track)
        track.ts.append(pt.ts)
        track.dur.append(-1)
        track.names.append(tl.intern(LAUNCH_PREFIX + " ".join(pt.arg.name.split())))  # padded for DEBUG lines
        track.args[at[i]] = {"device": pt.device, **exec_args(pt.key, pt.arg)}
    spans, batches, graph = placed.spans, placed.batches, prof.spans.graph
    targets = [(spans[s], i, graph[s] >= 0) for s, i in links.spans.items() if s in spans]
    targets += [(batches[g], i, True) for g, i in links.graphs.items() if g in batches]
    for (dst, j), i, in_graph in map(targets.__getitem__, _by_time(targets).tolist()):
        tl.flow(track, at[i], dst, j, FLOW_LAUNCH)
        pt, args = prof.points[i], dst.args.setdefault(j, {})
        args[ARG_LAUNCH_LATENCY] = dst.ts[j] - pt.ts
        tl.launches.link(tl.launches.row(dst.uuid, j), i, args[ARG_LAUNCH_LATENCY])
        if in_graph and "buffers" not in args:
            args.update(exec_args(pt.key, pt.arg))
        if copy_ends(pt.arg.name) is not None and ARG_BYTES not in args:
            _copy_bytes(args, pt.arg, exec_args.buffers, dst.dur[j])


def _by_time(targets: list) -> np.ndarray:
    """The order of launch targets ((track, event), exec, in graph) by their event's time, track and index: columns
    sorted at once (a key tuple per launch would cost a long run hundreds of MB at its memory peak)."""
    def column(f: Any) -> np.ndarray:
        return np.fromiter((f(dst, j) for (dst, j), _, _ in targets), np.int64, len(targets))
    return np.lexsort((column(lambda dst, j: j), column(lambda dst, j: dst.uuid), column(lambda dst, j: dst.ts[j])))


def _copy_bytes(args: dict, e: Exec, buffers: dict[Any, Alloc], dur: int) -> None:
    """A copy's bytes from its buffers' allocations (exec bufs are [destination, source])."""
    a = next((buffers[b] for b in e.bufs if b in buffers), None)
    if a is None:
        return
    args[ARG_BYTES] = a.nbytes
    if dur > 0:
        args[ARG_GBS] = round(a.nbytes / dur, 3)
