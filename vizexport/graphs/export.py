"""Rewrite trace → folder of SVG step sequences + manifest.json (the `render_rewrites` library call).

Layout: OUTDIR/<context-slug>/<rewrite-index>-<rewrite-slug>/<step:04d>.svg (and <step:04d>.diff, the text diff of
the match, beside each rendered match step); OUTDIR/manifest.json lists every selected context, rewrite and step,
rendered or not. Contexts are independent: they are shared out over `jobs` processes, each replaying its contexts and
running its own `dot`; identical graphs are laid out once across all of them.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from .._version import __version__
from ..errors import InputError
from ..forks import SERIAL, Executor, default_jobs
from ..gcpause import gc_paused
from ..limits import SVG_OUTPUT_PER_INPUT_BYTE, uncounted, widen_output
from ..output import STAMP, Progress, remove_leftovers, slug, write_atomic
from ..records import GraphStep, Match, Rewrite, RewriteSteps, StepGraphs, StepNodes
from .diff import match_diff
from .dot import Drawer, Drawn
from .manifest import (
    ContextEntry,
    Location,
    Manifest,
    Options,
    ReleaseEntry,
    RenderStats,
    RewriteEntry,
    StepEntry,
    Summary,
    short_path,
    write_manifest,
)
from .options import POLICIES, StepOptions
from .render import captioned, check_dot, render_batch, use_builtin_metrics

DEFAULTS = StepOptions()
STEP_LIMIT = 50  # rewrites with at most this many matches get every step by default
BATCH_NODES = 1200  # graphs are laid out several to one dot process, up to this many nodes in all
BATCH_SIZE = 32
# names the export's folder has for its own files, and a site built in the same folder (rewrites alone) for its
# own: a context's folder never takes one (tests/test_outputs.py checks the site's against this list)
TAKEN = ("manifest.json", STAMP, "index.html", "static", "ctx", "kernel", "packs", "rewrites", "info.json",
         "report.html", "diff.html", "trace.pftrace", "trace.windows", "trace.json.gz")


@dataclass(frozen=True)
class Settings:
    steps: str  # one of POLICIES
    max_nodes: int
    timeout: float


@dataclass(frozen=True)
class Task:
    """One context to render: its index, the indexes of its selected rewrites, and its folder."""

    ctx: int
    rewrites: tuple[int, ...]
    folder: str
    costs: tuple[int, ...]  # rough work of each rewrite (see _cost)

    @property
    def cost(self) -> int:
        return sum(self.costs)


def render_rewrites(graphs: StepGraphs, outdir: Path | str, options: StepOptions = DEFAULTS,
                    progress: Progress | None = None, executor: Executor = SERIAL) -> Manifest:
    """Render the steps of a rewrites trace as SVGs under `outdir`; return the manifest (also written to
    outdir/manifest.json).

    `options.ctx` / `options.rewrite`: regular expressions (re.search) selecting contexts by name and rewrites by
    name. By default every rewrite gets its first and last state and, with at most 50 matches, every step
    (`steps="default"`); `steps="ends"` renders only the first and last states, `steps="all"` every step.
    Graphs above `max_nodes` show the neighbourhood of the change, with a note. `jobs`: processes (default: the CPUs
    this process may use), forked by `executor` (SERIAL: all here). `timeout`: seconds Graphviz may spend on one
    graph before it is replaced by a note.
    `progress(done, total)` is called as work completes (units: rough cost), e.g. to drive a progress bar.
    Raises InputError for input that is not a non-empty rewrites trace or a selection that matches nothing,
    ValueError for a non-positive max_nodes or timeout, and DotMissing when Graphviz is not installed.
    """
    ctx, rewrite, steps, max_nodes, jobs, timeout = (options.ctx, options.rewrite, options.steps, options.max_nodes,
                                                     options.jobs, options.timeout)
    if max_nodes < 1 or timeout <= 0:
        raise ValueError("max_nodes and timeout must be positive")
    if steps not in POLICIES:
        raise ValueError(f"steps must be one of {', '.join(POLICIES)}, not {steps!r}")
    opts = Settings(steps, max_nodes, timeout)
    tasks = _select(graphs, ctx, rewrite, opts.steps)
    check_dot()
    widen_output(SVG_OUTPUT_PER_INPUT_BYTE, "SVG steps")  # a drawn step is up to ~150 KB, from a few bytes of matches
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)  # present again only once this run completes
    with tempfile.TemporaryDirectory(prefix="vizexport-graphs-") as cache:
        use_builtin_metrics(Path(cache) / "gvbin")
        try:
            results = _run_tasks(Run(graphs, out, Path(cache), opts), tasks, jobs, progress, executor)
        except BaseException:
            executor.stop_all()  # no worker may go on writing
            remove_leftovers(out)
            raise
        laid_out = _cached_graphs(Path(cache))
    manifest = _manifest(graphs, tasks, results, opts, ctx, rewrite)
    manifest.summary.unique_graphs = laid_out
    write_manifest(out, manifest)
    return manifest


def _cached_graphs(cache: Path) -> int:
    """Distinct graphs laid out: one cache file each (SvgWriter._cached). Counting renders instead would vary with
    the workers' timing, as two of them may lay out the same graph at once."""
    return sum(len(os.listdir(d)) for d in cache.iterdir() if len(d.name) == 2 and d.is_dir())


# ---- selection and naming ----

def unique_slugs(names: list[str], taken: tuple[str, ...] = TAKEN) -> list[str]:
    """Slugs, made unique (ignoring case, for case-insensitive file systems) and unlike the `taken` names with -2,
    -3, … suffixes."""
    seen = {t.lower() for t in taken}
    out = []
    for name in names:
        base = s = slug(name)
        k = 1
        while s.lower() in seen:
            k += 1
            s = f"{base}-{k}"
        seen.add(s.lower())
        out.append(s)
    return out


def _regex(pattern: str | None, what: str) -> re.Pattern | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InputError(f"bad {what} regular expression {pattern!r}: {e}") from None


def _select(graphs: StepGraphs, ctx: str | None, rewrite: str | None, steps: str) -> list[Task]:
    if not any(c.rewrites for c in graphs.contexts):
        raise InputError(f"{graphs.path}: empty rewrites trace (no graph rewrites recorded)")
    cre, rre = _regex(ctx, "--ctx"), _regex(rewrite, "--rewrite")
    slugs = unique_slugs([c.key.name for c in graphs.contexts])
    tasks = []
    for ci, c in enumerate(graphs.contexts):
        if cre is not None and not cre.search(c.key.name):
            continue
        chosen = tuple(ri for ri, rw in enumerate(c.rewrites) if rre is None or rre.search(rw.name))
        if chosen or rre is None:  # a context without rewrites is listed too, unless rewrites were selected
            tasks.append(Task(ci, chosen, slugs[ci], tuple(_cost(c.rewrites[ri], steps) for ri in chosen)))
    if not any(t.rewrites for t in tasks):
        raise InputError(f"{graphs.path}: no rewrite matches the selection (ctx={ctx!r}, rewrite={rewrite!r})")
    return tasks


def _cost(rw: Rewrite, steps: str) -> int:
    """Rough work of one rewrite: graphs the policy lays out, and matches replayed."""
    n = len(rw.matches)
    drawn = n + 1 if steps == "all" or (steps == "default" and n <= STEP_LIMIT) else 2
    return 20 * drawn + n


def _split(tasks: list[Task], jobs: int) -> list[Task]:
    """Big contexts cut into runs of rewrites (replayed independently), so that no one task holds up the rest."""
    target = max(200, sum(t.cost for t in tasks) // (jobs * 8))
    out = []
    for t in tasks:
        start = cost = 0
        for k, c in enumerate(t.costs):
            cost += c
            if cost >= target and k + 1 < len(t.costs):
                out.append(Task(t.ctx, t.rewrites[start:k + 1], t.folder, t.costs[start:k + 1]))
                start, cost = k + 1, 0
        out.append(Task(t.ctx, t.rewrites[start:], t.folder, t.costs[start:]))
    return out


# ---- running contexts, in this process or in a pool ----

@dataclass
class Part:
    """What a task renders: its context's manifest entry (or a part of it), counts, and the work it was."""

    entry: ContextEntry
    stats: RenderStats
    cost: int


@dataclass(frozen=True)
class Run:
    """What every task of one export shares (forked workers inherit it)."""

    graphs: StepGraphs
    out: Path
    cache: Path
    opts: Settings


def _run_tasks(run: Run, tasks: list[Task], jobs: int | None, progress: Progress | None, executor: Executor
               ) -> dict[int, Part]:
    """Run every task; return one Part per context (parts of split contexts joined in order)."""
    jobs = max(1, jobs if jobs is not None else default_jobs())
    order = sorted(_split(tasks, jobs), key=lambda t: -t.cost)  # biggest first: better balance
    total = sum(t.cost for t in order)
    return _join(_reporting(executor.map(partial(render_context, run), order, jobs), total, progress))


def _reporting(parts: Iterable[Part], total: int, progress: Progress | None) -> Iterator[Part]:
    done = 0
    for p in parts:
        done += p.cost
        if progress is not None:
            progress(done, total)
        yield p


def _join(parts: Iterable[Part]) -> dict[int, Part]:
    out: dict[int, Part] = {}
    for p in parts:
        c = out.get(p.entry.index)
        if c is None:
            out[p.entry.index] = p
            continue
        c.entry.rewrites += p.entry.rewrites
        c.stats.add(p.stats)
    for c in out.values():
        c.entry.rewrites.sort(key=lambda r: r.index)
    return out


def render_context(run: Run, task: Task) -> Part:
    """Replay and render the selected rewrites of one context; return its manifest entry."""
    # a replay makes millions of tuples and no reference cycles: the cyclic collector would only scan them again
    # and again (and, in a forked worker, copy the pages of the log it inherited)
    with gc_paused():
        c = run.graphs.contexts[task.ctx]
        session = run.graphs.session()
        job = _ContextJob(run.graphs, task, session.nodes, run.opts,
                          SvgWriter(run.out, run.cache, run.opts.timeout))
        entries = [job.rewrite(ri, c.rewrites[ri], session.replay(c.rewrites[ri])) for ri in task.rewrites]
        job.svgs.flush()
        return Part(ContextEntry(task.ctx, c.key.name, c.key.color, task.folder, entries), job.stats(), task.cost)


class _ContextJob:
    def __init__(self, graphs: StepGraphs, task: Task, nodes: StepNodes, opts: Settings, svgs: SvgWriter) -> None:
        self.graphs, self.task, self.opts, self.svgs = graphs, task, opts, svgs
        self.drawer = Drawer(nodes, opts.max_nodes)
        self.nodes = nodes
        self.replay_errors = 0
        self.capped = 0
        self.printed: dict[int, list[str]] = {}  # subgraphs printed for diffs, by node

    def rewrite(self, ri: int, rw: Rewrite, rep: RewriteSteps) -> RewriteEntry:
        folder = f"{self.task.folder}/{ri:03d}-{slug(rw.name)}"
        chosen = policy(rep.steps, self.opts.steps)
        real = [m for m in rw.matches if m.after is not None]
        entry = RewriteEntry(ri, rw.name, rw.depth, rw.bottom_up, rw.walk, rw.enter_calls, Location.of(rw.loc),
                             len(real), _seconds(sum(m.seconds or 0.0 for m in real)), folder)
        hint = rep.steps[1].before if len(rep.steps) > 1 else None
        for step in rep.steps:
            m = rw.matches[step.match] if step.match is not None else None
            e = self.step_entry(step, m)
            if step.index in chosen:
                self.draw(step, m, e, f"{folder}/{step.index:04d}", self._caption(rw, ri, step, len(rep.steps) - 1),
                          hint if step.index == 0 else None)
            entry.steps.append(e)
        return entry

    def step_entry(self, step: GraphStep, m: Match | None) -> StepEntry:
        replayed = step.sink is not None
        e = StepEntry(step.index, step.match, Location.of(m.loc) if m else None,
                      _seconds(m.seconds) if m and m.seconds is not None else None,
                      len(step.created) + len(step.rebuilt) if replayed else None, len(step.created),
                      step.size if replayed else None, error=step.error or None)
        if step.error:
            self.replay_errors += 1
        return e

    def draw(self, step: GraphStep, m: Match | None, e: StepEntry, stem: str, caption: str, hint: int | None
             ) -> None:
        if step.sink is None:
            return
        drawn = self.drawer.draw(step, hint)
        e.drawn, e.capped = drawn.nodes, drawn.capped
        self.capped += drawn.capped
        e.svg = self.svgs.add(drawn, stem + ".svg", caption, e)
        if m is not None and step.before is not None and step.after is not None:
            diff = match_diff(self.nodes, step.before, step.after, self.printed)
            head = f"# {caption}\n"
            self.svgs.write_text(stem + ".diff", head + "\n".join(diff) + ("\n" if diff else ""))
            e.diff = f"{stem}.diff"

    def _caption(self, rw: Rewrite, ri: int, step: GraphStep, last: int) -> str:
        c = self.graphs.contexts[self.task.ctx]
        parts = [c.key.name, f"{ri:03d} {rw.name}", f"step {step.index}/{last}"]
        m = rw.matches[step.match] if step.match is not None else None
        if m is not None and m.loc:
            parts.append(f"{short_path(m.loc[0])}:{m.loc[1]}")
        if m is not None and m.seconds is not None:
            parts.append(f"{m.seconds * 1e6:.1f} µs")
        return " · ".join(parts)

    def stats(self) -> RenderStats:
        s = self.svgs
        return RenderStats(s.renders, self.capped, s.timeouts, s.errors, self.replay_errors)


def policy(steps: list[GraphStep], mode: str) -> set[int]:
    """Step indexes to render: all, or the first and last replayed states (plus, by default, every step of small
    rewrites)."""
    replayed = [s.index for s in steps if s.sink is not None]
    if not replayed:
        return set()
    if mode == "all" or (mode == "default" and len(steps) - 1 <= STEP_LIMIT):
        return set(replayed)
    return {replayed[0], replayed[-1]}


def _seconds(s: float) -> float:
    return float(f"{s:.9g}")


# ---- SVG output: dedupe, batching, cache shared by the workers ----

@dataclass
class _Pending:
    dot: str
    size: str
    nodes: int
    dests: list[tuple[str, str, StepEntry]] = field(default_factory=list)


class SvgWriter:
    """Writes the SVG of each step; lays out each distinct DOT text once (across workers, via `cache`)."""

    def __init__(self, out: Path, cache: Path, timeout: float) -> None:
        self.out, self.cache, self.timeout = out, cache, timeout
        self.status: dict[str, str] = {}  # rendered here: digest → "ok" | "timeout" | "error"
        self.pending: dict[str, _Pending] = {}  # graphs waiting for a batch
        self.nodes = 0  # nodes drawn in the pending batch
        self.renders = self.timeouts = self.errors = 0
        self.dirs: set[str] = set()

    def add(self, drawn: Drawn, rel: str, caption: str, entry: StepEntry) -> str:
        """Queue a step's graph; return the path its SVG gets (relative to the output folder)."""
        key = hashlib.sha1(drawn.text.encode()).hexdigest()
        if key in self.pending:
            self.pending[key].dests.append((rel, caption, entry))
            return rel
        cached = self._cached(key)
        if key in self.status or cached.exists():
            data = cached.read_bytes()
            self._emit(chr(data[0]), data[1:], [(rel, caption, entry)])
            return rel
        if self.pending and self.nodes + drawn.nodes > BATCH_NODES:
            self.flush()
        self.pending[key] = _Pending(drawn.text, f" ({drawn.nodes} nodes shown)", drawn.nodes,
                                     [(rel, caption, entry)])
        self.nodes += drawn.nodes
        if len(self.pending) >= BATCH_SIZE or self.nodes >= BATCH_NODES:
            self.flush()
        return rel

    def flush(self) -> None:
        batch, self.pending, self.nodes = self.pending, {}, 0
        if not batch:
            return
        keys = list(batch)
        done = render_batch([batch[k].dot for k in keys], self.timeout, [batch[k].size for k in keys])
        for k, r in zip(keys, done, strict=True):
            self.renders += 1
            self.status[k] = r.status
            with uncounted():  # a temporary cache, not output
                write_atomic(self._cached(k), r.status[0].encode() + r.svg)  # other workers never read it half-written
            self._emit(r.status[0], r.svg, batch[k].dests)

    def _cached(self, key: str) -> Path:
        """The cache file of a digest, in one of 256 folders: lookups in one folder of 20,000 files cost more."""
        return self.cache / key[:2] / key[2:]

    def _emit(self, status: str, svg: bytes, dests: list[tuple[str, str, StepEntry]]) -> None:
        for rel, caption, entry in dests:
            self._write(rel, captioned(svg, caption))
            if status == "t":
                entry.timeout = True
                self.timeouts += 1
            elif status == "e":
                entry.render_error = True
                self.errors += 1

    def write_text(self, rel: str, text: str) -> None:
        self._write(rel, text.encode())

    def _write(self, rel: str, data: bytes) -> None:
        path = self.out / rel
        parent = str(path.parent)
        if parent not in self.dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.dirs.add(parent)
        write_atomic(path, data)


# ---- manifest ----

def _manifest(graphs: StepGraphs, tasks: list[Task], parts: dict[int, Part], opts: Settings, ctx: str | None,
              rewrite: str | None) -> Manifest:
    contexts = [parts[t.ctx].entry for t in tasks]
    totals = RenderStats()
    for t in tasks:
        totals.add(parts[t.ctx].stats)
    rewrites = [r for c in contexts for r in c.rewrites]
    steps = [s for r in rewrites for s in r.steps]
    summary = Summary(len(contexts), len(rewrites), sum(r.matches for r in rewrites), len(steps),
                      sum(s.svg is not None for s in steps), totals.unique_graphs, totals.capped, totals.timeouts,
                      totals.render_errors, totals.replay_errors, len({s.svg for s in steps if s.svg}))
    options = Options(ctx, rewrite, opts.steps, opts.steps == "all", opts.max_nodes, opts.timeout, STEP_LIMIT)
    layout = "<context>/<rewrite-index>-<rewrite>/<step:04d>.svg"
    return Manifest(__version__, graphs.path, ReleaseEntry(graphs.release.name, graphs.release.confidence), options,
                    layout, summary, contexts)
