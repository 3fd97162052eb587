"""Writers: Timeline → Perfetto protobuf (.pftrace[.gz]) and Chrome JSON (.json[.gz]).

Each writer says what it writes (its file suffix, binary or text), as pyinstrument's renderers do; `writer_for` picks
one by an output name, and any writer's output may be gzip'd by adding `.gz`. A writer may speak dialects of its
format (`flavors`): Chrome JSON also comes as the PyTorch profiler writes it (`kineto`). The command's registry of
every output (writers.py) lists these and calls `write_file` with the one it picked.
"""
from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO, Any, ClassVar

from ..forks import SERIAL, Executor
from ..output import Progress, atomic_file
from ..timeline import Timeline
from . import chrome, proto
from .kineto import KinetoLayout
from .wire import COMPACT, DELTA

GZ = ".gz"


class TraceWriter:
    """Writes a Timeline to an open file: `suffix` names the format, `binary` says what kind of file it needs."""

    suffix = ""
    binary = True
    description = ""
    flavors: tuple[str, ...] = ()  # dialects of the format it can write, besides its own
    writes_deltas = False  # whether it can write timestamps as deltas

    def __init__(self, compress: bool = True, flavor: str | None = None, executor: Executor = SERIAL,
                 delta_time: bool = False) -> None:
        self.compress = compress  # the format's own compression, where it has one (off inside a .gz)
        self.flavor = flavor
        self.executor = executor  # where a big trace's parts are encoded
        self.delta_time = delta_time  # timestamps as deltas, where the format has them (wire.Encoding.delta_time)

    def write(self, tl: Timeline, out: IO[Any], progress: Progress | None = None) -> None:
        raise NotImplementedError


class PerfettoWriter(TraceWriter):
    suffix, binary, description = ".pftrace", True, "Perfetto TrackEvent protobuf (compression: compressed_packets)"
    writes_deltas = True

    def write(self, tl: Timeline, out: IO[bytes], progress: Progress | None = None) -> None:
        proto.write(tl, out, compress=self.compress, progress=progress, executor=self.executor,
                    encoding=DELTA if self.delta_time else COMPACT)


class ChromeWriter(TraceWriter):
    suffix, binary, description = ".json", False, "Chrome trace JSON"
    layouts: ClassVar[dict[str, type[chrome.Layout]]] = {"kineto": KinetoLayout}  # flavour → its Layout
    flavors = tuple(layouts)

    def write(self, tl: Timeline, out: IO[str], progress: Progress | None = None) -> None:
        chrome.write(tl, out, progress, self.layouts[self.flavor](tl) if self.flavor else None)


WRITERS: tuple[type[TraceWriter], ...] = (PerfettoWriter, ChromeWriter)
FORMATS = tuple(w.suffix + gz for w in WRITERS for gz in ("", GZ))  # every name ending a trace may have
FLAVORS = tuple(f for w in WRITERS for f in w.flavors)


def writer_for(path: Path) -> tuple[type[TraceWriter], bool] | None:
    """The writer an output name asks for, and whether it is gzip'd; None for a name no writer takes."""
    name = path.name.lower()
    gz = name.endswith(GZ)
    stem = name[:-len(GZ)] if gz else name
    return next(((w, gz) for w in WRITERS if stem.endswith(w.suffix)), None)


def write_trace(tl: Timeline, path: Path | str, compress: bool = True, progress: Progress | None = None,
                flavor: str | None = None, executor: Executor = SERIAL, delta_time: bool = False) -> int:
    """Write `tl` to `path` in the format its name asks for; returns the file size. Nothing is left on failure.
    `compress`: compressed_packets in a plain .pftrace. `progress(done, total)` is told the events written so far.
    `flavor`: a dialect of that format (FLAVORS: "kineto" for .json and .json.gz). `executor`: where a big trace's
    parts are encoded (SERIAL: here). `delta_time`: a .pftrace's timestamps as deltas (wire.Encoding.delta_time)."""
    path = Path(path)
    found = writer_for(path)
    if found is None:
        raise ValueError(f"unknown trace format for {path} (use one of {', '.join(FORMATS)})")
    kind, gz = found
    if flavor is not None and flavor not in kind.flavors:
        takers = [w.suffix for w in WRITERS if flavor in w.flavors]
        raise ValueError(f"{path}: no {flavor!r} flavour of {kind.description} (it is for "
                         f"{', '.join(takers) or 'no format'})")
    if delta_time and not kind.writes_deltas:
        raise ValueError(f"{path}: {kind.description} has no delta timestamps (a .pftrace has)")
    return write_file(kind(compress and not gz, flavor, executor, delta_time), gz, tl, path, progress)


def write_file(writer: TraceWriter, gz: bool, tl: Timeline, path: Path, progress: Progress | None = None) -> int:
    """Write `tl` to `path` with `writer` (its output gzip'd if `gz`), for a caller that knows the format already;
    returns the file size. Nothing is left on failure."""
    with atomic_file(path) as f:
        raw = gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6, mtime=0) if gz else f
        try:
            if writer.binary:
                writer.write(tl, raw, progress)
            else:
                text = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
                writer.write(tl, text, progress)
                text.flush()
                text.detach()
        finally:
            if raw is not f:
                raw.close()
    return path.stat().st_size
