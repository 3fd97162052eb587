"""Rewrite trace → folder of SVG step sequences + manifest.json (the `render_rewrites` library call).

Layout: OUTDIR/<context-slug>/<rewrite-index>-<rewrite-slug>/<step:04d>.svg (and <step:04d>.diff, the text diff of
the match, beside each rendered match step); OUTDIR/manifest.json lists every selected context, rewrite and step,
rendered or not. Contexts are independent: they are shared out over `jobs` processes, each replaying its contexts and
running its own `dot`; identical graphs are laid out once across all of them.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import signal
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..output import Progress
from ..pickles import InputError, gc_paused
from ..records import Match, Rewrite, RewriteLog
from .diff import match_diff
from .dot import Drawer, Drawn, Labels
from .render import (
    captioned,
    check_dot,
    remove_leftovers,
    render_batch,
    use_builtin_metrics,
    write_atomic,
)
from .replay import Nodes, Replay, Replayer, Step

STEP_LIMIT = 50  # rewrites with at most this many matches get every step by default
POLICIES = ("default", "ends", "all")
BATCH_NODES = 1200  # graphs are laid out several to one dot process, up to this many nodes in all
BATCH_SIZE = 32
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Options:
    steps: str  # one of POLICIES
    max_nodes: int
    timeout: float
    shared: bool  # one caption-less file per distinct graph (svg/<digest>.svg) instead of one per step


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


def render_rewrites(log: RewriteLog, outdir: Path | str, ctx: str | None = None, rewrite: str | None = None,
                    all_steps: bool = False, max_nodes: int = 400, jobs: int | None = None,
                    timeout: float = 30.0, progress: Progress | None = None,
                    steps: str = "default", shared: bool = False) -> dict:
    """Render the steps of a rewrites trace as SVGs under `outdir`; return the manifest (also written to
    outdir/manifest.json).

    ctx / rewrite: regular expressions (re.search) selecting contexts by name and rewrites by name. By default every
    rewrite gets its first and last state and, with at most 50 matches, every step (`steps="default"`);
    `steps="ends"` renders only the first and last states, `steps="all"` (or `all_steps`) every step.
    `shared`: each distinct graph is written once, without a caption, as svg/<digest>.svg (for the site), instead
    of one captioned file per step at <context>/<rewrite-index>-<rewrite>/<step>.svg.
    Graphs above `max_nodes` show the neighbourhood of the change, with a note. `jobs`: processes (default: the CPUs
    this process may use). `timeout`: seconds Graphviz may spend on one graph before it is replaced by a note.
    `progress(done, total)` is called as work completes (units: rough cost), e.g. to drive a progress bar.
    Raises InputError for input that is not a non-empty rewrites trace or a selection that matches nothing,
    ValueError for a non-positive max_nodes or timeout, and DotMissing when Graphviz is not installed.
    """
    if max_nodes < 1 or timeout <= 0:
        raise ValueError("max_nodes and timeout must be positive")
    if steps not in POLICIES:
        raise ValueError(f"steps must be one of {', '.join(POLICIES)}, not {steps!r}")
    opts = Options("all" if all_steps else steps, max_nodes, timeout, shared)
    tasks, slugs = _select(log, ctx, rewrite, opts.steps)
    check_dot()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # present again only once this run completes
    with tempfile.TemporaryDirectory(prefix="vizexport-graphs-") as cache:
        use_builtin_metrics(Path(cache) / "gvbin")
        try:
            results = _run_tasks(log, tasks, out, Path(cache), opts, jobs, progress)
        except BaseException:
            remove_leftovers(out)
            raise
    manifest = _manifest(log, tasks, slugs, results, opts, {"ctx": ctx, "rewrite": rewrite})
    write_manifest(out, manifest)
    return manifest


def write_manifest(folder: Path, manifest: dict) -> None:
    """folder/manifest.json, compact (a training step's manifest lists tens of thousands of steps)."""
    write_atomic(folder / MANIFEST, (json.dumps(manifest, ensure_ascii=False, separators=(",", ":")) + "\n").encode())


# ---- selection and naming ----

def slug(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return s[:48].rstrip("-.") or "unnamed"


def unique_slugs(names: list[str]) -> list[str]:
    """Slugs, made unique (ignoring case, for case-insensitive file systems) with -2, -3, … suffixes."""
    seen: set[str] = set()
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


def _select(log: Any, ctx: str | None, rewrite: str | None, steps: str) -> tuple[list[Task], list[str]]:
    if not isinstance(log, RewriteLog):
        raise InputError(f"{getattr(log, 'path', log)}: not a rewrites trace (a profile? graphs need rewrites.pkl)")
    if not any(c.rewrites for c in log.contexts):
        raise InputError(f"{log.path}: empty rewrites trace (no graph rewrites recorded)")
    cre, rre = _regex(ctx, "--ctx"), _regex(rewrite, "--rewrite")
    slugs = unique_slugs([c.key.name for c in log.contexts])
    tasks = []
    for ci, c in enumerate(log.contexts):
        if cre is not None and not cre.search(c.key.name):
            continue
        chosen = tuple(ri for ri, rw in enumerate(c.rewrites) if rre is None or rre.search(rw.name))
        if chosen or rre is None:  # a context without rewrites is listed too, unless rewrites were selected
            tasks.append(Task(ci, chosen, slugs[ci], tuple(_cost(c.rewrites[ri], steps) for ri in chosen)))
    if not any(t.rewrites for t in tasks):
        raise InputError(f"{log.path}: no rewrite matches the selection (ctx={ctx!r}, rewrite={rewrite!r})")
    return tasks, slugs


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

_STATE: dict[str, Any] = {}  # what forked workers inherit: the log, output folder, cache folder, options


def default_jobs() -> int:
    """CPUs this process may run on (taskset and cgroup limits included where the OS says)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def _run_tasks(log: RewriteLog, tasks: list[Task], out: Path, cache: Path, opts: Options, jobs: int | None,
               progress: Progress | None) -> dict[int, dict]:
    """Run every task; return one manifest entry per context (parts of split contexts joined in order)."""
    _STATE.update(log=log, out=out, cache=cache, opts=opts)
    jobs = max(1, jobs if jobs is not None else default_jobs())
    order = sorted(_split(tasks, jobs), key=lambda t: -t.cost)  # biggest first: better balance
    total = sum(t.cost for t in order)
    if jobs == 1 or len(order) == 1 or "fork" not in multiprocessing.get_all_start_methods():
        return _join(_reporting((render_context(t) for t in order), total, progress))
    pool = multiprocessing.get_context("fork").Pool(min(jobs, len(order)), initializer=_worker_init)
    try:
        results = _join(_reporting(pool.imap_unordered(render_context, order), total, progress))
        pool.close()
        return results
    except BaseException:
        pool.terminate()  # workers exit through SystemExit: their dot processes are killed, temp files removed
        raise
    finally:
        pool.join()


def _reporting(parts: Iterable[dict], total: int, progress: Progress | None) -> Iterator[dict]:
    done = 0
    for p in parts:
        done += p["_cost"]
        if progress is not None:
            progress(done, total)
        yield p


def _join(parts: Iterable[dict]) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for p in parts:
        c = out.get(p["index"])
        if c is None:
            out[p["index"]] = p
            continue
        c["rewrites"] += p["rewrites"]
        for k, v in p["_stats"].items():
            c["_stats"][k] += v
    for c in out.values():
        c["rewrites"].sort(key=lambda r: r["index"])
    return out


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates the pool
    signal.signal(signal.SIGTERM, _exit)


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(1)


def render_context(task: Task) -> dict:
    """Replay and render the selected rewrites of one context; return its manifest entry (with "_stats")."""
    # a replay makes millions of tuples and no reference cycles: the cyclic collector would only scan them again
    # and again (and, in a forked worker, copy the pages of the log it inherited)
    with gc_paused():
        return _render_context(task)


def _render_context(task: Task) -> dict:
    log: RewriteLog = _STATE["log"]
    opts: Options = _STATE["opts"]
    c = log.contexts[task.ctx]
    nodes = Nodes(log)
    job = _ContextJob(log, task, nodes, opts, SvgWriter(_STATE["out"], _STATE["cache"], opts.timeout, opts.shared))
    replayer = Replayer(nodes)
    entries = [job.rewrite(ri, c.rewrites[ri], replayer.replay(c.rewrites[ri])) for ri in task.rewrites]
    job.svgs.flush()
    return {"index": task.ctx, "name": c.key.name, "color": c.key.color, "path": task.folder, "rewrites": entries,
            "_stats": job.stats(), "_cost": task.cost}


class _ContextJob:
    def __init__(self, log: RewriteLog, task: Task, nodes: Nodes, opts: Options, svgs: SvgWriter) -> None:
        self.log, self.task, self.opts, self.svgs = log, task, opts, svgs
        self.labels = Labels(log, nodes)
        self.drawer = Drawer(self.labels, opts.max_nodes)
        self.nodes = nodes
        self.replay_errors = 0
        self.capped = 0
        self.printed: dict[int, list[str]] = {}  # subgraphs printed for diffs, by node

    def rewrite(self, ri: int, rw: Rewrite, rep: Replay) -> dict:
        folder = f"{self.task.folder}/{ri:03d}-{slug(rw.name)}"
        chosen = policy(rep.steps, self.opts.steps)
        real = [m for m in rw.matches if m.after is not None]
        entry = {"index": ri, "name": rw.name, "depth": rw.depth, "bottom_up": rw.bottom_up, "walk": rw.walk,
                 "enter_calls": rw.enter_calls, "loc": location(rw.loc), "matches": len(real),
                 "seconds": _seconds(sum(m.seconds or 0.0 for m in real)), "path": folder, "steps": []}
        hint = rep.steps[1].before if len(rep.steps) > 1 else None
        for step in rep.steps:
            m = rw.matches[step.match] if step.match is not None else None
            e = self.step_entry(step, m)
            if step.index in chosen:
                self.draw(step, m, e, f"{folder}/{step.index:04d}", self._caption(rw, ri, step, len(rep.steps) - 1),
                          hint if step.index == 0 else None)
            entry["steps"].append(e)
        return entry

    def step_entry(self, step: Step, m: Match | None) -> dict:
        e = {"index": step.index, "match": step.match, "pattern": location(m.loc) if m else None,
             "seconds": _seconds(m.seconds) if m and m.seconds is not None else None,
             "changed": len(step.created) + len(step.rebuilt) if step.sink is not None else None,
             "created": len(step.created), "nodes": step.size if step.sink is not None else None, "svg": None}
        if step.error:
            e["error"] = step.error
            self.replay_errors += 1
        return e

    def draw(self, step: Step, m: Match | None, e: dict, stem: str, caption: str, hint: int | None) -> None:
        if step.sink is None:
            return
        drawn = self.drawer.draw(step, hint)
        e.update(drawn=drawn.nodes, capped=drawn.capped)
        self.capped += drawn.capped
        e["svg"] = self.svgs.add(drawn, stem + ".svg", caption, e)
        if m is not None and step.before is not None and step.after is not None:
            diff = match_diff(self.nodes, step.before, step.after, self.labels.text, self.printed)
            head = f"# {caption}\n"
            self.svgs.write_text(stem + ".diff", head + "\n".join(diff) + ("\n" if diff else ""))
            e["diff"] = f"{stem}.diff"

    def _caption(self, rw: Rewrite, ri: int, step: Step, last: int) -> str:
        c = self.log.contexts[self.task.ctx]
        parts = [c.key.name, f"{ri:03d} {rw.name}", f"step {step.index}/{last}"]
        m = rw.matches[step.match] if step.match is not None else None
        if m is not None and m.loc:
            parts.append(f"{short_path(m.loc[0])}:{m.loc[1]}")
        if m is not None and m.seconds is not None:
            parts.append(f"{m.seconds * 1e6:.1f} µs")
        return " · ".join(parts)

    def stats(self) -> dict:
        s = self.svgs
        return {"unique_graphs": s.renders, "capped": self.capped, "timeouts": s.timeouts,
                "render_errors": s.errors, "replay_errors": self.replay_errors}


def policy(steps: list[Step], mode: str) -> set[int]:
    """Step indexes to render: all, or the first and last replayed states (plus, by default, every step of small
    rewrites)."""
    replayed = [s.index for s in steps if s.sink is not None]
    if not replayed:
        return set()
    if mode == "all" or (mode == "default" and len(steps) - 1 <= STEP_LIMIT):
        return set(replayed)
    return {replayed[0], replayed[-1]}


def location(loc: tuple[str, int] | None) -> dict | None:
    return None if loc is None else {"file": loc[0], "line": loc[1]}


def short_path(path: str) -> str:
    """tinygrad/… for tinygrad's own files (wherever they were installed), else the file name."""
    p = path.replace("\\", "/")
    i = p.rfind("/tinygrad/")
    return p[i + 1:] if i >= 0 else p.rsplit("/", 1)[-1]


def _seconds(s: float) -> float:
    return float(f"{s:.9g}")


# ---- SVG output: dedupe, batching, cache shared by the workers ----

@dataclass
class _Pending:
    dot: str
    size: str
    nodes: int
    dests: list[tuple[str, str, dict]] = field(default_factory=list)


class SvgWriter:
    """Writes the SVG of each step; lays out each distinct DOT text once (across workers, via `cache`)."""

    def __init__(self, out: Path, cache: Path, timeout: float, shared: bool = False) -> None:
        self.out, self.cache, self.timeout, self.shared = out, cache, timeout, shared
        self.written: set[str] = set()  # shared files this worker wrote
        self.status: dict[str, str] = {}  # rendered here: digest → "ok" | "timeout" | "error"
        self.pending: dict[str, _Pending] = {}  # graphs waiting for a batch
        self.nodes = 0  # nodes drawn in the pending batch
        self.renders = self.timeouts = self.errors = 0
        self.dirs: set[str] = set()

    def add(self, drawn: Drawn, rel: str, caption: str, entry: dict) -> str:
        """Queue a step's graph; return the path its SVG gets (relative to the output folder)."""
        key = hashlib.sha1(drawn.text.encode()).hexdigest()
        if self.shared:
            rel, caption = f"svg/{key[:20]}.svg", ""
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
            write_atomic(self._cached(k), r.status[0].encode() + r.svg)  # other workers never read it half-written
            self._emit(r.status[0], r.svg, batch[k].dests)

    def _cached(self, key: str) -> Path:
        """The cache file of a digest, in one of 256 folders: lookups in one folder of 20,000 files cost more."""
        return self.cache / key[:2] / key[2:]

    def _emit(self, status: str, svg: bytes, dests: list[tuple[str, str, dict]]) -> None:
        for rel, caption, entry in dests:
            if rel not in self.written:
                self._write(rel, captioned(svg, caption) if caption else svg)
                if self.shared:
                    self.written.add(rel)
            if status == "t":
                entry["timeout"] = True
                self.timeouts += 1
            elif status == "e":
                entry["render_error"] = True
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

def _manifest(log: RewriteLog, tasks: list[Task], slugs: list[str], results: dict[int, dict], opts: Options,
              selection: dict) -> dict:
    from .. import __version__
    contexts = [results[t.ctx] for t in tasks]
    totals = {"unique_graphs": 0, "capped": 0, "timeouts": 0, "render_errors": 0, "replay_errors": 0}
    for c in contexts:
        c.pop("_cost")
        for k, v in c.pop("_stats").items():
            totals[k] += v
    rewrites = [r for c in contexts for r in c["rewrites"]]
    steps = [s for r in rewrites for s in r["steps"]]
    totals["svg_files"] = len({s["svg"] for s in steps if s["svg"]})
    summary = {"contexts": len(contexts), "rewrites": len(rewrites), "matches": sum(r["matches"] for r in rewrites),
               "steps": len(steps), "rendered": sum(s["svg"] is not None for s in steps), **totals}
    return {"vizexport": __version__, "source": log.path,
            "tinygrad": {"release": log.release.name, "confidence": log.release.confidence},
            "options": {**selection, "steps": opts.steps, "all_steps": opts.steps == "all", "max_nodes": opts.max_nodes,
                        "timeout": opts.timeout, "step_limit": STEP_LIMIT},
            "layout": "svg/<digest>.svg" if opts.shared else "<context>/<rewrite-index>-<rewrite>/<step:04d>.svg",
            "summary": summary, "contexts": contexts}
