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
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from .. import __version__
from ..analysis import Kernel, top_kernels
from ..graphs.dot import DARK_BELOW, HEADER, HIGHLIGHT
from ..output import Progress, slug, write_atomic
from ..perfetto import write_trace
from ..records import Context, Listing, StepGraphs
from ..summary import ProfileSummary, ReleaseInfo
from ..timeline import ARG_PROGRAM, Timeline
from ..units import bytes_text, duration_text
from .cfg import cfg_svg
from .code import code_css, highlight_c
from .packs import PackInfo, write_packs

TRACE = "trace.pftrace"
STATIC = ("site.css", "site.js", "steps.js")
VIZ_SCRIPT = "viz.js"  # the vendored Graphviz library, as the global the step viewer reads (a script: file:// works)
KEY_TEXT = 8  # hex digits of a program key shown beside a name that several programs share


@dataclass
class ContextPage:
    """A rewrite context's page: its rewrites, its pack of steps, and for codegen contexts the program it made."""

    context: Context
    index: int
    page: str
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
    env = jinja2.Environment(loader=jinja2.PackageLoader("vizexport.site", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True)
    env.filters.update(duration=duration_text, bytes=bytes_text, args=_args, json=_script_json, cfg_svg=cfg_svg)
    return env


def _script_json(x: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(x).replace("</", "<\\/")


def build_site(outdir: Path, summary: ProfileSummary | None = None, graphs: StepGraphs | None = None,
               timeline: Timeline | None = None, listings: list[Listing] | None = None, max_nodes: int = 400,
               jobs: int | None = None, progress: Progress | None = None, rewrites_dir: str = "rewrites") -> Path:
    """Write the site into `outdir` and return the path of its index.html.

    `summary` and `timeline` describe the profile, `listings` its programs' machine code, `graphs` its rewrites
    trace, whose step packs go to `rewrites_dir` (relative to `outdir`), written in `jobs` processes. The step
    viewer shows graphs above `max_nodes` boxes as the neighbourhood of the change, as the SVG export does."""
    outdir.mkdir(parents=True, exist_ok=True)
    _static(outdir)
    env, common = _env(), {"version": __version__}
    code: dict[str, str] = {}  # highlighted sources (a kernel page and its context page show the same)
    contexts = _contexts(graphs, outdir / rewrites_dir, jobs, progress)
    kernels = _kernels(timeline, contexts, listings or [])
    title = Path(summary.file if summary else graphs.path if graphs else "vizexport").parent.name or "vizexport"
    t0 = min((t.ts[0] for t in timeline.tracks if len(t)), default=0) if timeline else 0
    if timeline is not None:
        write_trace(timeline, outdir / TRACE)
    for kp in kernels:
        _page(env, outdir / kp.page, "kernel.html", 1, title=kp.label, kp=kp, k=kp.kernel, t0=t0, ctx=kp.ctx,
              source=_highlighted(kp.ctx.context.source if kp.ctx else None, code), **common)
    packs = f"{rewrites_dir}/packs/".removeprefix("./")
    for c in contexts:
        config = {"context": c.index, "header": HEADER, "highlight": HIGHLIGHT, "darkBelow": DARK_BELOW,
                  "maxNodes": max_nodes}
        _page(env, outdir / c.page, "context.html", 1, title=c.name, c=c, ctx=c.context, config=config,
              pack=f"{packs}{c.pack.path}" if c.pack else None,
              source=None if c.kernels else _highlighted(c.context.source, code), **common)
    releases = [(label, r) for label, r in (("Profile", summary and summary.tinygrad),
                                            ("Rewrites", graphs and ReleaseInfo.of(graphs.release))) if r]
    span = summary.span_ns if summary else None
    index = outdir / "index.html"
    _page(env, index, "index.html", 0, title=title, summary=summary, releases=releases, kernels=kernels,
          devices=sorted({kp.kernel.device for kp in kernels}) or list(summary.events) if summary else [],
          span=duration_text(span[1] - span[0]) if span else "-",
          n_trace_events=timeline.n_events() if timeline else 0, trace=TRACE if timeline else None,
          contexts=contexts, pmc=(summary and summary.pmc) or [], sqtt=(summary and summary.sqtt) or [], **common)
    return index


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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(env.get_template(template).render(root="../" * depth, **ctx))


def _contexts(graphs: StepGraphs | None, folder: Path, jobs: int | None, progress: Progress | None
              ) -> list[ContextPage]:
    """A page per rewrite context, and the packs of those with rewrites."""
    if graphs is None:
        return []
    pages = [ContextPage(c, n, f"ctx/{page_name(c.key.name, n)}.html") for n, c in enumerate(graphs.contexts)]
    todo = sum(1 for c in graphs.contexts if c.rewrites)
    for done, info in enumerate(write_packs(graphs, folder / "packs", jobs), 1):
        pages[info.index].pack = info
        if progress:
            progress(done, todo)
    return pages


def _kernels(timeline: Timeline | None, contexts: list[ContextPage], listings: list[Listing]) -> list[KernelPage]:
    """A page per launched program, linked to its codegen context and machine code by the program's key (0.14+)
    or, where launches have none, by name (a later context wins, as in tinygrad's viewers)."""
    if timeline is None:
        return []
    kernels = top_kernels(timeline, by_program=True)
    names = Counter((k.device, k.name) for k in kernels)
    by_key: dict[Any, ContextPage] = {}
    for c in contexts:
        by_key.update(dict.fromkeys(c.context.key.keys, c))
    by_name = {c.name: c for c in contexts if c.context.source is not None}
    code = {x.key.hex() if x.key else x.name: x for x in listings}
    out = []
    for n, k in enumerate(kernels):
        label = f"{k.name} [{k.program[:KEY_TEXT]}]" if k.program and names[(k.device, k.name)] > 1 else k.name
        ctx = by_key.get(bytes.fromhex(k.program)) if k.program else by_key.get(k.name) or by_name.get(k.name)
        kp = KernelPage(k, f"kernel/{page_name(label, n)}.html", label, ctx, code.get(k.program or k.name))
        if ctx is not None:
            ctx.kernels.append(kp)
        out.append(kp)
    return out
