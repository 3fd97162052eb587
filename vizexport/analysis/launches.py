"""Every launch of every kernel and copy, grouped per kernel as numpy columns: the one grouping that `top`, the
report, the diff and the site's kernel list share. A launch is a slice with a duration (as tinygrad's viewer draws
them) on a device queue or copy-engine track, or on a `<device> Graph` track for `top` (a JIT batch): a row of the
timeline's launch table (launchtable), whose columns give its program, category and estimates."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from ..launchtable import CATEGORIES, OTHER, LaunchTable, rates
from ..timeline import Role, Timeline, Track

DEVICE_ROLES = (Role.QUEUE, Role.COPY)
LAUNCH_ROLES = (*DEVICE_ROLES, Role.GRAPH)
KEY_TEXT = 8  # hex digits of a program key shown beside a name


@dataclass(frozen=True)
class KernelId:
    """A kernel or copy as the report and the diff tell them apart: its device track, name and program key."""

    device: str
    name: str
    key: bytes | None = None  # the launched program's key, where the profile has them (tinygrad 0.14+)

    @property
    def program(self) -> str | None:
        """The program's key as hex text, as outputs show it."""
        return None if self.key is None else self.key.hex()

    def label(self, key_digits: int = KEY_TEXT) -> str:
        return label(self.name, self.program, key_digits)


def label(name: str, program: str | None, key_digits: int = KEY_TEXT) -> str:
    """A kernel's name with its program's short key (hex), where it has one."""
    return f"{name} [{program[:key_digits]}]" if program else name


@dataclass
class Runs:
    """The launches of one kernel: start times and durations (ns) in time order, and its time-weighted rates."""

    kernel: KernelId
    category: str
    role: Role
    ts: np.ndarray
    dur: np.ndarray
    flops_ns: float = 0.0  # Σ GFLOPS·duration over the launches with estimates, in track order
    mem_ns: float = 0.0  # Σ GB/s·duration over the same launches
    weighted_ns: int = 0  # their summed duration
    where: list[tuple[Track, np.ndarray]] = field(default_factory=list)  # each track's launch indices, in order
    work: tuple[float | None, ...] = (None, None, None)  # Σ FLOPs, memory and LDS bytes of the launches with each
    # estimate, unrounded, in track order (None: no launch has it)

    @property
    def total_ns(self) -> int:
        return int(self.dur.sum())

    @property
    def count(self) -> int:
        return len(self.dur)

    @property
    def gflops(self) -> float | None:
        return self.flops_ns / self.weighted_ns if self.weighted_ns else None

    @property
    def gbs(self) -> float | None:
        return self.mem_ns / self.weighted_ns if self.weighted_ns else None


class Named(Protocol):
    """A kernel as Runs.kernel and kernels.Kernel name it."""

    device: str
    name: str
    program: str | None


def columns(t: Track) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A slice track's starts, durations and name ids as numpy arrays (views: no copy)."""
    return (np.frombuffer(t.ts, np.int64), np.frombuffer(t.dur, np.int64),
            np.frombuffer(t.names, f"i{t.names.itemsize}"))


def device_tracks(tl: Timeline) -> list[Track]:
    """The slice tracks of work devices ran: queues and copy engines."""
    return [t for t in tl.tracks if t.role in DEVICE_ROLES]


def launch_tracks(tl: Timeline, device: str | None = None) -> list[Track]:
    """Device queue, copy-engine and graph-batch tracks; `device`: only those of that device string or of its root
    device."""
    out = [t for t in tl.tracks if t.role in LAUNCH_ROLES]
    if device is None:
        return out
    roots = {t.uuid: t.name for t in tl.tracks if not t.parent}
    return [t for t in out if device in (t.name, roots.get(t.parent))]


def kernel_runs(tl: Timeline, by_program: bool = True, tracks: Sequence[Track] | None = None,
                window: tuple[int, int] | None = None) -> list[Runs]:
    """Launches grouped by (track name, kernel name, program key if `by_program`), longest total first. `tracks`:
    device queues and copy engines unless given (lanes of one name together); `window`: (start, end) ns, keeping
    launches that start inside (ends included)."""
    return sorted(group_launches(tl, by_program, tracks, window), key=by_total)


def by_total(r: Runs) -> tuple[int, str, str, str]:
    """Sort key: longest total first, then by device, name and program."""
    return -r.total_ns, r.kernel.device, r.kernel.name, r.kernel.program or ""


def group_launches(tl: Timeline, by_program: bool = True, tracks: Sequence[Track] | None = None,
                   window: tuple[int, int] | None = None) -> list[Runs]:
    """kernel_runs in the order of each kernel's first launching track (and, within a track, of name ids, then of
    programs in the order the track first launches them)."""
    parts: dict[KernelId, list[_Chunk]] = {}
    for t in device_tracks(tl) if tracks is None else tracks:
        for kid, chunk in _track_groups(tl, t, by_program, window):
            parts.setdefault(kid, []).append(chunk)
    return [_runs(kid, chunks) for kid, chunks in parts.items()]


def device_ns(runs: Iterable[Runs]) -> dict[str, int]:
    """Summed launch time per device, devices in the order of the runs."""
    out: dict[str, int] = {}
    for r in runs:
        out[r.kernel.device] = out.get(r.kernel.device, 0) + r.total_ns
    return out


def labels(kernels: Sequence[Named]) -> list[str]:
    """Each kernel's name, with its program's short key where several programs of one device share the name."""
    n = Counter((k.device, k.name) for k in kernels)
    return [label(k.name, k.program) if n[(k.device, k.name)] > 1 else k.name for k in kernels]


class _Chunk(NamedTuple):
    """A kernel's launches on one track, in track order."""

    track: Track
    index: np.ndarray  # of the launches on the track
    category: int  # of the first (a kernel's launches share it)
    ts: np.ndarray
    dur: np.ndarray
    rated: np.ndarray  # durations of the launches with estimates
    flops: np.ndarray  # their GFLOPS·duration
    mem: np.ndarray  # their GB/s·duration
    work: tuple[np.ndarray, ...]  # FLOPs, memory and LDS bytes of the launches with each estimate (unrounded)


class _Columns(NamedTuple):
    """The launches of a launch track, or the slices of another (the host's spans: `top --host`)."""

    ts: np.ndarray
    dur: np.ndarray
    names: np.ndarray
    category: np.ndarray  # codes into CATEGORIES
    code: np.ndarray  # program codes (see _program_codes)
    keys: list[bytes]
    work: tuple[np.ndarray, ...] | None  # FLOPs, memory bytes, LDS bytes (NaN: no estimate); None: slices (none)


def _columns(tl: Timeline, t: Track, by_program: bool) -> _Columns:
    """A track's columns: a launch track's from the launch table, another's (the host's spans) from its slices."""
    tab = tl.launches
    if t.role not in LAUNCH_ROLES:  # slices with no program, estimates or category of their own
        ts, dur, names = columns(t)
        n = len(ts)
        return _Columns(ts, dur, names, np.full(n, CATEGORIES.index(OTHER), np.int8), np.zeros(n, np.int64), [], None)
    rows = tab.rows(t.uuid)
    code, keys = _program_codes(tab, rows) if by_program else (np.zeros(len(tab.ts[rows]), np.int64), [])
    work = (tab.flops[rows], tab.mem[rows], tab.lds[rows])
    return _Columns(tab.ts[rows], tab.dur[rows], tab.name[rows], tab.category[rows], code, keys, work)


def _track_groups(tl: Timeline, t: Track, by_program: bool, window: tuple[int, int] | None
                  ) -> Iterator[tuple[KernelId, _Chunk]]:
    """Each kernel launched on track `t` with its launches there (inside `window`, if given)."""
    ts, dur, names, cats, code, keys, work = _columns(tl, t, by_program)
    base = len(keys) + 1
    keep = dur > 0
    if window is not None:
        keep &= (ts >= window[0]) & (ts <= window[1])
    idx = np.flatnonzero(keep)
    uniq, inverse = np.unique(names[idx].astype(np.int64) * base + code[idx], return_inverse=True)
    grouped = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[grouped], np.arange(len(uniq) + 1))
    for g, key in enumerate(uniq.tolist()):
        name, c = divmod(key, base)
        i = idx[grouped[bounds[g]:bounds[g + 1]]]
        yield KernelId(t.name, tl.strings[name], keys[c - 1] if c else None), _chunk(
            t, i, int(cats[i[0]]), ts, dur, None if work is None else [x[i] for x in work])


def _chunk(t: Track, i: np.ndarray, category: int, ts: np.ndarray, dur: np.ndarray,
           work: list[np.ndarray] | None) -> _Chunk:
    """The launches `i` of track `t`, `work`: their FLOPs, memory and LDS bytes (NaN: none), None for slices."""
    if work is None:
        none = np.zeros(0)
        return _Chunk(t, i, category, ts[i], dur[i], np.zeros(0, np.int64), none, none, (none,) * 3)
    has = ~np.isnan(work[0])
    d = dur[i[has]]
    return _Chunk(t, i, category, ts[i], dur[i], d, np.array(rates(work[0][has], d)) * d,
                  np.array(rates(np.nan_to_num(work[1][has]), d)) * d, tuple(x[~np.isnan(x)] for x in work))


def _program_codes(tab: LaunchTable, rows: slice) -> tuple[np.ndarray, list[bytes]]:
    """Per launch of a track: its program's code (0: none; k: the kth program the track launches), and the
    programs' keys in that order."""
    program = tab.program[rows].astype(np.int64)
    has = program >= 0
    uniq, first = np.unique(program[has], return_index=True)
    order = np.argsort(first, kind="stable")  # the programs in order of first launch
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(1, len(uniq) + 1)
    code = np.zeros(len(program), np.int64)
    code[has] = rank[np.searchsorted(uniq, program[has])]
    return code, [tab.programs[k] for k in uniq[order].tolist()]


def _runs(kid: KernelId, chunks: list[_Chunk]) -> Runs:
    """One kernel's launches from its chunks (in track order): time-sorted columns, and rates and work summed one
    launch after another, in track order (as a loop over the tracks' events adds them)."""
    ts, dur, rated, flops, mem = (np.concatenate([getattr(c, f) for c in chunks]) for f in _Chunk._fields[3:8])
    work = tuple(np.concatenate([c.work[j] for c in chunks]) for j in range(3))
    order = np.argsort(ts, kind="stable")
    return Runs(kid, CATEGORIES[chunks[0].category], chunks[0].track.role, ts[order], dur[order], _running_sum(flops),
                _running_sum(mem), int(rated.sum()), [(c.track, c.index) for c in chunks],
                tuple(_running_sum(x) if len(x) else None for x in work))


def _running_sum(x: np.ndarray) -> float:
    """Σ x added left to right (np.sum adds pairwise: its last bits differ)."""
    return float(np.cumsum(x)[-1]) if len(x) else 0.0
