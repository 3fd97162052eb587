"""Writers: Timeline → Perfetto protobuf (.pftrace[.gz]) and Chrome JSON (.json[.gz])."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

from ..output import Progress, atomic_file
from ..timeline import Timeline
from . import chrome, proto

FORMATS = (".pftrace", ".pftrace.gz", ".json", ".json.gz")


def trace_format(path: Path) -> str | None:
    """The output format named by a file name, or None."""
    name = path.name.lower()
    return next((f for f in sorted(FORMATS, key=len, reverse=True) if name.endswith(f)), None)


def write_trace(tl: Timeline, path: Path, compress: bool = True, progress: Progress | None = None) -> int:
    """Write `tl` to `path` in the format its name asks for; returns the file size. Nothing is left on failure.
    `progress(done, total)` is told the events written so far."""
    fmt = trace_format(path)
    if fmt is None:
        raise ValueError(f"unknown trace format for {path} (use one of {', '.join(FORMATS)})")
    with atomic_file(path) as f:
        raw = gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6, mtime=0) if fmt.endswith(".gz") else f
        try:
            if fmt.startswith(".pftrace"):
                proto.write(tl, raw, compress=compress and not fmt.endswith(".gz"), progress=progress)
            else:
                text = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
                chrome.write(tl, text, progress)
                text.flush()
                text.detach()
        finally:
            if raw is not f:
                raw.close()
    return path.stat().st_size
