"""Every device launch of a run as typed columns: what `top`, the report, the diff and the kineto writer read.

The reader fills the table while it lays launches out on their tracks, since it knows the release's naming: which
program a launch ran, what kind of work it is, its compile-time estimates, and which host launch started it.
Analyses and writers read these columns. A slice's args only repeat them for display.

Rows are the events of the launch tracks (device queues, copy engines, JIT graph batches), track by track in timeline
order, each track's events in its own order: row `first[k] + i` is event i of the track whose uuid is `tracks[k]`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# what kind of work a launch is (the reader decides it from the release's naming)
ELEMENTWISE = "elementwise"
REDUCE = "reduce"
TENSOR_CORES = "matmul (tensor cores)"
COPY = "copy"
GRAPH = "graph batch"
OTHER = "other"
CATEGORIES = (ELEMENTWISE, REDUCE, TENSOR_CORES, COPY, GRAPH, OTHER)  # the category column's codes index this
NONE = -1  # no program, exec event or latency


def rate(figure: float, dur: int) -> float:
    """A launch's figure (FLOPs or bytes) over its duration (ns, > 0) in G/s, rounded as its slice's args show it."""
    return round(figure / (dur * 1e-9) * 1e-9, 3)


def rates(figures: np.ndarray, dur: np.ndarray) -> list[float]:
    """`rate` of each launch (the same float operations, a column at a time): what the analyses weigh by time."""
    return [round(x, 3) for x in (figures / (dur * 1e-9) * 1e-9).tolist()]


@dataclass
class LaunchRows:
    """Launches of one track as the reader adds them (see LaunchTable for the columns)."""

    ts: np.ndarray
    dur: np.ndarray
    name: np.ndarray
    program: list[bytes | None]  # the program's key per launch
    category: np.ndarray
    flops: np.ndarray
    mem: np.ndarray
    lds: np.ndarray


@dataclass(eq=False)
class LaunchTable:
    """Every launch (see the module's docstring)."""

    tracks: list[int] = field(default_factory=list)  # uuids of the launch tracks, in timeline order
    first: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # rows of tracks[k]: first[k]:first[k+1]
    programs: list[bytes] = field(default_factory=list)  # the program keys launched: the program column's codes
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # start, ns, host clock
    dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ns; -1: an instant
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # Timeline.strings id, as shown
    program: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # index into programs, or NONE
    category: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))  # index into CATEGORIES
    flops: np.ndarray = field(default_factory=lambda: np.zeros(0))  # compile-time estimates (NaN: none)
    mem: np.ndarray = field(default_factory=lambda: np.zeros(0))  # bytes loaded and stored
    lds: np.ndarray = field(default_factory=lambda: np.zeros(0))  # bytes of local memory
    exec: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # Profile.points index of its exec, NONE
    latency: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ns from that exec to start, NONE
    _at: dict[int, int] = field(default_factory=dict, repr=False)  # track uuid → its k

    def __post_init__(self) -> None:
        self._at = {uuid: k for k, uuid in enumerate(self.tracks)}

    def __len__(self) -> int:
        return len(self.ts)

    def rows(self, uuid: int) -> slice:
        """The rows of a track's events (none for a track that holds no launches)."""
        k = self._at.get(uuid)
        return slice(0, 0) if k is None else slice(int(self.first[k]), int(self.first[k + 1]))

    def row(self, uuid: int, i: int) -> int:
        """The row of event i of a launch track."""
        return int(self.first[self._at[uuid]]) + i

    def link(self, rows: np.ndarray, exec_points: np.ndarray, latencies: np.ndarray) -> None:
        """The host launch (an exec event, by its index in Profile.points) that started each launch of `rows`, and
        its latency."""
        self.exec[rows], self.latency[rows] = exec_points, latencies

    def category_names(self, category: str) -> set[tuple[int, int]]:
        """(track uuid, name id) of the launches of a category."""
        k = np.repeat(np.arange(len(self.tracks)), np.diff(self.first))
        mine = np.flatnonzero(self.category == CATEGORIES.index(category))
        uuids = np.array(self.tracks, np.int64)[k[mine]] if len(mine) else mine
        return set(zip(uuids.tolist(), self.name[mine].tolist(), strict=True))


_PER_ROW = ("ts", "dur", "name", "category", "flops", "mem", "lds")


class LaunchTableBuilder:
    """A LaunchTable made track by track, tracks added in any order (lanes of a JIT graph grow side by side)."""

    def __init__(self) -> None:
        self.parts: dict[int, LaunchRows] = {}
        self.codes: dict[bytes, int] = {}

    def add(self, uuid: int, rows: LaunchRows) -> None:
        self.parts[uuid] = rows

    def table(self, order: Sequence[int]) -> LaunchTable:
        """The table, its tracks in `order` (uuids: the timeline's order; tracks never added hold no launches)."""
        tracks = [u for u in order if u in self.parts]
        parts = [self.parts[u] for u in tracks]
        n = sum(len(p.ts) for p in parts)
        first = np.cumsum([0, *(len(p.ts) for p in parts)], dtype=np.int64)
        empty = LaunchTable()
        cols = {f: np.concatenate([getattr(p, f) for p in parts] or [getattr(empty, f)],
                                  dtype=getattr(empty, f).dtype) for f in _PER_ROW}
        codes = self.codes
        program = np.fromiter((NONE if k is None else codes.setdefault(k, len(codes))
                               for p in parts for k in p.program), np.int32, n)
        return LaunchTable(tracks, first, list(codes), program=program, exec=np.full(n, NONE, np.int64),
                           latency=np.full(n, NONE, np.int64), **cols)

