"""Static site: one folder with index.html, a page per kernel program and per rewrite context, the trace, and every
step of every rewrite as data that the browser lays out.

No server and no CDN: pages are rendered here with Jinja2 and code is highlighted here with Pygments; static/site.js
sorts tables and opens the trace in Perfetto; static/steps.js rebuilds each step's graph from its context's pack
(packs.py) and lays it out with Graphviz compiled to WebAssembly (vendor/, pinned by tools/refresh_vizjs.py).
"""
from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from .._version import __version__
from ..analysis import Kernel, ProgramIndex, top_kernels
from ..analysis.diff import Diff
from ..analysis.launches import KEY_TEXT, labels
from ..analysis.launches import label as kernel_label
from ..analysis.report import Report
from ..forks import SERIAL, Executor
from ..graphs.dot import DARK_BELOW, HEADER, HIGHLIGHT
from ..output import Progress, slug, write_atomic
from ..perfetto import write_trace
from ..perfetto.split import Split, SplitOptions, read_index, write_split
from ..records import Context, Listing, StepGraphs
from ..report import diff_sections, diff_title, environment, report_title, run_sections
from ..report.tables import KernelRef
from ..summary import ProfileSummary, ReleaseInfo
from ..timeline import ARG_PROGRAM, Timeline
from ..units import bytes_text, duration_text
from ..windows import WINDOW_EVENTS
from .cfg import cfg_svg
from .code import code_css, highlight_c
from .packs import PackInfo, write_packs

TRACE = "trace.pftrace"
REPORT_PAGE, DIFF_PAGE = "report.html", "diff.html"
STATIC = ("site.css", "site.js", "steps.js")
VIZ_SCRIPT = "viz.js"  # the vendored Graphviz library, as the global the step viewer reads (a script: file:// works)


@dataclass
class ContextPage:
    """A rewrite context's page: its rewrites, its pack of steps, and for codegen contexts the program it made."""

    context: Context
    index: int
    page: str
    label: str  # the name, told apart from other contexts' of the same name (context_labels)
    pack: PackInfo | None = None
    kernels: list[KernelPage] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.context.key.name


@dataclass
class KernelPage:
    """A kernel program's page: its launches, and the codegen context and machine code that made it."""

    kernel: Kernel
    page: str
    label: str  # the name, with the program's key where several programs share it
    ctx: ContextPage | None = None
    listing: Listing | None = None


def page_name(name: str, n: int) -> str:
    return f"{n}-{slug(name, 60)}"


def _args(args: dict) -> str:
    keep = {k: v for k, v in args.items() if k not in ("tb", "buffers", ARG_PROGRAM)}
    return ", ".join(f"{k}={v}" for k, v in keep.items())


def _env() -> jinja2.Environment:
    env = environment(jinja2.PackageLoader("vizexport.site", "templates"))  # the report's templates too
    env.filters.update(duration=duration_text, bytes=bytes_text, args=_args, json=_script_json, cfg_svg=cfg_svg)
    return env


def _script_json(x: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(x).replace("</", "<\\/")


@dataclass(frozen=True)
class Pages:
    """What a site shows: the profile's figures (`summary`) and tracks (`timeline`), its programs' machine code
    (`listings`), its rewrites trace's step graphs (`graphs`), the run report and the diff from a base run."""

    summary: ProfileSummary | None = None
    graphs: StepGraphs | None = None
    timeline: Timeline | None = None
    listings: list[Listing] = field(default_factory=list)
    report: Report | None = None
    diff: Diff | None = None


@dataclass(frozen=True)
class SiteOptions:
    """The step packs go to `rewrites_dir` (relative to the site), written in `jobs` processes; the step viewer shows
    graphs above `max_nodes` boxes as the neighbourhood of the change, as the SVG export does; a timeline of more than
    `window_events` events is written as an overview and windows (perfetto.split)."""

    max_nodes: int = 400
    jobs: int | None = None
    rewrites_dir: str = "rewrites"
    window_events: int = WINDOW_EVENTS


def build_site(outdir: Path, pages: Pages, options: SiteOptions = SiteOptions(), progress: Progress | None = None,
               executor: Executor = SERIAL) -> Path:
    """Write the site of `pages` into `outdir` and return the path of its index.html. A report adds report.html,
    a diff (against a base run) diff.html, both with their plots inlined as SVG. `executor` runs the plots, the
    step packs and the trace's encoders beside this process (SERIAL: all here)."""
    outdir.mkdir(parents=True, exist_ok=True)
    _static(outdir)
    env, common = _env(), {"version": __version__}
    code: dict[str, str] = {}  # highlighted sources (a kernel page and its context page show the same)
    summary, graphs, timeline, report, diff = pages.summary, pages.graphs, pages.timeline, pages.report, pages.diff
    answered = report is not None or diff is not None
    plots = executor.in_background(_plots, report, diff, warm=warm_plots) if answered else None
    contexts = _context_pages(graphs)
    packs = write_packs(graphs, outdir / options.rewrites_dir / "packs", options.jobs, executor) \
        if graphs is not None else iter(())
    kernels = _kernels(timeline, contexts, pages.listings or [])
    title = Path(summary.file if summary else graphs.path if graphs else "vizexport").parent.name or "vizexport"
    t0 = min((t.ts[0] for t in timeline.tracks if len(t)), default=0) if timeline else 0
    windows = _trace(outdir, timeline, options.window_events, executor)
    for kp in kernels:
        _page(env, outdir / kp.page, "kernel.html", 1, title=kp.label, kp=kp, k=kp.kernel, t0=t0, ctx=kp.ctx,
              source=_highlighted(kp.ctx.context.source if kp.ctx else None, code), **common)
    _contexts(env, outdir, contexts, packs, options, progress, code, common)
    answers = _answers(env, outdir, report, diff, plots() if plots else ({}, {}),
                       {**common, "links": kernel_links(kernels)})
    releases = [(label, r) for label, r in (("Profile", summary and summary.tinygrad),
                                            ("Rewrites", graphs and ReleaseInfo.of(graphs.release))) if r]
    span = summary.span_ns if summary else None
    index = outdir / "index.html"
    _page(env, index, "index.html", 0, title=title, summary=summary, releases=releases, kernels=kernels,
          devices=sorted({kp.kernel.device for kp in kernels}) or list(summary.events) if summary else [],
          span=duration_text(span[1] - span[0]) if span else "-",
          n_trace_events=timeline.n_events() if timeline else 0, trace=TRACE if timeline else None,
          contexts=contexts, pmc=(summary and summary.pmc) or [], sqtt=(summary and summary.sqtt) or [],
          windows=windows, answers=answers, **common)
    return index


def _trace(outdir: Path, timeline: Timeline | None, window_events: int, executor: Executor) -> list[dict] | None:
    """The site's trace, whole or (above `window_events` events) as an overview and windows: those for the index
    page's time bar."""
    if timeline is not None and timeline.n_events() > window_events:
        split = write_split(timeline, outdir / TRACE, SplitOptions(window_events), executor=executor)
        return _window_bar(split, outdir)
    if timeline is not None:
        write_trace(timeline, outdir / TRACE, executor=executor)
    return None


def _contexts(env: jinja2.Environment, outdir: Path, contexts: list[ContextPage], packs: Iterator[PackInfo],
              options: SiteOptions, progress: Progress | None, code: dict[str, str], common: dict) -> None:
    """A page per rewrite context: those without rewrites at once, the others each once its step pack is written."""
    packs_dir = f"{options.rewrites_dir}/packs/".removeprefix("./")

    def context_page(c: ContextPage) -> None:
        config = {"context": c.index, "header": HEADER, "highlight": HIGHLIGHT, "darkBelow": DARK_BELOW,
                  "maxNodes": options.max_nodes}
        _page(env, outdir / c.page, "context.html", 1, title=c.label, c=c, ctx=c.context, config=config,
              pack=f"{packs_dir}{c.pack.path}" if c.pack else None,
              source=None if c.kernels else _highlighted(c.context.source, code), **common)
    for c in contexts:
        if not c.context.rewrites:  # no pack
            context_page(c)
    for c in _take_packs(contexts, packs, progress):  # each page as its step pack, written meanwhile, is done
        context_page(c)


def _window_bar(split: Split, outdir: Path) -> list[dict]:
    """The windows as the index page's time bar shows them: file, label, share of the run's time."""
    index = read_index(split.overview) or {"windows": []}
    wins = index["windows"]
    span = max(1, wins[-1]["end_ns"] - wins[0]["start_ns"]) if wins else 1
    folder = split.folder.relative_to(outdir).as_posix()
    return [{"file": f"{folder}/{w['file']}", "label": f"{w['start_s']:.3f}–{w['end_s']:.3f} s",
             "events": w["events"], "pct": 100 * (w["end_ns"] - w["start_ns"]) / span} for w in wins]


def warm_plots() -> None:
    """What the plots' helper does before it has its task: import matplotlib (a third of a second). The command
    forks it first thing (Executor.prepare), so that this runs while the inputs load."""
    from ..report import plots  # noqa: F401


def _plots(report: Report | None, diff: Diff | None) -> tuple[dict[str, str], dict[str, str]]:
    """The report's and the diff's plots (run in the background: matplotlib takes a second)."""
    from ..report.plots import diff_plots, report_plots  # matplotlib: imported only to draw
    return report_plots(report) if report is not None else {}, diff_plots(diff) if diff is not None else {}


def _answers(env: jinja2.Environment, outdir: Path, report: Report | None, diff: Diff | None,
             plots: tuple[dict[str, str], dict[str, str]], common: dict) -> list[tuple[str, str, str]]:
    """report.html and diff.html (with their `plots`): (page, title, headline) of each written."""
    out = []
    if report is not None:
        title, line = report_title(report), run_sections.headline(report)
        _page(env, outdir / REPORT_PAGE, "answers.html", 0, title=title, kind="run report", headline=line,
              sections=run_sections.sections(report), plots=plots[0], **common)
        out.append((REPORT_PAGE, title, line))
    if diff is not None:
        title, line = diff_title(diff), diff_sections.verdict_counts(diff)
        _page(env, outdir / DIFF_PAGE, "answers.html", 0, title=title, kind="diff", headline=line,
              sections=diff_sections.sections(diff), plots=plots[1], **common)
        out.append((DIFF_PAGE, title, line))
    return out


def kernel_links(kernels: list[KernelPage]) -> dict[KernelRef, str]:
    """The kernel pages by (device, label) as the report and the diff name kernels (report.tables.kernel): the label
    with the program's key where there is one, and the bare name, which a diff gives a name of several programs, and
    (None, name) for a name of any device (the report's call sites). A name of several pages links to the one with
    the most time (`kernels` come longest first)."""
    out: dict[KernelRef, str] = {}
    for kp in kernels:
        k = kp.kernel
        for ref in ((k.device, kernel_label(k.name, k.program)), (k.device, k.name), (None, k.name)):
            out.setdefault(ref, kp.page)
    return out


def _highlighted(src: str | None, done: dict[str, str]) -> str | None:
    if src is None:
        return None
    if src not in done:
        done[src] = highlight_c(src)
    return done[src]


def _static(outdir: Path) -> None:
    """The pages' scripts and style, and the Graphviz library with its licences."""
    package = resources.files("vizexport.site")
    for name in STATIC:
        write_atomic(outdir / "static" / name, package.joinpath("static", name).read_bytes())
    write_atomic(outdir / "static" / "code.css", code_css().encode())
    viz = base64.b64encode(package.joinpath("vendor", "viz-global.js.gz").read_bytes()).decode()
    write_atomic(outdir / "static" / VIZ_SCRIPT, f'window.vizexportViz = "{viz}";\n'.encode())
    write_atomic(outdir / "static" / "LICENSES.txt", package.joinpath("vendor", "LICENSES.txt").read_bytes())


def _page(env: jinja2.Environment, path: Path, template: str, depth: int, **ctx: Any) -> None:
    write_atomic(path, env.get_template(template).render(root="../" * depth, **ctx).encode())  # counted (limits)


def _context_pages(graphs: StepGraphs | None) -> list[ContextPage]:
    """A page per rewrite context."""
    if graphs is None:
        return []
    return [ContextPage(c, n, f"ctx/{page_name(c.key.name, n)}.html", label)
            for n, (c, label) in enumerate(zip(graphs.contexts, context_labels(graphs.contexts), strict=True))]


def context_labels(contexts: list[Context]) -> list[str]:
    """Each context's name; where several contexts share it (tinygrad 0.14+ names a kernel's codegen context after
    the kernel, and many programs are named E_2), with the program it made (the key's first digits, as a kernel
    page's label shows it) and its index: `E_2 [e4871f1c] · #2`."""
    n = Counter(c.key.name for c in contexts)
    out = []
    for i, c in enumerate(contexts):
        if n[c.key.name] < 2:
            out.append(c.key.name)
            continue
        key = next((k.hex()[:KEY_TEXT] for k in c.key.keys if isinstance(k, bytes)), None)
        out.append(f"{c.key.name} [{key}] · #{i}" if key else f"{c.key.name} · #{i}")
    return out


def _take_packs(pages: list[ContextPage], packs: Iterator[PackInfo], progress: Progress | None
                ) -> Iterator[ContextPage]:
    """The pages of the contexts with rewrites, each once its pack is written (in the order they finish)."""
    todo = sum(1 for p in pages if p.context.rewrites)
    for done, info in enumerate(packs, 1):
        pages[info.index].pack = info
        yield pages[info.index]
        if progress:
            progress(done, todo)


def _kernels(timeline: Timeline | None, contexts: list[ContextPage], listings: list[Listing]) -> list[KernelPage]:
    """A page per launched program, linked to its codegen context and machine code by the program's key (0.14+)
    or, where launches have none, by name (a later context wins, as in tinygrad's viewers)."""
    if timeline is None:
        return []
    kernels = top_kernels(timeline, by_program=True)
    index = ProgramIndex([c.context for c in contexts])
    code = {x.key.hex() if x.key else x.name: x for x in listings}
    out = []
    for n, (k, label) in enumerate(zip(kernels, labels(kernels), strict=True)):
        found = index.find(k.key, k.name)
        ctx = contexts[found] if found is not None else None
        kp = KernelPage(k, f"kernel/{page_name(label, n)}.html", label, ctx, code.get(k.program or k.name))
        if ctx is not None:
            ctx.kernels.append(kp)
        out.append(kp)
    return out
