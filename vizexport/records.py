"""Version-neutral records produced by the tinygrad readers. Nothing here knows a tinygrad release.

All timestamps are integer nanoseconds on the host clock (device clock offsets already applied).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Release:
    """Which tinygrad release wrote a pickle, and how sure we are."""

    name: str  # "0.14.0", "master", ... ("unknown" for an empty file)
    confidence: str  # "certain" | "likely" | "ambiguous" | "override"
    reason: str
    candidates: tuple[str, ...] = ()


@dataclass(slots=True)
class Key:
    """A TracingKey (or a plain name): display name without ANSI codes, its colour, and the payloads."""

    name: str
    color: str | None = None
    keys: tuple = ()
    ret: Any = None
    tb: tuple | None = None  # ((file, line, function, code), ...)
    cat: str | None = None


@dataclass(slots=True)
class Span:
    """A device or host range: ProfileRangeEvent, or one entry of a graph batch (graph >= 0)."""

    device: str
    key: Key
    st: int
    en: int | None  # None: never ended (zero length)
    profile_key: bytes | None = None
    graph: int = -1
    is_copy: bool = False


@dataclass(slots=True)
class Point:
    """A ProfilePointEvent: kind is its name ("alloc", "free", "exec", "marker", ...); arg normalised per kind."""

    device: str
    kind: str
    ts: int
    key: Any
    arg: Any


@dataclass(slots=True)
class Alloc:
    nbytes: int
    dtype: str
    count: int


@dataclass(slots=True)
class Exec:
    name: str
    color: str | None
    var_vals: dict
    bufs: list
    inputs: tuple
    outputs: tuple
    metadata: tuple = ()


@dataclass(slots=True)
class Marker:
    name: str
    color: str | None


@dataclass(slots=True)
class GraphBatch:
    """A ProfileGraphEvent: entries are indexes into Profile.spans; deps as in the pickle; sigs in ns (host clock
    not applied: each entry's own device offset is)."""

    device: str
    entries: list[int]
    deps: list
    sigs: list[int]


@dataclass(slots=True)
class Program:
    device: str
    name: str
    lib: bytes | None
    base: int | None
    tag: int | None = None
    profile_key: bytes | None = None


@dataclass(slots=True)
class DeviceInfo:
    device: str
    tdiff_ns: int
    copy_tdiff_ns: int
    props: dict | None


@dataclass(slots=True)
class PMCSample:
    name: str
    block: str
    xcc: int
    inst: int
    se: int
    sa: int
    wgp: int
    off: int
    size: int
    regsample: str


@dataclass(slots=True)
class Capture:
    """An SQTT, PMC or PMA record of one kernel launch (kind: "sqtt" | "pmc" | "pma")."""

    kind: str
    device: str
    kern: Any
    blob: bytes
    exec_tag: Any = None
    se: int | None = None
    itrace: bool | None = None
    sched: list[PMCSample] = field(default_factory=list)
    profile_key: bytes | None = None


@dataclass
class Profile:
    path: str
    release: Release
    n_events: int
    spans: list[Span] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    graphs: list[GraphBatch] = field(default_factory=list)
    programs: list[Program] = field(default_factory=list)
    devices: list[DeviceInfo] = field(default_factory=list)  # one per ProfileDeviceEvent (a later one wins)
    captures: list[Capture] = field(default_factory=list)
    unknown: dict[str, int] = field(default_factory=dict)  # classes we do not read, with counts


@dataclass(slots=True)
class UOpRec:
    """One node of the UOp table: op number and name (from the release's table), dtype text, source ids."""

    op: int
    op_name: str
    dtype: str
    src: tuple[int, ...]
    arg: Any
    tag: Any = None


@dataclass(slots=True)
class Match:
    before: int
    after: int | None  # None: the pattern did not match (0.10.0 records visits too)
    loc: tuple[str, int] | None
    seconds: float | None


@dataclass(slots=True)
class Rewrite:
    name: str
    loc: tuple[str, int] | None
    sink: int
    matches: list[Match]
    depth: int = 0
    bottom_up: bool = False
    walk: bool = False
    enter_calls: bool = False


@dataclass(slots=True)
class Context:
    key: Key
    rewrites: list[Rewrite]
    source: str | None = None  # generated kernel source, for codegen contexts


@dataclass
class RewriteLog:
    path: str
    release: Release
    contexts: list[Context]
    uops: dict[int, UOpRec]
