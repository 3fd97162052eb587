"""The public API: the library's face over a Run (run.py) and the writers, as the `vizexport` command uses them.

    prof = load_profile("profile.pkl")            # records.Profile
    log = load_rewrites("rewrites.pkl")           # records.RewriteLog
    tl = build_timeline(prof, log)                # timeline.Timeline
    write_trace(tl, "trace.pftrace")              # or .pftrace.gz, .json, .json.gz
    render_rewrites(log, "docs/rewrites/")        # SVG steps + manifest.json
    build_site("site/", prof, log)                # static site
    kernel_table(prof, log)                       # what `vizexport top` shows (analysis.KernelTable)
    show_rewrites(log, "r_32", "expander")        # what `vizexport show` shows, as JSON-ready dicts
    report(prof, log)                             # analysis.report.Report: where the time went
    diff(base_prof, pr_prof)                      # analysis.diff.Diff: what changed, with verdicts

Each function makes a Run of the records it is given and asks it for one thing; to derive several from one
profile (decoded and laid out once), make the Run yourself: `Run.of(prof, log).report`, `.kernel_table`, ….
Keyword options are the fields of the Run's option dataclasses (run.LoadOptions, TraceOptions, AnswerOptions,
graphs.StepOptions). Each function spreads its work over forked processes as the command does (a ForkExecutor of
its own, whose workers end with it); a Run made by hand works in this process unless given one
(`Run.of(prof, executor=ex)` inside `with ForkExecutor() as ex:`).
"""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from .analysis import KernelTable
from .analysis.diff import Diff
from .analysis.report import Report
from .analysis.stats import ALPHA, MIN_EFFECT
from .errors import InputError
from .forks import ForkExecutor
from .graphs import StepOptions
from .graphs import render_rewrites as render_steps
from .graphs.manifest import Manifest
from .graphs.show import context_view, rewrite_view
from .output import Progress
from .perfetto import write_trace as write_any_trace
from .perfetto.split import Split, SplitOptions, write_split
from .records import Profile, RewriteLog, StepGraphs
from .run import AnswerOptions, LoadOptions, Run, TraceOptions, ViewOptions
from .sqtt import Launch
from .summary import Summary
from .timeline import Timeline
from .tinygrad import load_any as read_any
from .tinygrad import load_profile as read_profile
from .tinygrad import load_rewrites
from .tinygrad.replay import step_graphs
from .windows import OVERVIEW_SLICES, WINDOW_EVENTS
from .writers import FOLDER, Target, writer_for

__all__ = ["Run", "build_site", "build_timeline", "decode_launches", "diff", "kernel_table", "load_any",
           "load_profile", "load_rewrites", "render_rewrites", "report", "show_rewrites", "step_graphs", "summarize",
           "write_trace", "write_windows"]

_OPTIONS = {"load": LoadOptions, "trace": TraceOptions, "steps": StepOptions, "answers": AnswerOptions,
            "view": ViewOptions}  # a Run's option fields and their dataclasses


def options(**kw: Any) -> dict[str, Any]:
    """Keywords (the option dataclasses' fields, e.g. jobs=1, peak_gflops=50, all_steps=True) as a Run's options."""
    if kw.pop("all_steps", False):
        kw["steps"] = "all"
    out = {}
    for name, kind in _OPTIONS.items():
        mine = {f.name: kw.pop(f.name) for f in fields(kind) if f.name in kw}
        if mine:
            out[name] = kind(**mine)
    if kw:
        raise TypeError(f"unknown option {', '.join(sorted(kw))}")
    return out


def decode_launches(prof: Profile) -> list[Launch]:
    """The profile's AMD SQTT/PMC captures grouped per kernel launch and decoded (once: the timeline and the
    summary share them)."""
    return Run.of(prof).launches


def summarize(x: Profile | RewriteLog, launches: list[Launch] | None = None) -> Summary:
    """The figures of a profile (its SQTT/PMC launches decoded here unless given) or of a rewrites trace."""
    run = Run.of(x) if isinstance(x, Profile) else Run.of(rewrites=x)
    if launches is not None:
        run.launches = launches
    return run.summary_of(x)


def load_any(path: Path | str, tinygrad_version: str | None = None) -> Profile | RewriteLog:
    """A profile or a rewrites trace, whichever the file holds (decided by content, not by name)."""
    with ForkExecutor() as ex:
        return read_any(path, tinygrad_version, ex)


def load_profile(path: Path | str, tinygrad_version: str | None = None) -> Profile:
    """Read a tinygrad profile.pkl safely (nothing in it is executed) into version-neutral records."""
    with ForkExecutor() as ex:
        return read_profile(path, tinygrad_version, ex)


def build_timeline(prof: Profile, rewrites: RewriteLog | None = None, launches: list[Launch] | None = None
                   ) -> Timeline:
    """The profile's tracks; with its rewrites trace, kernels also get compile-time estimates and codegen names."""
    with ForkExecutor() as ex:
        run = Run.of(prof, rewrites, executor=ex)
        if launches is not None:
            run.launches = launches
        return run.timeline


def write_trace(tl: Timeline, path: Path | str, compress: bool = True, progress: Progress | None = None,
                flavor: str | None = None, delta_time: bool = False) -> int:
    """Write `tl` to `path` in the format its name asks for (perfetto.write_trace); returns the file size.
    `delta_time`: a .pftrace's timestamps as deltas (smaller; the Perfetto UI then shows a Clock Snapshots track)."""
    with ForkExecutor() as ex:
        return write_any_trace(tl, path, compress, progress, flavor, ex, delta_time)


def write_windows(tl: Timeline, path: Path | str, window_events: int = WINDOW_EVENTS, compress: bool = True,
                  overview_slices: int = OVERVIEW_SLICES, progress: Progress | None = None, delta_time: bool = False
                  ) -> Split:
    """`tl` as an overview (keeping about `overview_slices` slices whole) at `path` and windows of about
    `window_events` events beside it (perfetto.split); `delta_time` as for write_trace."""
    with ForkExecutor() as ex:
        return write_split(tl, Path(path), SplitOptions(window_events, compress, overview_slices, delta_time),
                           progress, ex)


def kernel_table(prof: Profile, rewrites: RewriteLog | None = None, between: tuple[str, str] | None = None,
                 device: str | None = None) -> KernelTable:
    """Per kernel program and device: launches, duration statistics, share of device time, achieved GFLOPS and
    GB/s (with the rewrites trace's estimates), category (with its UOps). `between`: two marker names, keeping the
    launches that start between them (both ends included); `device`: a device string or root device to keep.
    Made from the device tracks alone (Run.kernel_table)."""
    return Run.of(prof, rewrites, answers=AnswerOptions(between=between, device=device)).kernel_table


def show_rewrites(rewrites: RewriteLog | StepGraphs, ctx: str, rewrite: str | None = None) -> dict[str, Any]:
    """A rewrite context's rewrites or, with `rewrite`, that rewrite replayed match by match (graphs.show):
    `ctx` and `rewrite` are an index or a regular expression that one name matches."""
    graphs = _graphs(rewrites)
    return context_view(graphs, ctx) if rewrite is None else rewrite_view(graphs, ctx, rewrite)


def report(prof: Profile, rewrites: RewriteLog | None = None, timeline: Timeline | None = None,
           peak_gflops: float | None = None, peak_gbs: float | None = None) -> Report:
    """Where the time went (analysis.report): busy and idle devices, categories, distributions, launch latency, JIT
    batches, call sites, achieved against the peaks given. `timeline` reuses one built from `prof`."""
    with ForkExecutor() as ex:
        run = Run.of(prof, rewrites, answers=AnswerOptions(peak_gflops, peak_gbs), executor=ex)
        if timeline is not None:
            run.timeline = timeline
        return run.report


def diff(base: Profile, pr: Profile, base_rewrites: RewriteLog | None = None, pr_rewrites: RewriteLog | None = None,
         alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> Diff:
    """What changed from the `base` run to the `pr` run (any releases each): kernels matched by program key, else by
    name and device, each with a noise-aware verdict (analysis.stats); the rewrites traces add estimates and
    categories."""
    with ForkExecutor() as ex:
        run = Run.of(pr, pr_rewrites, answers=AnswerOptions(alpha=alpha, min_effect=min_effect),
                     baseline=Run.of(base, base_rewrites, executor=ex), executor=ex)
        assert run.diff is not None
        return run.diff


def render_rewrites(rewrites: RewriteLog | StepGraphs, outdir: Path | str, progress: Progress | None = None,
                    **steps: Any) -> Manifest:
    """Every rewrite's steps as Graphviz SVGs under `outdir`, with manifest.json; `steps`: StepOptions' fields (ctx,
    rewrite, steps, max_nodes, jobs, timeout; all_steps=True for steps="all")."""
    with ForkExecutor() as ex:
        return render_steps(_graphs(rewrites), outdir, options(**steps).get("steps", StepOptions()), progress, ex)


def _graphs(rewrites: Any) -> StepGraphs:
    if isinstance(rewrites, StepGraphs):
        return rewrites
    if not isinstance(rewrites, RewriteLog):
        raise InputError(f"{getattr(rewrites, 'path', rewrites)}: not a rewrites trace (a profile? graphs need "
                         "rewrites.pkl)")
    return step_graphs(rewrites)


def build_site(outdir: Path | str, profile: Profile | Run | None = None, rewrites: RewriteLog | None = None,
               progress: Progress | None = None, **opts: Any) -> Path:
    """A static site in `outdir` from a profile and/or its rewrites trace (or a Run of them); returns its
    index.html. Built beside `outdir`, which it replaces once complete (an existing `outdir` must be empty or an
    earlier stamped output: output.check_folder).

    The site holds the trace, a page per kernel program (launches, source, UOp list, AMD disassembly) and per
    rewrite context, where every step of every rewrite is laid out in the browser. With rewrites alone, the folder
    is also the SVG step export (render_rewrites, which needs Graphviz's `dot`). `opts`: the option dataclasses'
    fields (StepOptions: ctx, rewrite, steps, max_nodes, jobs; window_events, None: one trace; peak_gflops,
    peak_gbs for the run report's achieved vs peak); `baseline` (a Profile) and `baseline_rewrites` add the diff from
    that run to this one (diff.html)."""
    base, base_log = opts.pop("baseline", None), opts.pop("baseline_rewrites", None)
    with ForkExecutor() as ex:
        run = profile if isinstance(profile, Run) else Run.of(
            profile, rewrites, **options(**opts), baseline=Run.of(base, base_log, executor=ex) if base else None,
            executor=ex)
        target = Target(FOLDER, Path(outdir), name=str(outdir))
        writer = writer_for("convert", target, run)  # the site, or for rewrites alone the SVG export
        run.derive(writer.reads)
        writer.write(run, target, progress)
    return target.path / "index.html"
