"""The resource budget of the command: a pickle from a pull request's CI is untrusted, and CI runners rarely limit
memory. The command caps its own data memory (RLIMIT_DATA; forked workers and Graphviz inherit it) at

    MEMORY_BASE + MEMORY_PER_INPUT_BYTE × (total size of its input files)

so that a crafted pickle ends in one clean line instead of taking the machine's memory. Real runs stay far below it
(a 1,000,000-event profile peaks near 0.9 GiB of its 2.2 GiB; the 20,000,000-event one near 7 of 25.6 GiB).
"""
from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

try:
    import resource
except ImportError:  # not on Windows: no cap there
    resource = None  # type: ignore[assignment]

MEMORY_BASE = 1 << 30  # the interpreter, numpy and a site's worth of rendering
MEMORY_PER_INPUT_BYTE = 16  # loading takes about 10× a profile's size, the timeline and writer a little more
GIB = 1 << 30


def memory_budget(inputs: Iterable[Path]) -> int:
    """Bytes of data memory allowed for these input files."""
    total = 0
    for p in inputs:
        with suppress(OSError):  # reported by whoever opens it
            total += p.stat().st_size
    return MEMORY_BASE + MEMORY_PER_INPUT_BYTE * total


def limit_memory(limit: int | None) -> int | None:
    """Cap this process's data memory at `limit` bytes (never above a cap already set); the cap in force, or None
    where the platform has none or `limit` is None."""
    if resource is None or limit is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    for cap in (soft, hard):
        if cap != resource.RLIM_INFINITY:
            limit = min(limit, cap)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return limit
