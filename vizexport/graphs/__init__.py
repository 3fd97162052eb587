"""Rewrite traces → replayed step graphs → DOT → SVG step sequences with a manifest.

`render_rewrites(log, outdir, …)` is the entry point; `replay` rebuilds graphs with tinygrad's semantics, `dot`
writes Graphviz text, `render` runs Graphviz, `diff` prints the text diff of a match.
"""
from .export import render_rewrites
from .render import DotMissing
from .replay import Nodes, Replay, Replayer, ReplayError, Step, semantics

__all__ = ["DotMissing", "Nodes", "Replay", "ReplayError", "Replayer", "Step", "render_rewrites", "semantics"]
