"""Static index site: one folder with index.html, kernel and rewrite-context pages, the trace and the step SVGs.

No server and no CDN: pages are rendered here with Jinja2, code is highlighted here with Pygments, and one small JS
file adds table sorting, the step viewer and the "Open in Perfetto" button.
"""
from __future__ import annotations

import base64
import gzip
import itertools
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CLexer

from .. import __version__
from ..analysis import Kernel, top_kernels
from ..graphs.manifest import Manifest, StepEntry, short_path, write_manifest
from ..output import atomic_file, slug
from ..perfetto import write_trace
from ..records import StepGraphs
from ..summary import ProfileSummary, ReleaseInfo
from ..timeline import ARG_PROGRAM, Timeline
from ..units import bytes_text, duration_text

TRACE = "trace.pftrace"


@dataclass
class KernelPage:
    """A kernel's page: where it is, and its codegen context when the rewrites trace has one."""

    kernel: Kernel
    page: str
    ctx: dict | None = None


def page_name(name: str, n: int) -> str:
    return f"{n}-{slug(name, 60)}"


def _args(args: dict) -> str:
    keep = {k: v for k, v in args.items() if k not in ("tb", "buffers", ARG_PROGRAM)}
    return ", ".join(f"{k}={v}" for k, v in keep.items())


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("vizexport.site", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True)
    env.filters.update(duration=duration_text, bytes=bytes_text, args=_args)
    return env


def _source_html(src: str | None) -> str | None:
    return highlight(src, CLexer(), HtmlFormatter(cssclass="hl")) if src else None


def build_site(outdir: Path, summary: ProfileSummary | None = None, graphs: StepGraphs | None = None,
               timeline: Timeline | None = None, render: Callable[[StepGraphs, Path], Manifest] | None = None,
               rewrites_dir: str = "rewrites") -> Path:
    """Write the site into `outdir` and return the path of its index.html.

    `summary` and `timeline` describe the profile, `graphs` its rewrites trace; `render` writes the rewrite step
    SVGs into a folder (`rewrites_dir`, relative to `outdir`) and returns their manifest.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    static = resources.files("vizexport.site").joinpath("static")
    (outdir / "static").mkdir(exist_ok=True)
    for name in ("site.css", "site.js"):
        (outdir / "static" / name).write_text(static.joinpath(name).read_text())
    env, common = _env(), {"version": __version__, "pygments_css": HtmlFormatter(cssclass="hl").get_style_defs()}
    kernels = [KernelPage(k, f"kernel/{page_name(k.name, n)}.html")
               for n, k in enumerate(top_kernels(timeline) if timeline is not None else [])]
    manifest = render(graphs, outdir / rewrites_dir) if graphs and render else None
    if manifest is not None and manifest.layout.startswith("svg/"):
        pack_graphs(outdir / rewrites_dir, manifest)
    contexts = _contexts(graphs, manifest, outdir / rewrites_dir, f"../{rewrites_dir}/".replace("/./", "/"))
    _link(kernels, contexts)
    title = Path(summary.file if summary else graphs.path if graphs else "vizexport").parent.name or "vizexport"
    t0 = min((t.ts[0] for t in timeline.tracks if len(t)), default=0) if timeline else 0
    if timeline is not None:
        write_trace(timeline, outdir / TRACE)
    for kp in kernels:
        _page(env, outdir / kp.page, "kernel.html", 1, title=kp.kernel.name, k=kp.kernel, t0=t0, ctx=kp.ctx,
              source=_source_html(kp.ctx["source"]) if kp.ctx else None, **common)
    for c in contexts:
        _page(env, outdir / c["page"], "context.html", 1, title=c["name"], ctx=c, rewrites=c["rewrites"],
              steps_json=json.dumps(c["rewrites"]).replace("</", "<\\/"), kernel=c.get("kernel"),
              source=_source_html(c["source"]), **common)
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


def _page(env: jinja2.Environment, path: Path, template: str, depth: int, **ctx: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(env.get_template(template).render(root="../" * depth, **ctx))


def pack_graphs(folder: Path, manifest: Manifest) -> None:
    """Move the distinct step graphs (svg/<digest>.svg) into one script per context: the SVGs in step order, as one
    gzip stream (consecutive states share most of their text), base64 in a script because a script loads from
    file:// where a fetch cannot. The site is about a sixth of the size. The manifest (rewritten) names each
    context's pack; steps keep their svg key, which the pack's index maps to [offset, length] in the stream."""
    for c in manifest.contexts:
        keys = list(dict.fromkeys(s.svg for r in c.rewrites for s in r.steps if s.svg))
        if not keys:
            continue
        svgs = [(folder / k).read_bytes() for k in keys]
        starts = [0, *itertools.accumulate(map(len, svgs))][:-1]
        pack = {"index": {k: [o, len(b)] for k, o, b in zip(keys, starts, svgs, strict=True)},
                "data": base64.b64encode(gzip.compress(b"".join(svgs), 9, mtime=0)).decode()}
        c.pack = f"packs/{c.index}.js"
        with atomic_file(folder / c.pack) as f:
            f.write(f"(window.vizexportPacks = window.vizexportPacks || []).push({json.dumps(pack)});\n".encode())
    shutil.rmtree(folder / "svg", ignore_errors=True)
    manifest.layout = "packs/<context-index>.js: {index: {svg/<digest>.svg: [offset, length]}, data: base64(gzip)}"
    write_manifest(folder, manifest)


def _step(s: StepEntry, files: Path, svg_root: str, packed: bool) -> dict:
    """A manifest step as the step viewer shows it (the diff text inlined: it is small)."""
    p = s.pattern
    diff = files / s.diff if s.diff else None
    out = {"loc": [short_path(p.file), p.line] if p else None, "seconds": s.seconds,
           "changed": s.created, "error": s.error,
           "svg": (s.svg if packed else svg_root + s.svg) if s.svg else None,
           "diff": diff.read_text() if diff and diff.exists() else None,
           "note": "large graph: the neighbourhood of the change is drawn" if s.capped else None}
    return {k: v for k, v in out.items() if v is not None}  # tens of thousands of steps per page: no nulls


def _contexts(graphs: StepGraphs | None, manifest: Manifest | None, files: Path, svg_root: str) -> list[dict]:
    """One entry per rewrite context: page path, rewrites with their steps (SVG paths relative to the page)."""
    if graphs is None:
        return []
    listed = {c.index: c for c in manifest.contexts} if manifest else {}
    out = []
    for n, c in enumerate(graphs.contexts):
        m = listed.get(n)
        listed_rw = {x.index: x for x in m.rewrites} if m else {}
        rewrites = []
        for i, r in enumerate(c.rewrites):
            mr = listed_rw.get(i)
            steps = [_step(s, files, svg_root, m.pack is not None) for s in mr.steps] if mr else []
            rewrites.append({"index": i, "name": r.name, "depth": r.depth, "matches": len(r.matches),
                             "steps": steps or [{"note": "no steps rendered"}]})
        out.append({"index": n, "name": c.key.name, "page": f"ctx/{page_name(c.key.name, n)}.html",
                    "rewrites": rewrites, "n_rewrites": len(c.rewrites),
                    "n_matches": sum(len(r.matches) for r in c.rewrites), "source": c.source, "keys": c.key.keys,
                    "pack": svg_root + m.pack if m and m.pack else None})
    return out


def _link(kernels: list[KernelPage], contexts: list[dict]) -> None:
    """Kernel pages ↔ codegen contexts, by the launch's program key (0.14+) or by name."""
    by_key: dict[Any, dict] = {}
    for c in contexts:
        if c["source"] is not None:
            for k in c["keys"]:
                by_key.setdefault(k, c)
            by_key.setdefault(c["name"], c)
    for kp in kernels:
        k = kp.kernel
        key = next((la["args"].get(ARG_PROGRAM) for la in k.launches if la["args"].get(ARG_PROGRAM)), None)
        kp.ctx = by_key.get(bytes.fromhex(key)) if key else None
        kp.ctx = kp.ctx or by_key.get(k.name)
        if kp.ctx is not None and "kernel" not in kp.ctx:
            kp.ctx["kernel"] = {"name": k.name, "device": k.device, "page": kp.page}
