"""Step graphs (records.StepGraphs) → DOT → SVG step sequences with a manifest: a writer.

`render_rewrites(graphs, outdir, StepOptions(…))` is the entry point; `dot` writes Graphviz text, `render` runs
Graphviz, `diff` prints the text diff of a match, `manifest` is the typed manifest.json, `options` the export's
options. The face is lazy (PEP 562), as the package's: naming StepOptions (the command line, the Run) loads no
Graphviz.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import attributes
from .options import StepOptions

if TYPE_CHECKING:
    from .export import render_rewrites
    from .render import DotMissing

_HOME = {"render_rewrites": ".export", "DotMissing": ".render"}

__all__ = ["DotMissing", "StepOptions", "render_rewrites"]


__getattr__ = attributes(__name__, globals(), _HOME)
