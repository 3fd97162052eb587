"""The public API: readers wired to writers, as the `vizexport` command does (cli.py calls these).

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
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .analysis import KernelTable
from .analysis import kernel_table as _kernel_table
from .analysis.diff import Diff, diff_runs
from .analysis.programs import program_index
from .analysis.report import Report, build_report
from .analysis.stats import ALPHA, MIN_EFFECT
from .errors import InputError
from .forks import stopping_on_error
from .gcpause import gc_paused
from .graphs import render_rewrites as render_steps
from .graphs.manifest import Manifest
from .graphs.show import context_view, rewrite_view
from .output import Progress, atomic_folder
from .perfetto import write_trace
from .perfetto.split import Split, write_split
from .records import Profile, RewriteLog, StepGraphs
from .site import build_site as write_site
from .sqtt import Launch, launch_counters, launch_figures, load_launches
from .sqtt.listings import program_listings
from .summary import Summary
from .summary import summarize as _summarize
from .timeline import Timeline
from .tinygrad import load_any, load_profile, load_rewrites
from .tinygrad.replay import step_graphs
from .tinygrad.timeline import build_timeline as _build_timeline
from .windows import OVERVIEW_SLICES, WINDOW_EVENTS

__all__ = ["build_site", "build_timeline", "decode_launches", "diff", "kernel_table", "load_any", "load_profile",
           "load_rewrites", "render_rewrites", "report", "show_rewrites", "step_graphs", "summarize", "write_trace",
           "write_windows"]


def decode_launches(prof: Profile) -> list[Launch]:
    """The profile's AMD SQTT/PMC captures grouped per kernel launch and decoded (once: the timeline and the
    summary share them)."""
    return load_launches(prof) if prof.captures else []


def summarize(x: Profile | RewriteLog, launches: list[Launch] | None = None) -> Summary:
    """The figures of a profile (its SQTT/PMC launches decoded here unless given) or of a rewrites trace."""
    if isinstance(x, RewriteLog) or not x.captures:
        return _summarize(x)
    launches = load_launches(x, disasm=False) if launches is None else launches
    return _summarize(x, launch_counters(x, launches), launch_figures(launches))


def build_timeline(prof: Profile, rewrites: RewriteLog | None = None, launches: list[Launch] | None = None
                   ) -> Timeline:
    """The profile's tracks; with its rewrites trace, kernels also get compile-time estimates and codegen names."""
    with gc_paused():  # millions of acyclic objects: see gcpause
        return _build_timeline(prof, rewrites, decode_launches(prof) if launches is None else launches)


def write_windows(tl: Timeline, path: Path | str, window_events: int = WINDOW_EVENTS, compress: bool = True,
                  overview_slices: int = OVERVIEW_SLICES, progress: Progress | None = None) -> Split:
    """`tl` as an overview (keeping about `overview_slices` slices whole) at `path` and windows of about
    `window_events` events beside it (perfetto.split)."""
    return write_split(tl, Path(path), window_events, compress, overview_slices, progress)


def kernel_table(prof: Profile, rewrites: RewriteLog | None = None, between: tuple[str, str] | None = None,
                 device: str | None = None) -> KernelTable:
    """Per kernel program and device: launches, duration statistics, share of device time, achieved GFLOPS and
    GB/s (with the rewrites trace's estimates), category (with its UOps). `between`: two marker names, keeping the
    launches that start between them (both ends included); `device`: a device string or root device to keep."""
    tl = build_timeline(prof, rewrites, launches=[])  # SQTT waves add nothing to the table: not decoded
    return _kernel_table(tl, rewrites.contexts if rewrites is not None else None, between, device)


def show_rewrites(rewrites: RewriteLog | StepGraphs, ctx: str, rewrite: str | None = None) -> dict[str, Any]:
    """A rewrite context's rewrites or, with `rewrite`, that rewrite replayed match by match (graphs.show):
    `ctx` and `rewrite` are an index or a regular expression that one name matches."""
    graphs = _graphs(rewrites)
    return context_view(graphs, ctx) if rewrite is None else rewrite_view(graphs, ctx, rewrite)


def report(prof: Profile, rewrites: RewriteLog | None = None, timeline: Timeline | None = None,
           peak_gflops: float | None = None, peak_gbs: float | None = None) -> Report:
    """Where the time went (analysis.report): busy and idle devices, categories, distributions, launch latency, JIT
    batches, call sites, achieved against the peaks given. `timeline` reuses one built from `prof`."""
    tl = build_timeline(prof, rewrites) if timeline is None else timeline
    return build_report(tl, prof, program_index(rewrites), peak_gflops, peak_gbs)


def diff(base: Profile, pr: Profile, base_rewrites: RewriteLog | None = None, pr_rewrites: RewriteLog | None = None,
         alpha: float = ALPHA, min_effect: float = MIN_EFFECT, base_timeline: Timeline | None = None) -> Diff:
    """What changed from the `base` run to the `pr` run (any releases each): kernels matched by program key, else by
    name and device, each with a noise-aware verdict (analysis.stats); the rewrites traces add estimates and
    categories. `base_timeline` reuses one built from `base`."""
    a = build_timeline(base, base_rewrites) if base_timeline is None else base_timeline
    return diff_runs(a, build_timeline(pr, pr_rewrites), program_index(base_rewrites), program_index(pr_rewrites),
                     alpha, min_effect, (base.release.name, pr.release.name))


def render_rewrites(rewrites: RewriteLog | StepGraphs, outdir: Path | str, **options: Any) -> Manifest:
    """Every rewrite's steps as Graphviz SVGs under `outdir`, with manifest.json (options: graphs.render_rewrites)."""
    return render_steps(_graphs(rewrites), outdir, **options)


def _graphs(rewrites: Any) -> StepGraphs:
    if isinstance(rewrites, StepGraphs):
        return rewrites
    if not isinstance(rewrites, RewriteLog):
        raise InputError(f"{getattr(rewrites, 'path', rewrites)}: not a rewrites trace (a profile? graphs need "
                         "rewrites.pkl)")
    return step_graphs(rewrites)


def build_site(outdir: Path | str, profile: Profile | None = None, rewrites: RewriteLog | None = None,
               progress: Progress | None = None, timeline: Timeline | None = None, summary: Summary | None = None,
               atomic: bool = True, baseline: Profile | None = None, baseline_rewrites: RewriteLog | None = None,
               peak_gflops: float | None = None, peak_gbs: float | None = None, **render_options: Any) -> Path:
    """A static site in `outdir` from a profile and/or its rewrites trace; returns its index.html.

    The site holds the trace, a page per kernel program (launches, source, UOp list, AMD disassembly) and per
    rewrite context, where every step of every rewrite is laid out in the browser. With rewrites alone, the folder
    is also the SVG step export (render_rewrites, which needs Graphviz's `dot`). `timeline` and `summary` reuse ones
    already built from `profile`. `atomic`: built beside `outdir`, which it replaces once complete (an existing
    `outdir` must be empty or an earlier stamped output: output.check_folder). `render_options` go to
    graphs.render_rewrites (ctx, rewrite, steps, max_nodes, jobs, …); the site's step viewer uses max_nodes and
    jobs; `window_events` (None: never) splits a bigger trace into an overview and windows. With a profile the
    site has a run report (report.html; `peak_gflops`, `peak_gbs` for achieved vs peak), and with a `baseline`
    profile (and its rewrites) a diff from that run to this one (diff.html)."""
    answers = {"baseline": baseline, "baseline_rewrites": baseline_rewrites, "peak_gflops": peak_gflops,
               "peak_gbs": peak_gbs}
    outdir = Path(outdir)
    if atomic:
        with atomic_folder(outdir) as tmp, stopping_on_error():  # its workers stop before the folder goes
            build_site(tmp, profile, rewrites, progress, timeline, summary, atomic=False, **answers, **render_options)
        return outdir / "index.html"
    window_events = render_options.pop("window_events", WINDOW_EVENTS) or sys.maxsize  # None: one trace
    launches = decode_launches(profile) if profile is not None else []  # once: timeline, summary and listings
    listings, run, change = [], None, None
    if profile is not None:
        timeline = build_timeline(profile, rewrites, launches) if timeline is None else timeline
        summary = summarize(profile, launches) if summary is None else summary
        listings = program_listings(profile, launches)
        run = report(profile, rewrites, timeline, peak_gflops, peak_gbs)
        if baseline is not None:
            change = diff_runs(build_timeline(baseline, baseline_rewrites), timeline, program_index(baseline_rewrites),
                               program_index(rewrites), releases=(baseline.release.name, profile.release.name))
    graphs = _graphs(rewrites) if rewrites is not None else None
    if graphs is not None and profile is None:  # the folder is the SVG export too
        render_steps(graphs, outdir, progress=progress, **render_options)
    view = {k: render_options[k] for k in ("max_nodes", "jobs") if render_options.get(k) is not None}
    return write_site(outdir, summary, graphs, timeline, listings, progress=progress,
                      rewrites_dir="rewrites" if profile is not None else ".", window_events=window_events,
                      report=run, diff=change, **view)
