"""Static index site: one folder with index.html, kernel and rewrite-context pages, the trace and the step SVGs.

No server and no CDN: pages are rendered here with Jinja2, code is highlighted here with Pygments, and one small JS
file adds table sorting, the step viewer and the "Open in Perfetto" button.
"""
from __future__ import annotations

import base64
import gzip
import itertools
import json
import re
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CLexer

from .. import __version__
from ..graphs.export import short_path, write_manifest
from ..info import summarize
from ..output import atomic_file
from ..perfetto import write_trace
from ..records import Profile, RewriteLog
from ..timeline import Timeline
from .kernels import Kernel, top_kernels

TRACE = "trace.pftrace"


def slug(text: str, n: int) -> str:
    return f"{n}-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "x")


def _duration(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _args(args: dict) -> str:
    keep = {k: v for k, v in args.items() if k not in ("tb", "buffers", "profile_key")}
    return ", ".join(f"{k}={v}" for k, v in keep.items())


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("vizexport.site", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True)
    env.filters.update(duration=_duration, bytes=_bytes, args=_args)
    return env


def _source_html(src: str | None) -> str | None:
    return highlight(src, CLexer(), HtmlFormatter(cssclass="hl")) if src else None


def build_site(outdir: Path, profile: Profile | None = None, rewrites: RewriteLog | None = None,
               timeline: Timeline | None = None, render: Callable[[RewriteLog, Path], dict] | None = None,
               rewrites_dir: str = "rewrites") -> Path:
    """Write the site into `outdir` and return the path of its index.html.

    `timeline` is the profile's Timeline (built by the caller, who knows the reader); `render` writes the rewrite
    step SVGs into a folder (`rewrites_dir`, relative to `outdir`) and returns their manifest.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    static = resources.files("vizexport.site").joinpath("static")
    (outdir / "static").mkdir(exist_ok=True)
    for name in ("site.css", "site.js"):
        (outdir / "static" / name).write_text(static.joinpath(name).read_text())
    env, common = _env(), {"version": __version__, "pygments_css": HtmlFormatter(cssclass="hl").get_style_defs()}
    kernels: list[Kernel] = top_kernels(timeline) if timeline is not None else []
    manifest = render(rewrites, outdir / rewrites_dir) if rewrites and render else None
    if manifest is not None and manifest["layout"].startswith("svg/"):
        pack_graphs(outdir / rewrites_dir, manifest)
    contexts = _contexts(rewrites, manifest, outdir / rewrites_dir, f"../{rewrites_dir}/".replace("/./", "/"))
    _link(kernels, contexts, rewrites)
    title = Path(profile.path if profile else rewrites.path if rewrites else "vizexport").parent.name or "vizexport"
    t0 = min((t.ts[0] for t in timeline.tracks if len(t)), default=0) if timeline else 0
    if profile is not None and timeline is not None:
        write_trace(timeline, outdir / TRACE)
    for k in kernels:
        _page(env, outdir / k.page, "kernel.html", 1, title=k.name, k=k, t0=t0, ctx=k.ctx,
              source=_source_html(k.ctx["source"]) if k.ctx else None, **common)
    for c in contexts:
        _page(env, outdir / c["page"], "context.html", 1, title=c["name"], ctx=c, rewrites=c["rewrites"],
              steps_json=json.dumps(c["rewrites"]).replace("</", "<\\/"), kernel=c.get("kernel"),
              source=_source_html(c["source"]), **common)
    summary = summarize(profile) if profile else None
    releases = [(label, x.release) for label, x in (("Profile", profile), ("Rewrites", rewrites)) if x is not None]
    index = outdir / "index.html"
    _page(env, index, "index.html", 0, title=title, summary=summary, releases=releases, kernels=kernels,
          devices=sorted({k.device for k in kernels}) or list(summary["events"]) if summary else [],
          span=_duration(summary["span_ns"][1] - summary["span_ns"][0]) if summary and summary["span_ns"] else "-",
          n_trace_events=timeline.n_events() if timeline else 0, trace=TRACE if timeline else None,
          contexts=contexts, pmc=(summary or {}).get("pmc", []), sqtt=(summary or {}).get("sqtt", []), **common)
    return index


def _page(env: jinja2.Environment, path: Path, template: str, depth: int, **ctx: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(env.get_template(template).render(root="../" * depth, **ctx))


def pack_graphs(folder: Path, manifest: dict) -> None:
    """Move the distinct step graphs (svg/<digest>.svg) into one script per context: the SVGs in step order, as one
    gzip stream (consecutive states share most of their text), base64 in a script because a script loads from
    file:// where a fetch cannot. The site is about a sixth of the size. The manifest (rewritten) names each
    context's pack; steps keep their svg key, which the pack's index maps to [offset, length] in the stream."""
    for c in manifest["contexts"]:
        keys = list(dict.fromkeys(s["svg"] for r in c["rewrites"] for s in r["steps"] if s["svg"]))
        if not keys:
            continue
        svgs = [(folder / k).read_bytes() for k in keys]
        starts = [0, *itertools.accumulate(map(len, svgs))][:-1]
        pack = {"index": {k: [o, len(b)] for k, o, b in zip(keys, starts, svgs, strict=True)},
                "data": base64.b64encode(gzip.compress(b"".join(svgs), 9, mtime=0)).decode()}
        c["pack"] = f"packs/{c['index']}.js"
        with atomic_file(folder / c["pack"]) as f:
            f.write(f"(window.vizexportPacks = window.vizexportPacks || []).push({json.dumps(pack)});\n".encode())
    shutil.rmtree(folder / "svg", ignore_errors=True)
    manifest["layout"] = "packs/<context-index>.js: {index: {svg/<digest>.svg: [offset, length]}, data: base64(gzip)}"
    write_manifest(folder, manifest)


def _step(s: dict, files: Path, svg_root: str, packed: bool) -> dict:
    """A manifest step as the step viewer shows it (the diff text inlined: it is small)."""
    p = s.get("pattern")
    diff = files / s["diff"] if s.get("diff") else None
    out = {"loc": [short_path(p["file"]), p["line"]] if p else None, "seconds": s.get("seconds"),
           "changed": s.get("created"), "error": s.get("error"),
           "svg": (s["svg"] if packed else svg_root + s["svg"]) if s.get("svg") else None,
           "diff": diff.read_text() if diff and diff.exists() else None,
           "note": "large graph: the neighbourhood of the change is drawn" if s.get("capped") else s.get("note")}
    return {k: v for k, v in out.items() if v is not None}  # tens of thousands of steps per page: no nulls


def _contexts(log: RewriteLog | None, manifest: dict | None, files: Path, svg_root: str) -> list[dict]:
    """One entry per rewrite context: page path, rewrites with their steps (SVG paths relative to the page)."""
    if log is None:
        return []
    listed = {c["index"]: c for c in (manifest or {}).get("contexts", [])}
    out = []
    for n, c in enumerate(log.contexts):
        m = listed.get(n, {})
        rewrites = []
        listed_rw = {x["index"]: x for x in m.get("rewrites", [])}
        for i, r in enumerate(c.rewrites):
            mr = listed_rw.get(i, {})
            steps = [_step(s, files, svg_root, "pack" in m) for s in mr.get("steps", [])]
            rewrites.append({"index": i, "name": r.name, "depth": r.depth, "matches": len(r.matches),
                             "steps": steps or [{"note": "no steps rendered"}]})
        out.append({"index": n, "name": c.key.name, "page": f"ctx/{slug(c.key.name, n)}.html", "rewrites": rewrites,
                    "n_rewrites": len(c.rewrites), "n_matches": sum(len(r.matches) for r in c.rewrites),
                    "source": c.source, "keys": [k for k in c.key.keys if isinstance(k, (str, bytes))],
                    "pack": svg_root + m["pack"] if "pack" in m else None})
    return out


def _link(kernels: list[Kernel], contexts: list[dict], log: RewriteLog | None) -> None:
    """Kernel pages ↔ codegen contexts, by the launch's profile_key (0.14+) or by name."""
    by_key: dict[Any, dict] = {}
    for c in contexts:
        if c["source"] is not None:
            for k in c["keys"]:
                by_key.setdefault(k, c)
            by_key.setdefault(c["name"], c)
    for n, k in enumerate(kernels):
        k.page = f"kernel/{slug(k.name, n)}.html"
        key = next((la["args"].get("profile_key") for la in k.launches if la["args"].get("profile_key")), None)
        k.ctx = by_key.get(bytes.fromhex(key)) if key else None
        k.ctx = k.ctx or by_key.get(k.name)
        if k.ctx is not None and "kernel" not in k.ctx:
            k.ctx["kernel"] = {"name": k.name, "device": k.device, "page": k.page}


def clean(outdir: Path) -> None:
    """Remove what an earlier build of the site left (only our own files and folders)."""
    for name in ("index.html", TRACE, "static", "kernel", "ctx", "rewrites"):
        p = outdir / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
