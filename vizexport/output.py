"""Output files and folders appear whole or not at all: written to a temporary beside the target, then renamed."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import InputError
from .limits import counted_file, sync_output

TMP_SUFFIX = ".part"  # temporary files end so; an interrupted run's leftovers can be found by it
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
Progress = Callable[[int, int], None]  # progress(done, total) of a long write, e.g. to drive a progress bar


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A file to write `path` through. Lean, as a run can write tens of thousands of small files: the temporary name
    is per process (one writer per path at a time), it is created with the usual permissions, and the folder is
    made only when missing."""
    tmp = f"{path.parent}/.{path.name}.{os.getpid()}{TMP_SUFFIX}"
    try:
        try:
            fd = os.open(tmp, _CREATE, 0o666)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, _CREATE, 0o666)
    except OSError as e:  # named by the file the user asked for, not the temporary one
        raise OSError(e.errno, f"cannot write: {e.strerror}", str(path)) from None
    try:
        with counted_file(fd) as f:  # its bytes count in the command's output budget (limits)
            yield f
        sync_output()
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# a folder holding one of these at its top is an earlier vizexport output (a site, an SVG export, trace windows)
OURS = ("index.html", "manifest.json", "index.json")


@contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """A folder to build `path` in: a temporary sibling that replaces `path` only once complete (an error leaves
    `path` as it was). An existing `path` must be empty or an earlier vizexport output: it is replaced whole."""
    if path.exists() and (not path.is_dir() or (any(path.iterdir()) and not any((path / f).exists() for f in OURS))):
        raise InputError(f"{path}: exists and is not an empty folder or an earlier vizexport output (choose a new "
                         "or empty folder)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)  # as a folder made with mkdir would be (mkdtemp makes it private)
    try:
        yield tmp
        if path.exists():  # swap: the old output goes only once the new one is in place
            old = path.with_name(f".{path.name}.{os.getpid()}.old")
            os.rename(path, old)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder: readers never see a partial file."""
    with atomic_file(path) as f:
        f.write(data)


def remove_leftovers(root: Path) -> None:
    """Delete temporary files an interrupted run left behind."""
    for p in root.rglob(f".*{TMP_SUFFIX}"):
        p.unlink(missing_ok=True)


def slug(name: str, width: int = 48) -> str:
    """A file-name-safe form of `name`: runs of other characters become '-', at most `width` characters."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return s[:width].rstrip("-.") or "unnamed"
