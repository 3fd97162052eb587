"""The public API: readers wired to writers, as the `vizexport` command does (cli.py calls these).

    prof = load_profile("profile.pkl")            # records.Profile
    log = load_rewrites("rewrites.pkl")           # records.RewriteLog
    tl = build_timeline(prof, log)                # timeline.Timeline
    write_trace(tl, "trace.pftrace")              # or .pftrace.gz, .json, .json.gz
    render_rewrites(log, "docs/rewrites/")        # SVG steps + manifest.json
    build_site("site/", prof, log)                # static site
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import InputError
from .gcpause import gc_paused
from .graphs import render_rewrites as render_steps
from .graphs.manifest import Manifest
from .output import Progress, atomic_folder
from .perfetto import write_trace
from .records import Profile, RewriteLog, StepGraphs
from .site import build_site as write_site
from .sqtt import Launch, load_launches
from .sqtt.listings import program_listings
from .summary import Summary, summarize
from .timeline import Timeline
from .tinygrad import load_any, load_profile, load_rewrites
from .tinygrad.replay import step_graphs
from .tinygrad.timeline import build_timeline as _build_timeline

__all__ = ["build_site", "build_timeline", "decode_launches", "load_any", "load_profile", "load_rewrites",
           "render_rewrites", "step_graphs", "summarize", "write_trace"]


def decode_launches(prof: Profile) -> list[Launch]:
    """The profile's AMD SQTT/PMC captures grouped per kernel launch and decoded (once: the timeline and the
    summary share them)."""
    return load_launches(prof) if prof.captures else []


def build_timeline(prof: Profile, rewrites: RewriteLog | None = None, launches: list[Launch] | None = None
                   ) -> Timeline:
    """The profile's tracks; with its rewrites trace, kernels also get compile-time estimates and codegen names."""
    with gc_paused():  # millions of acyclic objects: see gcpause
        return _build_timeline(prof, rewrites, decode_launches(prof) if launches is None else launches)


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
               atomic: bool = True, **render_options: Any) -> Path:
    """A static site in `outdir` from a profile and/or its rewrites trace; returns its index.html.

    The site holds the trace, a page per kernel program (launches, source, UOp list, AMD disassembly) and per
    rewrite context, where every step of every rewrite is laid out in the browser. With rewrites alone, the folder
    is also the SVG step export (render_rewrites, which needs Graphviz's `dot`). `timeline` and `summary` reuse ones
    already built from `profile`. `atomic`: built beside `outdir`, which it replaces once complete (an existing
    `outdir` must be empty or an earlier output). `render_options` go to graphs.render_rewrites (ctx, rewrite,
    steps, max_nodes, jobs, …); the site's step viewer uses max_nodes and jobs."""
    outdir = Path(outdir)
    if atomic:
        with atomic_folder(outdir) as tmp:
            build_site(tmp, profile, rewrites, progress, timeline, summary, atomic=False, **render_options)
        return outdir / "index.html"
    launches = decode_launches(profile) if profile is not None and (timeline is None or summary is None) else []
    listings = []
    if profile is not None:
        timeline = build_timeline(profile, rewrites, launches) if timeline is None else timeline
        summary = summarize(profile, launches) if summary is None else summary
        listings = program_listings(profile, launches or decode_launches(profile))
    graphs = _graphs(rewrites) if rewrites is not None else None
    if graphs is not None and profile is None:  # the folder is the SVG export too
        render_steps(graphs, outdir, progress=progress, **render_options)
    view = {k: render_options[k] for k in ("max_nodes", "jobs") if render_options.get(k) is not None}
    return write_site(outdir, summary, graphs, timeline, listings, progress=progress,
                      rewrites_dir="rewrites" if profile is not None else ".", **view)
