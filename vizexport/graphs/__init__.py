"""Step graphs (records.StepGraphs) → DOT → SVG step sequences with a manifest: a writer.

`render_rewrites(graphs, outdir, StepOptions(…))` is the entry point; `dot` writes Graphviz text, `render` runs
Graphviz, `diff` prints the text diff of a match, `manifest` is the typed manifest.json.
"""
from .export import StepOptions, render_rewrites
from .render import DotMissing

__all__ = ["DotMissing", "StepOptions", "render_rewrites"]
