"""vizexport: tinygrad VIZ/PROFILE pickles → Perfetto traces, Chrome JSON, Graphviz SVGs and a static site.

Reads pickles from tinygrad 0.10.0 … 0.14.0 and master without importing tinygrad or executing pickle content.
Readers (tinygrad/, sqtt/) make neutral records (records, timeline); writers (perfetto/, graphs/, site/, info,
analysis/) know only those. The functions below wire one to the other, as the `vizexport` command does.
"""
__version__ = "0.1.0"

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
from .timeline import Timeline

__all__ = ["InputError", "Profile", "Release", "RewriteLog", "StepGraphs", "Timeline", "build_site", "build_timeline",
           "decode_launches", "kernel_table", "load_any", "load_profile", "load_rewrites", "render_rewrites",
           "show_rewrites", "step_graphs", "summarize", "write_trace", "write_windows"]
