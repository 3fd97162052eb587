"""vizexport: tinygrad VIZ/PROFILE pickles → Perfetto traces, Chrome JSON, Graphviz SVGs and a static site.

Reads pickles from tinygrad 0.10.0 … 0.14.0 and master without importing tinygrad or executing pickle content.
Readers (tinygrad/, sqtt/) make neutral records (records, timeline); writers (perfetto/, graphs/, site/, info,
analysis/) know only those. The functions below wire one to the other, as the `vizexport` command does; a `Run` of
a profile (and its rewrites trace) derives each thing once (run.py).

The face is lazy (PEP 562): each public name is imported from its module on first use, so `import vizexport` or
`import vizexport.timeline` loads no reader, writer or heavy dependency.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__ as __version__  # a leaf: importing it loads nothing else
from .lazy import attributes

if TYPE_CHECKING:  # the same names, seen by type checkers and IDEs
    from .api import (
        build_site,
        build_timeline,
        decode_launches,
        kernel_table,
        load_any,
        load_profile,
        load_rewrites,
        render_rewrites,
        show_rewrites,
        step_graphs,
        summarize,
        write_trace,
        write_windows,
    )
    from .errors import InputError
    from .records import Profile, Release, RewriteLog, StepGraphs
    from .run import Run
    from .timeline import Timeline

_HOMES = {  # module (relative to the package) → the public names it defines
    ".api": ("build_site", "build_timeline", "decode_launches", "kernel_table", "load_any", "load_profile",
             "load_rewrites", "render_rewrites", "show_rewrites", "step_graphs", "summarize", "write_trace",
             "write_windows"),
    ".errors": ("InputError",),
    ".records": ("Profile", "Release", "RewriteLog", "StepGraphs"),
    ".run": ("Run",),
    ".timeline": ("Timeline",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = ["InputError", "Profile", "Release", "RewriteLog", "Run", "StepGraphs", "Timeline", "build_site",
           "build_timeline", "decode_launches", "kernel_table", "load_any", "load_profile", "load_rewrites",
           "render_rewrites", "show_rewrites", "step_graphs", "summarize", "write_trace", "write_windows"]


__getattr__ = attributes(__name__, globals(), _HOME)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
