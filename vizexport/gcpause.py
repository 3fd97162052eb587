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


def keep_all() -> bool:
    """Leave every object that exists now out of the cyclic GC's collections (gc.freeze) until `release`: for those
    that live until a command ends (its inputs, what it derived from them). Called before a pause ends: the GC's first
    collection after it would look at every object made during it (0.3 s for a 1M-event profile's, freeing next to
    nothing). False, doing nothing, where objects are frozen already (by a program using vizexport: its own to keep)."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


def release(kept: bool) -> None:
    """The GC looks at the objects keep_all left out again (if it did)."""
    if kept:
        gc.unfreeze()
