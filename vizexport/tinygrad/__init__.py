"""Readers: tinygrad pickles (as stand-ins) → version-neutral records. The only code that knows tinygrad."""
from __future__ import annotations

from pathlib import Path

from .. import pickles
from ..forks import SERIAL, Executor
from ..gcpause import gc_paused
from ..records import Profile, RewriteLog
from .profile import is_rewrites, load_profile, profile_from, stream_profile
from .rewrites import load_rewrites, rewrites_from


def load_any(path: str | Path, tinygrad_version: str | None = None, executor: Executor = SERIAL
             ) -> Profile | RewriteLog:
    """A profile or a rewrites trace, whichever the file holds (decided by content, not by name); a big profile is
    read in `executor`'s workers too."""
    with gc_paused():
        prof = stream_profile(path, tinygrad_version, executor=executor)  # big profiles: read while unpickled
        if prof is not None:
            return prof
        obj, classes = pickles.load(path)
        read = rewrites_from if is_rewrites(obj) else profile_from
        return read(obj, classes, str(path), tinygrad_version)


__all__ = ["load_any", "load_profile", "load_rewrites"]
