"""DOT → SVG with Graphviz `dot` (through the graphviz package), bounded in time.

Small graphs are laid out several to one `dot` process (starting dot costs more than laying out ten nodes); a batch
that fails or runs out of time is redone one graph at a time, and a graph that still takes longer than the limit
becomes a small SVG saying so.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from xml.sax.saxutils import escape

import graphviz
from graphviz.backend import dot_command

from ..limits import child_memory, limit_process_memory

CAPTION_PT = 16
_NOISE = re.compile(rb"<!--.*?-->\n|<title>[^<]*</title>\n", re.S)  # per-node comments and "n12" titles
_DOCTYPE = b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
_FONT = b' font-family="Helvetica,sans-Serif"'
_GRAPH_ID = re.compile(rb'<g id="[^"]*" class="graph"')  # "page0,3_graph0" for the 4th graph of a batch
_SIZE = re.compile(rb'width="([0-9.]+)pt" height="([0-9.]+)pt"\s+viewBox="([-0-9. ]+)"')
# dot's per-element defaults, stated once in a style sheet instead; `:not([attr])` leaves elements that still carry
# their own value (highlighted edges, notes) alone, since style sheet rules would override presentation attributes
_DEFAULTS = ((b' text-anchor="middle"', b""), (b' font-size="9.00"', b""), (b' font-size="8.00" fill="#1c7ed6"', b""),
             (b'<path fill="none" stroke="#606060" ', b"<path "),
             (b'<polygon fill="#606060" stroke="#606060" ', b"<polygon "), (b' stroke="black" points=', b" points="))
_STYLE = (b"<style>g text:not([text-anchor]){text-anchor:middle} g text:not([font-size]){font-size:9px} "
          b".edge text:not([fill]){font-size:8px;fill:#1c7ed6} .edge path:not([stroke]){fill:none;stroke:#606060} "
          b".edge polygon:not([fill]){fill:#606060;stroke:#606060} .node polygon:not([stroke]){stroke:black}</style>\n")
_EDGE_ID = re.compile(rb'<g id="edge\d+" class="edge">')


class DotMissing(RuntimeError):
    """Graphviz's `dot` is not installed."""


_ENV: dict[str, str] | None = None  # environment for dot (see use_builtin_metrics); None: the inherited one


@dataclass
class Rendered:
    status: str  # "ok" | "timeout" | "error"
    svg: bytes


def check_dot() -> str:
    """Graphviz's version, or DotMissing with an install hint."""
    try:
        return ".".join(map(str, graphviz.version()))
    except graphviz.ExecutableNotFound:
        raise DotMissing("Graphviz's `dot` is not installed (Debian/Ubuntu: apt-get install graphviz)") from None


def _scratch() -> BinaryIO:
    """An unnamed file in memory where the OS has them (Linux), else on disk: creating and dropping thousands of
    disk files costs the file system more than the writes."""
    try:
        return open(os.memfd_create("vizexport-dot", os.MFD_CLOEXEC), "w+b")
    except (AttributeError, OSError):  # not Linux, or a sandbox that forbids it
        return tempfile.TemporaryFile()


def _run(data: bytes, timeout: float) -> bytes:
    """dot's SVG output for `data`. Input and output go through unnamed scratch files, not pipes: a batch's SVG
    is megabytes, which a pipe hands over a few KiB per wake-up (a round of context switches and polls each)."""
    cmd = dot_command.command("dot", "svg")
    with _scratch() as src, _scratch() as out:
        src.write(data)
        src.seek(0)
        with subprocess.Popen(cmd, stdin=src, stdout=out, stderr=subprocess.PIPE, env=_ENV) as proc:
            limit_process_memory(proc.pid, child_memory())  # dot's memory counts in the command's cap
            try:
                _, err = proc.communicate(timeout=timeout)
            except BaseException:  # the time limit, or this worker stopped: dot goes too
                proc.kill()
                raise
        if proc.returncode:
            raise graphviz.CalledProcessError(proc.returncode, cmd, stderr=err)
        out.seek(0)
        return out.read()


def use_builtin_metrics(folder: Path) -> bool:
    """Make dot size text with its built-in font metrics instead of a text-layout plugin (pango): a copy of
    Graphviz's plugin configuration without text layout, in `folder` (GVBINDIR). Labels are measured a quarter
    faster and layouts no longer depend on the fonts installed. Returns False (changing nothing) where that cannot
    be arranged."""
    global _ENV
    try:
        probe = subprocess.run(["dot", "-v", "-Tcanon"], input=b"digraph{}", capture_output=True, timeout=30)
        m = re.search(rb'libdir = "([^"]+)"', probe.stderr)
        libdir = Path(m.group(1).decode()) if m else None
        configs = sorted(libdir.glob("config*")) if libdir and libdir.is_dir() else []
        if not configs:
            return False
        folder.mkdir(parents=True, exist_ok=True)
        for f in libdir.iterdir():
            if not f.name.startswith("config"):
                (folder / f.name).symlink_to(f)
        for c in configs:
            (folder / c.name).write_text(_without_textlayout(c.read_text()))
        env = {**os.environ, "GVBINDIR": str(folder)}
        check = subprocess.run(["dot", "-Tsvg"], input=b'digraph{a [fontname="Helvetica"]}', capture_output=True,
                               timeout=30, env=env)
        if check.returncode or check.stderr or b"<svg" not in check.stdout:
            return False
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return False
    _ENV = env
    return True


def _without_textlayout(config: str) -> str:
    """A Graphviz plugin configuration (config6a, config8, …) without its `textlayout` providers (pango, gd)."""
    out, skipping = [], 0
    for line in config.splitlines(keepends=True):
        if not skipping and line.strip().startswith("textlayout") and line.rstrip().endswith("{"):
            skipping = 1
            continue
        if skipping:
            skipping += line.count("{") - line.count("}")
            continue
        out.append(line)
    return "".join(out)


def render_one(dot: str, timeout: float, size: str = "") -> Rendered:
    try:
        return Rendered("ok", compact(_run(dot.encode(), timeout)))
    except subprocess.TimeoutExpired:
        why = f"Graphviz dot did not finish within {timeout:g} s for this graph{size}; it was not drawn."
        return Rendered("timeout", notice_svg(["graph not drawn (time limit)", why]))
    except graphviz.CalledProcessError as e:
        err = (e.stderr or b"").decode(errors="replace").strip().splitlines()
        why = f"Graphviz dot failed: {err[-1] if err else e}"
        return Rendered("error", notice_svg(["graph not drawn (dot failed)", why]))


def render_batch(dots: list[str], timeout: float, sizes: list[str] | None = None) -> list[Rendered]:
    """Render graphs with one dot process; any trouble → each graph on its own (with its own time limit)."""
    sizes = sizes or [""] * len(dots)
    if len(dots) > 1:
        try:
            out = _run("".join(dots).encode(), timeout * len(dots))
            parts = [b"<?xml " + p for p in out.split(b"<?xml ")[1:]]
            if len(parts) == len(dots):
                return [Rendered("ok", compact(p)) for p in parts]
        except (subprocess.TimeoutExpired, graphviz.CalledProcessError):
            pass
    return [render_one(d, timeout, s) for d, s in zip(dots, sizes, strict=True)]


def compact(svg: bytes) -> bytes:
    """Graphviz's SVG, about half the size and the same whatever its position in a batch: no per-element
    comments, id titles or edge ids; font, text anchoring and default edge colours given once in a style sheet."""
    svg = svg.replace(_DOCTYPE, b"", 1)  # once, at the top: found without scanning the rest
    svg = _GRAPH_ID.sub(b'<g id="graph0" class="graph"', _NOISE.sub(b"", svg), count=1)
    svg = _EDGE_ID.sub(b'<g class="edge">', svg)
    for old, new in _DEFAULTS:
        svg = svg.replace(old, new)
    if _FONT in svg:
        svg = svg.replace(_FONT, b"").replace(b"<svg ", b"<svg" + _FONT + b" ", 1)
    end = svg.find(b">", svg.find(b"<svg ")) + 1
    return svg[:end] + b"\n" + _STYLE + svg[end:].lstrip(b"\n") if end else svg


def notice_svg(lines: Iterable[str]) -> bytes:
    """A small SVG showing a few lines of text (for graphs not drawn)."""
    lines = [ln[:160] for ln in lines]
    width = max(200, 8 + 6 * max((len(ln) for ln in lines), default=0))
    height = 10 + 16 * len(lines)
    texts = "".join(f'<text x="6" y="{18 + 16 * i}" font-family="Helvetica,Arial,sans-serif" font-size="11" '
                    f'fill="{"#c92a2a" if i == 0 else "#333333"}">{escape(ln)}</text>\n' for i, ln in enumerate(lines))
    return (f'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
            f'<svg width="{width}pt" height="{height}pt" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg">\n<rect width="100%" height="100%" fill="white" stroke="#c92a2a"/>\n'
            f'{texts}</svg>\n').encode()


def captioned(svg: bytes, caption: str) -> bytes:
    """The SVG with a document title and a one-line caption band above the drawing."""
    m = _SIZE.search(svg, 0, 2000)
    if m is None:
        return svg
    caption = caption if len(caption) <= 160 else caption[:159] + "…"
    w, h = float(m.group(1)), float(m.group(2))
    box = [float(x) for x in m.group(3).split()]
    width = max(w, 8 + 5.6 * len(caption))
    height = h + CAPTION_PT
    vb = (box[0], box[1] - CAPTION_PT, box[2] + width - w, box[3] + CAPTION_PT)
    head = (f'width="{width:.0f}pt" height="{height:.0f}pt" '
            f'viewBox="{vb[0]:.2f} {vb[1]:.2f} {vb[2]:.2f} {vb[3]:.2f}"').encode()
    end = svg.index(b">", m.end()) + 1
    text = escape(caption)
    band = (f'\n<title>{text}</title>\n<rect x="{vb[0]:.2f}" y="{vb[1]:.2f}" width="{vb[2]:.2f}" '
            f'height="{vb[3]:.2f}" fill="white"/>\n<text x="{vb[0] + 4:.2f}" y="{box[1] - 4:.2f}" '
            f'font-size="10" fill="#333333">{text}</text>').encode()
    return svg[:m.start()] + head + svg[m.end():end] + band + svg[end:]
