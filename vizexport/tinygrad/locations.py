"""Where tinygrad writes its pickles, so that a command given no file reads the latest ones, as tinygrad's own viewer
(viz/serve.py, viz/cli.py: `--profile-path`, `--rewrites-path`) does by default.

Every release writes into `tempfile.gettempdir()` (helpers.temp), overwriting the same name each run:
- 0.10.0: `rewrites.pkl` (VIZ=1; its profile was Chrome JSON, `tinygrad_profile.json`, which is no input here);
- 0.10.1: `rewrites.pkl.<user>`, `profile.pkl.<user>` with the user from `$USERNAME`, else `os.getlogin()`;
- 0.10.2 to 0.14.0 and master: `rewrites.pkl.<user>`, `profile.pkl.<user>` with `getpass.getuser()`.
VIZ=1 (or VIZ=-1, which does not start the viewer) writes both, PROFILE=1 the profile alone. The latest of a kind is
the newest file of these names. The temp folder is shared with other users: only a regular file the user owns is
taken (not a link, nor a name someone else made first).
"""
from __future__ import annotations

import getpass
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROFILE, REWRITES = "profile.pkl", "rewrites.pkl"
KINDS = (PROFILE, REWRITES)
WRITES = {PROFILE: "PROFILE=1 or VIZ=1", REWRITES: "VIZ=1"}  # what makes tinygrad write each kind


@dataclass(frozen=True)
class Found:
    """A pickle tinygrad wrote: its path and when it was last written (seconds since the epoch)."""

    path: Path
    mtime: float


def temp_folder() -> Path:
    """tinygrad's folder for them: the temp folder as Python finds it ($TMPDIR, $TEMP, $TMP, then /tmp …)."""
    return Path(tempfile.gettempdir())


def user_names() -> list[str]:
    """The user suffixes releases append: getpass.getuser() (0.10.2+), then $USERNAME or os.getlogin() (0.10.1)."""
    names = []
    for get in (getpass.getuser, lambda: os.environ.get("USERNAME") or os.getlogin()):
        try:
            name = get()
        except (OSError, KeyError):  # no login name (no terminal) or no passwd entry (a container's user)
            continue
        if name and os.sep not in name and name not in names:
            names.append(name)
    return names


def names(kind: str) -> list[str]:
    """The file names a release may write `kind` under, newest releases' first."""
    return [f"{kind}.{user}" for user in user_names()] + ([kind] if kind == REWRITES else [])


def _mine(path: Path) -> float | None:
    """The file's modification time, if it is a regular file (not a link) the user owns; None otherwise."""
    try:
        st = path.lstat()
    except OSError:
        return None
    owner = getattr(os, "getuid", None)
    if not stat.S_ISREG(st.st_mode) or (owner is not None and st.st_uid != owner()):
        return None
    return st.st_mtime


def latest(kind: str, folder: Path | None = None) -> Found | None:
    """The newest pickle of `kind` (PROFILE or REWRITES) tinygrad left in `folder` (default: its temp folder)."""
    folder = temp_folder() if folder is None else folder
    found = [Found(folder / n, t) for n in names(kind) if (t := _mine(folder / n)) is not None]
    return max(found, key=lambda f: f.mtime, default=None)
