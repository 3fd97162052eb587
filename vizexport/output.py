"""Output files appear whole or not at all: written to a temporary file beside the target, then renamed."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".part"  # temporary files end so; an interrupted run's leftovers can be found by it
Progress = Callable[[int, int], None]  # progress(done, total) of a long write, e.g. to drive a progress bar


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a finished output gets the usual permissions
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
