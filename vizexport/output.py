"""Output files appear whole or not at all: written to a temporary file beside the target, then renamed."""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

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
        fd = os.open(tmp, _CREATE, 0o666)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, _CREATE, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
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
