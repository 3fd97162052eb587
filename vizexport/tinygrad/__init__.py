"""Readers: tinygrad pickles (as stand-ins) → version-neutral records. The only code that knows tinygrad."""
from __future__ import annotations

from pathlib import Path

from .. import pickles
from ..forks import SERIAL, Executor
from ..gcpause import gc_paused
from ..records import Profile, RewriteLog
from .profile import is_rewrites, load_profile, profile_from, stream_profile
from .rewrites import load_rewrites, rewrites_from


def load_any(path: str | Path, tinygrad_version: str | None = None, executor: Executor = SERIAL,
             host: bool = True) -> Profile | RewriteLog:
    """A profile or a rewrites trace, whichever the file holds (decided by content, not by name); a big profile is
    read in `executor`'s workers too. `host`: False leaves a profile's host ranges out (see load_profile)."""
    with gc_paused():
        prof = stream_profile(path, tinygrad_version, executor=executor, host=host)  # big ones: read while unpickled
        if prof is not None:
            return prof
        obj, classes = pickles.load(path)
        if is_rewrites(obj):
            return rewrites_from(obj, classes, str(path), tinygrad_version)
        return profile_from(obj, classes, str(path), tinygrad_version, host)


__all__ = ["load_any", "load_profile", "load_rewrites"]
