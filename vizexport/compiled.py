"""The compiled fast paths: C modules `pip install` builds where there is a compiler (setup.py). Each has a Python
reference that gives the same result, used where its module is not built or VIZEXPORT_PURE_PYTHON is set (the tests
and benchmarks compare the two)."""
from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON = "VIZEXPORT_PURE_PYTHON"


def compiled(name: str) -> ModuleType | None:
    """The compiled module `name`, or None: not built, or PURE_PYTHON set."""
    if os.environ.get(PURE_PYTHON):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
