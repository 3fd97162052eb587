"""What changed between two runs (a base and a pull request's): kernels matched by program, else by name and
device (a program whose code changed keeps its name: labelled so), each with a verdict (analysis.stats: launch by
launch where both runs launch it alike, false flags controlled over all kernels); new and vanished kernels; totals per
device and category; and the stretches between markers."""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from ..timeline import Role, Timeline
from .intervals import clip, measure
from .launches import Runs, columns, kernel_runs
from .neighbours import own_moves
from .report import time_range
from .stats import (
    ALPHA,
    FASTER,
    METHOD,
    MIN_EFFECT,
    SLOWER,
    Change,
    RunWide,
    adjust,
    beyond,
    compare,
    estimate,
    run_wide,
)

NEW, VANISHED = "new", "vanished"
BY_PROGRAM, BY_NAME = "program", "name"


@dataclass
class KernelChange:
    name: str
    device: str
    category: str
    match: str  # BY_PROGRAM (the same program keys), BY_NAME (no keys, or others: program_changed), NEW, VANISHED
    programs_before: list[str]
    programs_after: list[str]
    launches_before: int
    launches_after: int
    total_before_ns: int
    total_after_ns: int
    median_before_ns: float | None
    median_after_ns: float | None
    ratio: float | None  # median after / median before
    low: float | None  # its bootstrap interval
    high: float | None
    p: float | None  # the test's (stats: paired t on log ratios, else Mann–Whitney U), two-sided
    verdict: str  # stats.SLOWER, FASTER, UNCHANGED, INCONCLUSIVE, FEW, or NEW / VANISHED
    method: str | None = None  # stats.PAIRED or UNPAIRED (None: untested)
    q: float | None = None  # p adjusted over the diff's kernels (Benjamini–Hochberg)
    interval: list[float] | None = None  # [low, high]
    program_changed: bool = False  # matched by name though both runs have program keys and they differ

    @property
    def matched(self) -> str:
        return f"{self.match} (program changed)" if self.program_changed else self.match

    @property
    def label(self) -> str:
        keys = self.programs_after or self.programs_before
        return f"{self.name} [{keys[0][:8]}]" if len(keys) == 1 else self.name


@dataclass
class TotalChange:
    """A device's or a category's launches and summed launch time (and for devices the busy time) before/after."""

    name: str
    launches_before: int
    launches_after: int
    total_before_ns: int
    total_after_ns: int
    busy_before_ns: int | None = None
    busy_after_ns: int | None = None


@dataclass
class IntervalChange:
    """The stretch between two markers (matched by their names and order): wall time, busy device time, launches."""

    name: str
    wall_before_ns: int
    wall_after_ns: int
    busy_before_ns: int
    busy_after_ns: int
    launches_before: int
    launches_after: int


@dataclass
class Side:
    file: str
    release: str
    launches: int
    launch_ns: int
    span_ns: int


@dataclass
class Diff:
    base: Side
    pr: Side
    method: str
    alpha: float
    min_effect: float
    verdicts: dict[str, int]  # verdict → kernels
    kernels: list[KernelChange]  # significant changes first, then by the change of total time
    devices: list[TotalChange]
    categories: list[TotalChange]
    intervals: list[IntervalChange] = field(default_factory=list)
    wide: RunWide = field(default_factory=RunWide)  # the run-wide change and spread, set aside for the verdicts

    def slowdowns(self, pct: float) -> list[KernelChange]:
        """Significant slowdowns whose median grew by more than `pct` percent."""
        return [k for k in self.kernels if k.verdict == SLOWER and k.ratio is not None and k.ratio - 1 > pct / 100]


@dataclass(frozen=True)
class Verdicts:
    """How a change is judged: `alpha`, the significance level; a smaller change of the median than `min_effect`
    (a fraction) is never significant."""

    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT


def diff_runs(base: Timeline, pr: Timeline, verdicts: Verdicts = Verdicts(), releases: tuple[str, str] = ("", "")
              ) -> Diff:
    """What changed from the launches of `base` (its launch table) to those of `pr`, each kernel judged by
    `verdicts`; `releases` name the runs' tinygrad releases."""
    alpha, min_effect = verdicts.alpha, verdicts.min_effect
    a, b = kernel_runs(base), kernel_runs(pr)
    kernels, wide = kernel_changes(a, b, alpha, min_effect)
    return Diff(_side(base, a, releases[0]), _side(pr, b, releases[1]), METHOD, alpha, min_effect,
                dict(Counter(k.verdict for k in kernels)), kernels, _totals(a, b, lambda r: r.kernel.device, True),
                _totals(a, b, lambda r: r.category, False), _intervals(base, pr, a, b), wide)


def kernel_changes(a: list[Runs], b: list[Runs], alpha: float = ALPHA, min_effect: float = MIN_EFFECT
                   ) -> tuple[list[KernelChange], RunWide]:
    """Each kernel's change from the launches `a` to `b` (analysis.launches.kernel_runs), significant changes
    first; and the run-wide shift and spread set aside for them."""
    pairs = match(a, b)
    wide = _wide(pairs, alpha)
    changes = [_change(x, y, alpha, min_effect, wide, own) for (x, y), own in zip(pairs, _own(pairs, wide.shift),
                                                                                   strict=True)]
    adjust([c for _, c in changes], alpha, min_effect)
    kernels = [_verdict(k, c) for k, c in changes]
    kernels.sort(key=lambda k: (not _significant(k), -abs(k.total_after_ns - k.total_before_ns), k.device, k.name))
    return kernels, wide


def _wide(pairs: list[tuple[list[Runs], list[Runs]]], alpha: float) -> RunWide:
    """The run-wide change and spread, over the kernels both runs launch (stats.run_wide)."""
    logs, medians = [], []
    for x, y in pairs:
        (da, pa), (db, pb) = launch_order(x), launch_order(y)
        paired = len(da) == len(db) and bool(np.array_equal(pa, pb))
        if len(da) and len(db):
            logs.append(estimate(da, db, paired))
            medians.append((float(np.median(da)), float(np.median(db))))
    shift = run_wide(logs).shift
    return run_wide(logs, [(before, after / shift - before) for before, after in medians])


def _own(pairs: list[tuple[list[Runs], list[Runs]]], shift: float) -> list[float | None]:
    """Per pair of launch groups launched alike, its launches' move beyond the moves of the launches beside them in
    time on its device (analysis.neighbours; ns, the run-wide shift set aside); None for the others."""
    by_device: dict[str, tuple[list, list[int]]] = defaultdict(lambda: ([], []))
    for i, (x, y) in enumerate(pairs):
        (da, pa), (db, pb) = launch_order(x), launch_order(y)
        if x and y and len(da) == len(db) and np.array_equal(pa, pb):
            groups, index = by_device[y[0].kernel.device]
            groups.append((np.sort(np.concatenate([r.ts for r in y])), db / shift - da))
            index.append(i)
    out: list[float | None] = [None] * len(pairs)
    for groups, index in by_device.values():
        for i, move in zip(index, own_moves(groups), strict=True):
            out[i] = move
    return out


def _significant(k: KernelChange) -> bool:
    return k.verdict in (SLOWER, FASTER)


def match(a: list[Runs], b: list[Runs]) -> list[tuple[list[Runs], list[Runs]]]:
    """Pairs of launch groups, one per device and kernel name (all of a name's programs together, as the history
    keeps them: a program whose code changed keeps its name), then what only one run has."""
    ga, gb = _by_name(a), _by_name(b)
    return [(ga.get(key, []), gb.get(key, [])) for key in list(ga) + [k for k in gb if k not in ga]]


def _by_name(runs: list[Runs]) -> dict[tuple[str, str], list[Runs]]:
    out: dict[tuple[str, str], list[Runs]] = defaultdict(list)
    for r in runs:
        out[(r.kernel.device, r.kernel.name)].append(r)
    return out


def _durations(runs: list[Runs]) -> np.ndarray:
    return np.concatenate([r.dur for r in runs]) if runs else np.zeros(0, np.int64)


def launch_order(runs: list[Runs]) -> tuple[np.ndarray, np.ndarray]:
    """The launches of a group of kernels (one name, maybe several programs) in time order: their durations, and
    which program each is, numbered by first launch (0, 1, …): two runs launch a group alike where these agree."""
    if not runs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ts = np.concatenate([r.ts for r in runs])
    order = np.argsort(ts, kind="stable")
    which = np.concatenate([np.full(r.count, i) for i, r in enumerate(runs)])[order]
    _, first, pattern = np.unique(which, return_index=True, return_inverse=True)
    return _durations(runs)[order], np.argsort(np.argsort(first))[pattern]


def _change(a: list[Runs], b: list[Runs], alpha: float, min_effect: float, wide: RunWide, own: float | None
            ) -> tuple[KernelChange, Change]:
    """The kernel's change; `own`: its launches' move beyond their neighbours' (_own), which must also pass the
    jitter for it to stand out (a stretch of the run slow as a whole moves every kernel in it)."""
    (da, pa), (db, pb) = launch_order(a), launch_order(b)
    first = (a or b)[0]
    changed = False
    if a and b:
        same = bool(_keys(a)) and _keys(a) == _keys(b)  # the same programs (profiles of 0.14+ have keys)
        changed = not same and bool(_keys(a)) and bool(_keys(b))
        paired = len(da) == len(db) and bool(np.array_equal(pa, pb))
        how, c = BY_PROGRAM if same else BY_NAME, compare(da, db, alpha, min_effect, paired, wide)
        c.stands_out = c.stands_out and (own is None or beyond(own, wide.jitter, min_effect))
    else:
        how, c = NEW if b else VANISHED, Change(float("nan"), None, None, None, NEW if b else VANISHED)
    k = KernelChange(first.kernel.name, first.kernel.device, (b or a)[0].category, how, _keys(a), _keys(b),
                     len(da), len(db), int(da.sum()), int(db.sum()), _median(da), _median(db),
                     None if how in (NEW, VANISHED) else c.ratio, c.low, c.high, c.p, c.verdict, c.method,
                     program_changed=changed)
    return k, c


def _verdict(k: KernelChange, c: Change) -> KernelChange:
    """The kernel with its change's adjusted p-value and final verdict."""
    if k.match not in (NEW, VANISHED):
        k.q, k.verdict = c.q, c.verdict
        k.interval = None if c.low is None or c.high is None else [c.low, c.high]
    return k


def _keys(runs: list[Runs]) -> list[str]:
    return sorted({r.kernel.program for r in runs if r.kernel.program})


def _median(d: np.ndarray) -> float | None:
    return float(np.median(d)) if len(d) else None


def _side(tl: Timeline, runs: list[Runs], release: str) -> Side:
    t0, t1 = time_range(tl)
    return Side(tl.title, release, sum(r.count for r in runs), sum(r.total_ns for r in runs), t1 - t0)


def _totals(a: list[Runs], b: list[Runs], key: Callable[[Runs], str], busy: bool) -> list[TotalChange]:
    ga: dict[str, list[Runs]] = defaultdict(list)
    gb: dict[str, list[Runs]] = defaultdict(list)
    for runs, g in ((a, ga), (b, gb)):
        for r in runs:
            g[key(r)].append(r)
    out = []
    for name in list(ga) + [k for k in gb if k not in ga]:
        x, y = ga.get(name, []), gb.get(name, [])
        out.append(TotalChange(name, sum(r.count for r in x), sum(r.count for r in y), sum(r.total_ns for r in x),
                               sum(r.total_ns for r in y), busy_ns(x) if busy else None, busy_ns(y) if busy else None))
    return sorted(out, key=lambda t: -max(t.total_before_ns, t.total_after_ns))


def busy_ns(runs: list[Runs], lo: int | None = None, hi: int | None = None) -> int:
    if not runs:
        return 0
    st = np.concatenate([r.ts for r in runs])
    en = st + _durations(runs)
    if lo is not None and hi is not None:
        st, en = clip(st, en, lo, hi)
    return measure(st, en)


def markers(tl: Timeline) -> list[tuple[str, int]]:
    """The run's markers (name, time), in time order."""
    out = []
    for t in tl.tracks:
        if t.role == Role.MARKERS:
            ts, _, names = columns(t)
            out += [(tl.strings[n], int(x)) for x, n in zip(ts.tolist(), names.tolist(), strict=True)]
    return sorted(out, key=lambda m: m[1])


def _stretches(tl: Timeline) -> dict[str, tuple[int, int]]:
    """'start → first marker', 'marker → next marker' … 'last marker → end', a repeated name numbered (#2, …)."""
    t0, t1 = time_range(tl)
    cuts = [("start", t0), *markers(tl), ("end", t1)]
    seen: Counter = Counter()
    out = {}
    for (na, ta), (nb, tb) in pairwise(cuts):
        name = f"{na} → {nb}"
        seen[name] += 1
        out[name if seen[name] == 1 else f"{name} #{seen[name]}"] = (ta, tb)
    return out


def _intervals(base: Timeline, pr: Timeline, a: list[Runs], b: list[Runs]) -> list[IntervalChange]:
    sa, sb = _stretches(base), _stretches(pr)
    if len(sa) == 1 or len(sb) == 1:  # no markers on one side: the totals say it all
        return []
    out = []
    for name in (n for n in sa if n in sb):
        (la, ha), (lb, hb) = sa[name], sb[name]
        out.append(IntervalChange(name, ha - la, hb - lb, busy_ns(a, la, ha), busy_ns(b, lb, hb),
                                  sum(int(((r.ts >= la) & (r.ts < ha)).sum()) for r in a),
                                  sum(int(((r.ts >= lb) & (r.ts < hb)).sum()) for r in b)))
    return out
