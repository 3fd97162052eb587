"""vizexport: tinygrad VIZ/PROFILE pickles → Perfetto traces, Chrome JSON, Graphviz SVGs and a static site.

Reads pickles from tinygrad 0.10.0 … 0.14.0 and master without importing tinygrad or executing pickle content.
"""
from .pickles import InputError
from .records import Profile, Release, RewriteLog
from .tinygrad import load_any, load_profile, load_rewrites

__version__ = "0.1.0"
__all__ = ["InputError", "Profile", "Release", "RewriteLog", "load_any", "load_profile", "load_rewrites"]
