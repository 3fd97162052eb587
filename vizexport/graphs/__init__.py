"""Step graphs (records.StepGraphs) → DOT → SVG step sequences with a manifest: a writer.

`render_rewrites(graphs, outdir, StepOptions(…))` is the entry point; `dot` writes Graphviz text, `render` runs
Graphviz, `diff` prints the text diff of a match, `manifest` is the typed manifest.json, `options` the export's
options. The face is lazy (PEP 562), as the package's: naming StepOptions (the command line, the Run) loads no
Graphviz.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .options import StepOptions

if TYPE_CHECKING:
    from .export import render_rewrites
    from .render import DotMissing

_HOME = {"render_rewrites": ".export", "DotMissing": ".render"}

__all__ = ["DotMissing", "StepOptions", "render_rewrites"]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value
