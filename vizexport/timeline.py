"""The neutral timeline model between readers and writers: a tree of tracks holding slices, instants or counters.

Columns of ints (array('q')) rather than an object per event keep millions of events cheap. Writers stream from it.
A slice track never holds partial overlaps (the reader assigns overlapping work to extra lanes), and its events are
stored in the order writers emit them: by start time, outer slices before the slices they contain.
"""
from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from .launchtable import LaunchTable
from .limits import capped


class Role(str, Enum):
    """What a track is, so that writers and analyses never guess it from names."""

    HOST = "host"  # a host root (compiler, Tensor API, GC) or one of its slice tracks: Python-side spans
    DEVICE = "device"  # a device's root group
    QUEUE = "queue"  # work a device's own queue ran (kernels; copies where the device does them itself)
    COPY = "copy"  # a copy engine's work
    GRAPH = "graph"  # JIT graph batches (each entry is also on its own queue track)
    MEMORY = "memory"  # live buffer bytes (a counter)
    BUFFERS = "buffers"  # buffer lifetimes (slices), the memory counter buffer by buffer
    LAUNCHES = "launches"  # host launches (instants), each with flows to the device work it started
    MARKERS = "markers"  # user markers (instants)
    SQTT = "sqtt"  # an AMD thread trace: launch groups, shader units, waves, their counters
    PMA = "pma"  # NVIDIA PMA stall samples of a launch


# Slice arguments with a meaning beyond display: readers set them, and the ones a launch has repeat its row of the
# launch table (Timeline.launches), which analyses read. Every other argument is shown as it is.
ARG_PROGRAM = "profile_key"  # the launched program (hex key)
ARG_GFLOPS = "GFLOPS"  # achieved, from the program's compile-time estimate
ARG_GBS_MEM = "GB/s mem"
ARG_GBS_LDS = "GB/s lds"
ARG_BYTES = "bytes"  # bytes a copy moved
ARG_GBS = "GB/s"  # a copy's bandwidth
ARG_EXEC = "exec"  # key of the launch's host-side exec event (records.Point, kind "exec"): when the host launched it
ARG_METADATA = "metadata"  # what led to the launch or span (tinygrad: Tensor calls), as text
ARG_TB = "tb"  # a host span's Python traceback: "file:line function\n    code" per frame, innermost first
ARG_LAUNCH_LATENCY = "launch latency"  # ns from the host launch (its exec event) to the device work's start

# Trace-level metadata keys (Timeline.metadata), besides `device <name>` entries (the device's properties as JSON).
META_NAME = "trace name"
META_RELEASE = "tinygrad release"

# Kinds of flows: what a flow between two events means (Chrome JSON names and categorises flows by it).
FLOW_DEP = "dep"  # a JIT graph entry waits for another
FLOW_LAUNCH = "launch"  # a host launch started this device work


@dataclass(frozen=True)
class Frame:
    """One frame of a (Python) callstack."""

    file: str
    line: int
    function: str

    def label(self) -> str:
        """How writers name the frame: the function and where it is, so that stacks aggregate per call site."""
        return f"{self.function} ({self.file.rsplit('/', 1)[-1]}:{self.line})"


@dataclass(eq=False)
class Track:
    uuid: int
    name: str
    parent: int  # uuid of the parent track, 0 for a root
    rank: int  # order among siblings (explicit ordering)
    kind: str  # "group" | "slice" | "counter"
    role: Role
    description: str = ""
    unit: str = ""  # counters: "bytes", "count", ...
    ts: array = field(default_factory=lambda: array("q"))  # ns, host clock
    dur: array = field(default_factory=lambda: array("q"))  # slices: ns, -1 = instant
    names: array = field(default_factory=lambda: array("i"))  # slices: string ids (Timeline.strings), int32
    values: array = field(default_factory=lambda: array("q"))  # counters
    args: dict[int, dict] = field(default_factory=dict)  # event index → args (sparse: most events have none)
    flows_out: dict[int, list[int]] = field(default_factory=dict)  # event index → flow ids it starts
    flows_in: dict[int, list[int]] = field(default_factory=dict)  # event index → flow ids it ends
    stacks: dict[int, int] = field(default_factory=dict)  # event index → its callstack (index into Timeline.stacks)

    def __len__(self) -> int:
        return len(self.ts)


class Timeline:
    def __init__(self, title: str = "") -> None:
        self.title = title
        self.device_props: dict[str, dict] = {}  # device string → the properties the profile recorded for it
        self.tracks: list[Track] = []
        self.strings: list[str] = []
        self._ids: dict[str, int] = {}
        self._n_children: dict[int, int] = {}
        self.flow_kinds: dict[int, str] = {}  # flow id → FLOW_*, where not FLOW_DEP
        self.metadata: dict[str, str] = {}  # META_* and other trace-level facts, as text
        self.stacks: list[tuple[Frame, ...]] = []  # callstacks, outermost frame first
        self._stack_ids: dict[tuple[Frame, ...], int] = {}
        self._next_flow = 1
        self.launches = LaunchTable()  # the device launches as columns (filled by the reader; a window's: its run's)

    def empty_like(self) -> Timeline:
        """A timeline without tracks that shares this one's names, callstacks and flow kinds (their ids mean the
        same in both), launch table (its rows index this one's tracks), metadata and device properties: what a window
        of it is filled into."""
        out = Timeline(self.title)
        out.strings, out._ids, out.launches = self.strings, self._ids, self.launches
        out.stacks, out._stack_ids, out.flow_kinds = self.stacks, self._stack_ids, self.flow_kinds
        out.metadata, out.device_props = self.metadata, self.device_props
        return out

    def flows(self, src: Sequence[Track], i: Iterable[int], dst: Sequence[Track], j: Iterable[int],
              kind: str = FLOW_DEP) -> range:
        """New flows, numbered in order: from event i[k] of src[k] to event j[k] of dst[k]. Returns their ids."""
        ids = range(self._next_flow, self._next_flow + len(src))
        self._next_flow = ids.stop
        for f, track, e in zip(ids, src, i, strict=True):
            track.flows_out.setdefault(e, []).append(f)
        for f, track, e in zip(ids, dst, j, strict=True):
            track.flows_in.setdefault(e, []).append(f)
        if kind != FLOW_DEP:
            self.flow_kinds.update(dict.fromkeys(ids, kind))
        return ids

    def intern(self, s: str) -> int:
        """The id of a slice name (at most NAME_CAP characters are kept: see limits.capped)."""
        i = self._ids.get(s)
        if i is None:
            i = self._ids[s] = len(self.strings)
            self.strings.append(capped(s))
        return i

    def trace_metadata(self) -> dict[str, str]:
        """What writers record about the whole trace: `metadata` and each device's properties (`device <name>`, as
        JSON)."""
        props = {f"device {d}": json.dumps(p, default=str, sort_keys=True) for d, p in self.device_props.items()}
        return {**self.metadata, **props}

    def intern_stack(self, frames: tuple[Frame, ...]) -> int:
        """The id of a callstack (outermost frame first)."""
        i = self._stack_ids.get(frames)
        if i is None:
            i = self._stack_ids[frames] = len(self.stacks)
            self.stacks.append(frames)
        return i

    def add_track(self, name: str, parent: Track | None, kind: str, role: Role, **kw: Any) -> Track:
        """A new track, shown after its existing siblings."""
        pid = parent.uuid if parent is not None else 0
        self._n_children[pid] = rank = self._n_children.get(pid, 0) + 1
        t = Track(len(self.tracks) + 1, capped(name), pid, rank, kind, role, **kw)
        self.tracks.append(t)
        return t

    def move_last(self, n: int, at: int) -> dict[int, int]:
        """Move the n tracks added last to index `at`, as if added when the timeline had `at` tracks: uuids, parents
        and ranks (the order siblings were added in) follow. Returns the new uuid of each track whose uuid changed."""
        tracks = self.tracks[:len(self.tracks) - n]
        tracks[at:at] = self.tracks[len(self.tracks) - n:]
        new = {t.uuid: i for i, t in enumerate(tracks, 1)}
        self._n_children = {}
        for t in tracks:
            t.uuid, t.parent = new[t.uuid], new.get(t.parent, 0)
            t.rank = self._n_children[t.parent] = self._n_children.get(t.parent, 0) + 1
        self.tracks = tracks
        return {old: uuid for old, uuid in new.items() if old != uuid}

    def children(self, t: Track | None) -> list[Track]:
        uuid = t.uuid if t is not None else 0
        return sorted((c for c in self.tracks if c.parent == uuid), key=lambda c: c.rank)

    def walk(self) -> list[Track]:
        """All tracks, parents before children, siblings in rank order."""
        out, stack = [], self.children(None)[::-1]
        while stack:
            t = stack.pop()
            out.append(t)
            stack.extend(self.children(t)[::-1])
        return out

    def path(self, t: Track) -> list[Track]:
        by_uuid = {x.uuid: x for x in self.tracks}
        out = [t]
        while out[-1].parent:
            out.append(by_uuid[out[-1].parent])
        return out[::-1]

    def n_events(self) -> int:
        return sum(len(t) for t in self.tracks)


def slice_events(ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The BEGIN (or instant, dur -1) and END events of a slice track's events, in the order a properly nested track
    opens and closes them: (time, slice index, is END). At one time ENDs come first, innermost first (as a stack of
    open slices pops them), then BEGINs in track order; a zero-length slice ends right after it begins."""
    n = len(ts)
    i = np.arange(n, dtype=np.int32 if n < 1 << 29 else np.int64)  # halves the index columns of big tracks
    closed = dur >= 0
    ci, cdur, cts = (i, dur, ts) if closed.all() else (i[closed], dur[closed], ts[closed])  # (no copies: no instants)
    time = np.empty(n + len(cts), np.int64)
    time[:n] = ts
    np.add(cts, cdur, out=time[n:])
    group = np.concatenate((np.ones(n, np.int8), (cdur == 0).astype(np.int8)))
    within = np.concatenate((2 * i, np.where(cdur == 0, 2 * ci + 1, -ci)))
    order = np.lexsort((within, group, time))
    del within, group  # big tracks: the returned columns need the room
    return time[order], np.concatenate((i, ci))[order], order >= n
