"""Heavy stages make millions of acyclic objects: the cyclic GC is paused around them."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of acyclic objects are made: its full collections, triggered by the
    allocation count alone, otherwise take most of the load time (4x slower for a 1M-event profile)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
