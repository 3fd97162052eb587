"""Version-neutral records: what the readers produce (Profile, RewriteLog) and the step-graph model writers draw
(StepGraphs). Nothing here knows a tinygrad release.

All timestamps are integer nanoseconds on the host clock (device clock offsets already applied).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from functools import partial
from itertools import chain
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

from .devices import is_copy_engine

INT64 = 1 << 63  # the ints the model keeps (times in ns, sizes, ids) are int64: numpy columns, varints
OPTIONAL = {"optional": True}  # dataclass field metadata: left out of the JSON form while None


def _pickled_by_fields(cls: type) -> type:
    """Pickle as cls(*fields): half the bytes and time, both ways, of a slots dataclass's own state functions (a big
    stream's back half sends its points from a forked process)."""
    get = attrgetter(*(f.name for f in fields(cls)))
    cls.__reduce__ = lambda self: (cls, get(self))  # type: ignore[method-assign]
    return cls


@dataclass(frozen=True)
class Release:
    """Which tinygrad release wrote a pickle, and how sure we are."""

    name: str  # "0.14.0", "master", ... ("unknown" for an empty file)
    confidence: str  # "certain" | "likely" | "ambiguous" | "override"
    reason: str
    candidates: tuple[str, ...] = ()


@dataclass(slots=True)
class Key:
    """A TracingKey (or a plain name): display name without ANSI codes, its colour, and the payloads that mean
    something outside tinygrad."""

    name: str
    color: str | None = None
    keys: tuple[str | bytes, ...] = ()  # links to rewrite contexts: names and program keys
    ret: int | str | None = None  # a copy's byte count, or metadata text
    tb: tuple[tuple[str, int, str, str], ...] | None = None  # Python traceback: (file, line, function, code), ...
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


_I32, _I64, _BOOL = (partial(np.zeros, 0, t) for t in (np.int32, np.int64, np.bool_))  # empty columns


_ROWS = 1 << 16  # spans made at a time when a whole table is iterated
_SCANNED_DEVICES = 16  # up to this many devices, by_device finds each one's rows by a pass over the column


@dataclass(eq=False, repr=False)
class SpanTable:
    """Profile.spans: every range and graph entry of a profile as columns, a row each in the profile's order (graph
    batches index rows). A long run holds tens of millions: ~35 bytes a row here instead of a Span object (and its
    two ints) each, ~160 bytes. Indexing or iterating gives Spans, made on demand for the rows a caller looks at;
    bulk work reads the columns."""

    devices: list[str] = field(default_factory=list)  # device code → device string
    keys: list[Key] = field(default_factory=list)  # key code → Key (one code per Key object)
    profile_keys: list[bytes | None] = field(default_factory=list)  # program key code → key
    device: np.ndarray = field(default_factory=_I32)
    key: np.ndarray = field(default_factory=_I32)
    st: np.ndarray = field(default_factory=_I64)
    en: np.ndarray = field(default_factory=_I64)  # st where never ended
    ended: np.ndarray = field(default_factory=_BOOL)
    profile_key: np.ndarray = field(default_factory=_I32)
    graph: np.ndarray = field(default_factory=_I32)
    is_copy: np.ndarray = field(default_factory=_BOOL)

    @classmethod
    def of(cls, spans: Iterable[Span]) -> SpanTable:
        """A table of Span objects (tests, small profiles made by hand)."""
        spans = list(spans)
        t = cls()
        codes = lambda values, table: [table.setdefault(v, len(table)) for v in values]  # noqa: E731
        devices, keys, pks = {}, {}, {}
        t.device = np.array(codes([s.device for s in spans], devices), np.int32)
        key_codes = codes([id(s.key) for s in spans], keys)
        t.keys = list({id(s.key): s.key for s in spans}.values())
        t.key = np.array(key_codes, np.int32)
        t.st = np.array([s.st for s in spans], np.int64)
        t.ended = np.array([s.en is not None for s in spans], np.bool_)
        t.en = np.array([s.st if s.en is None else s.en for s in spans], np.int64)
        t.profile_key = np.array(codes([s.profile_key for s in spans], pks), np.int32)
        t.graph = np.array([s.graph for s in spans], np.int32)
        t.is_copy = np.array([s.is_copy for s in spans], np.bool_)
        t.devices, t.profile_keys = list(devices), list(pks)
        return t

    def __len__(self) -> int:
        return len(self.st)

    def __eq__(self, other: object) -> bool:
        """The same spans, row by row (whatever their codes)."""
        return isinstance(other, SpanTable) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"SpanTable({len(self):,} spans on {', '.join(self.devices)})"

    def __getitem__(self, i: int) -> Span:
        return self.rows([i])[0]

    def __iter__(self) -> Iterator[Span]:
        for at in range(0, len(self), _ROWS):
            yield from self.rows(range(at, min(at + _ROWS, len(self))))

    def rows(self, idx: Iterable[int] | np.ndarray) -> list[Span]:
        """The Spans of these rows, in that order."""
        idx = np.fromiter(idx, np.int64) if not isinstance(idx, np.ndarray) else idx
        if len(idx) and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError("span row out of range")
        devices, keys, pks = self.devices, self.keys, self.profile_keys
        return [Span(devices[d], keys[k], st, en if ended else None, pks[p], g, c) for d, k, st, en, ended, p, g, c
                in zip(*(getattr(self, f)[idx].tolist() for f in SPAN_COLUMNS), strict=True)]

    def batch_extents(self, batches: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Per batch of rows (each non-empty): its first start and its last end (an end of 0 counting as its start)."""
        if not batches:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows = np.fromiter(chain.from_iterable(batches), np.int64)
        at = np.cumsum([0, *map(len, batches)])[:-1]
        st, en = self.st[rows], self.en[rows]
        return np.minimum.reduceat(st, at), np.maximum.reduceat(np.where(en == 0, st, en), at)

    def copies(self, idx: np.ndarray) -> np.ndarray:
        """Which of these rows are copies rather than kernels, as devices.is_copy tells a Span."""
        by_key = np.array([isinstance(k.ret, int) for k in self.keys] or [False], np.bool_)
        by_device = np.array([is_copy_engine(d) for d in self.devices] or [False], np.bool_)
        return self.is_copy[idx] | by_key[self.key[idx]] | by_device[self.device[idx]]

    def where_device(self, keep: Callable[[str], bool]) -> np.ndarray:
        """The rows (ascending) whose device string `keep` accepts."""
        codes = [c for c, d in enumerate(self.devices) if keep(d)]
        return np.flatnonzero(np.isin(self.device, codes))

    def by_device(self) -> dict[str, np.ndarray]:
        """Each device string's rows (ascending), devices in order of first appearance."""
        counts = np.bincount(self.device, minlength=len(self.devices))
        if np.count_nonzero(counts) <= _SCANNED_DEVICES:  # a pass per device: a few times faster than sorting
            parts = [np.flatnonzero(self.device == c) if n else np.zeros(0, np.intp) for c, n in enumerate(counts)]
        else:
            parts = np.split(np.argsort(self.device, kind="stable"), np.cumsum(counts)[:-1])
        present = sorted((c for c, rows in enumerate(parts) if len(rows)), key=lambda c: parts[c][0])
        return {self.devices[c]: parts[c] for c in present}


SPAN_COLUMNS = ("device", "key", "st", "en", "ended", "profile_key", "graph", "is_copy")


@_pickled_by_fields
@dataclass(slots=True)
class Point:
    """A ProfilePointEvent: kind is its name ("alloc", "free", "exec", "marker", ...); arg normalised per kind."""

    device: str
    kind: str
    ts: int
    key: Any
    arg: Any


@_pickled_by_fields
@dataclass(slots=True)
class Alloc:
    nbytes: int
    dtype: str
    count: int


@_pickled_by_fields
@dataclass(slots=True)
class Exec:
    name: str
    color: str | None
    var_vals: dict
    bufs: list
    inputs: tuple
    outputs: tuple
    metadata: tuple[str, ...] = ()  # names of the Tensor calls that led to the launch

    def mode(self, n: int) -> str:
        """How the launch uses its buffer n: "in", "out" or "inout"."""
        return "inout" if n in self.inputs and n in self.outputs else "out" if n in self.outputs else "in"


@_pickled_by_fields
@dataclass(slots=True)
class Marker:
    name: str
    color: str | None


@_pickled_by_fields
@dataclass(slots=True)
class GraphBatch:
    """A ProfileGraphEvent: entries are indexes into Profile.spans; deps as in the pickle; sigs in ns (host clock
    not applied: each entry's own device offset is)."""

    device: str
    entries: list[int]
    deps: list
    sigs: list[int]


@dataclass(slots=True)
class ControlFlow:
    """A program's control-flow graph over its listing: blocks as [first, end) line ranges, edges (from block, to
    block, "always" | "taken" | "not taken"), and the cycles traced waves spent in each block (measured: False when
    no SQTT capture ran the program, and the cycles are all 0)."""

    blocks: list[tuple[int, int]]
    edges: list[tuple[int, int, str]]
    cycles: list[int]
    measured: bool = False


@dataclass(slots=True)
class InstRow:
    """One instruction of a program as one traced wave ran it: its totals and each execution ("hit") as
    (n, clk, idle, dur, stall) in the wave's cycles. `pc` is the offset from the program's first instruction."""

    pc: int
    text: str
    hits: int
    cycles: int  # the sum of the hits' durations
    stall: int
    type: str  # the first hit's category (SALU, VALU, SMEM, VMEM, LDS, IMMED, JUMP, NEXT, MESSAGE, ...), "" if none
    runs: list[tuple[int, int, int, int, int]] = field(default_factory=list)


@dataclass(slots=True)
class WaveInsts:
    """The per-instruction table of one instruction-traced wave of a kernel launch (tinygrad's `sqtt-insts`)."""

    launch: str  # which launch of the program, e.g. "n2 (exec 5)"
    se: int
    cu: int
    simd: int
    slot: int
    start: int  # the wave's first cycle (Clk values are on the same clock)
    cycles: int  # start to end
    rows: list[InstRow] = field(default_factory=list)

    def code_rows(self) -> list[InstRow]:
        """The rows without the padding after the program's last instruction that the wave never ran (s_code_end on
        RDNA, s_nop on CDNA)."""
        last = max((k for k, r in enumerate(self.rows) if r.hits or r.text.startswith("s_endpgm")), default=-1)
        return [r for k, r in enumerate(self.rows) if k <= last or not r.text.startswith(("s_code_end", "s_nop"))]


@dataclass(slots=True)
class Listing:
    """A program's machine code as text (AMD GPU disassembly), one line per instruction, for writers to show, and the
    per-instruction tables of the waves SQTT traced through it; without lines, `missing` says why there are none."""

    device: str
    name: str
    key: bytes | None  # the program's profile_key (0.14+)
    lines: list[str]
    cfg: ControlFlow | None = None
    waves: list[WaveInsts] = field(default_factory=list)
    missing: str = ""  # why the program could not be disassembled here ("" when it was)


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
    kern: int | str | None  # the program's tag (0.13+) or name (0.12)
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
    spans: SpanTable = field(default_factory=SpanTable)
    points: list[Point] = field(default_factory=list)
    graphs: list[GraphBatch] = field(default_factory=list)
    programs: list[Program] = field(default_factory=list)
    devices: list[DeviceInfo] = field(default_factory=list)  # one per ProfileDeviceEvent (a later one wins)
    captures: list[Capture] = field(default_factory=list)
    unknown: dict[str, int] = field(default_factory=dict)  # classes we do not read, with counts
    untimed_why: dict[str, str] = field(default_factory=dict)  # root device → why its device may time no launch
    host_spans: bool = True  # False: read without the host's ranges (TINY, USER, GC), for device work only

    def memory(self) -> dict[str, tuple[list[int], list[int]]]:
        """Per device with allocations or frees: (times, live buffer bytes after each), in time order. An alloc adds
        its bytes, a free takes away what its buffer's alloc added; the maximum is the device's memory peak."""
        out: dict[str, tuple[list[int], list[int]]] = {}
        live: dict[str, dict[Any, int]] = {}
        for pt in sorted((pt for pt in self.points if pt.kind in ("alloc", "free")), key=lambda pt: pt.ts):
            ts, totals = out.setdefault(pt.device, ([], []))
            bufs = live.setdefault(pt.device, {})
            total = totals[-1] if totals else 0
            if pt.kind == "alloc" and isinstance(pt.arg, Alloc):
                bufs[pt.key] = pt.arg.nbytes
                total += pt.arg.nbytes
            else:
                total -= bufs.pop(pt.key, 0)
            ts.append(pt.ts)
            totals.append(total)
        return out


@dataclass(slots=True)
class UOpRec:
    """One node of the UOp table: op number and name (from the release's table), dtype text, source ids.

    `arg` and `tag` are kept as read (plain values or the unpickler's inert stand-ins): only the tinygrad readers
    interpret them (replay, estimates). Writers see nodes through step graphs (StepNodes), never these."""

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


class KernelCost(Protocol):
    """A kernel's compile-time estimates, as its release's viewer evaluates them for one launch."""

    def figures(self, var_vals: dict[str, int]) -> tuple[float | int | None, float | int | None, float | int | None]:
        """(FLOPs, bytes loaded and stored, bytes of memory touched) with these variable values; None for a figure
        the release would not show."""


@dataclass(slots=True)
class Context:
    key: Key
    rewrites: list[Rewrite]
    source: str | None = None  # generated kernel source, for codegen contexts
    cost: KernelCost | None = None  # compile-time estimates, for codegen contexts
    program: list[str] | None = None  # the final program's UOp list (one line per UOp), for codegen contexts


@dataclass
class RewriteLog:
    """A rewrites trace as read: the input of replay (tinygrad.replay.step_graphs), which writers draw from."""

    path: str
    release: Release
    contexts: list[Context]
    uops: dict[int, UOpRec]


# ---- step graphs: each rewrite replayed, one graph per match (made by a reader, drawn by graphs/ and site/) ------

class StepNodes(Protocol):
    """The nodes of the step graphs of one replay session. A node is an int indexing `op` and `src`; equal nodes are
    one node, so the graphs of consecutive steps share most of theirs. How a node looks is the reader's to say (as
    the release's own viewer shows it); how graphs are laid out is the writers'."""

    op: list[str]
    src: list[tuple[int, ...]]

    def label(self, n: int) -> str:
        """The text of n's box: op name, argument lines, dtype, tag, one per line."""

    def fill(self, n: int) -> str:
        """The fill colour of n's box (#rrggbb)."""

    def foldable(self, n: int) -> bool:
        """Whether n is shown as a line inside its users' boxes rather than as a box of its own (constants)."""

    def fold_rule(self, n: int) -> str:
        """What foldable(n) is made of, for writers that work it out themselves: "never", "always", or "as_source"
        (foldable when its first source is: a broadcast of a constant folds, and shows that constant)."""

    def origins(self) -> dict[int, int]:
        """Each node that copies another with other sources (the same label, fill and rule: a user rebuilt around a
        change) → that node; a writer may store a copy as its origin and the sources that differ."""

    def folded(self, n: int) -> tuple[str, str]:
        """(op, argument text) that a folded node shows in its user's box."""

    def text(self, n: int) -> str:
        """n on one line (op, dtype, argument, tag), for text dumps and diffs."""

    def look_key(self, n: int) -> Hashable:
        """Equal for nodes whose label, fill and text are equal (nodes that differ only in their sources)."""


@dataclass
class GraphStep:
    """The graph after `index` matches (0: the input graph) of one rewrite."""

    index: int
    match: int | None = None  # index into Rewrite.matches (None for the input graph)
    sink: int | None = None  # root of the graph (None: not replayed)
    before: int | None = None  # the matched node (u0)
    after: int | None = None  # its replacement (u1)
    created: frozenset[int] = frozenset()  # nodes of u1 that are new in this graph
    rebuilt: frozenset[int] = frozenset()  # other new nodes (users rebuilt around the replacement)
    size: int = 0  # nodes in the graph
    error: str | None = None


@dataclass
class RewriteSteps:
    """One rewrite replayed: its graph before the first match and after each match."""

    rewrite: Rewrite
    steps: list[GraphStep] = field(default_factory=list)

    @property
    def final(self) -> int | None:
        """Root of the last replayed graph (None if not even the input could be rebuilt)."""
        return next((s.sink for s in reversed(self.steps) if s.sink is not None), None)


class ReplaySession(Protocol):
    """Rewrites replayed into one set of nodes (share a session within a context: chained rewrites share nodes)."""

    nodes: StepNodes

    def replay(self, rw: Rewrite, changes: bool = True) -> RewriteSteps:
        """Without `changes`, the steps' created and rebuilt nodes are left empty (faster)."""
        ...


@dataclass
class StepGraphs:
    """The rewrite contexts of a trace and, replayed on demand, the graphs of their steps."""

    path: str
    release: Release
    contexts: list[Context]
    session: Callable[[], ReplaySession]  # a new replay session; cheap until used, so one per context or part


def to_json(x: Any) -> Any:
    """A record as JSON-ready values: dataclasses become dicts in field order (OPTIONAL fields left out while
    None), tuples become lists."""
    if is_dataclass(x) and not isinstance(x, type):
        out = {}
        for f in fields(x):
            v = getattr(x, f.name)
            if v is not None or not f.metadata.get("optional"):
                out[f.name] = to_json(v)
        return out
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_json(v) for v in x]
    return x
