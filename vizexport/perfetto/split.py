"""A timeline too big for one browser tab, written as an overview (at the output's name) and windows beside it:

    run.pftrace                       the overview of the whole run (windows.overview)
    run.windows/index.json            the run's start, and per window: file, start and end (ns and s from the start)
    run.windows/w0000_0.000s-12.500s.pftrace, …   the windows (windows.Cutter), in the output's format

Everything appears at once when complete (written beside and moved in), or not at all.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..forks import forked_map, stopping_on_error
from ..output import Progress, atomic_folder, write_atomic
from ..timeline import Timeline
from ..windows import OVERVIEW_SLICES, Cutter, Window, overview, plan
from . import GZ, write_trace, writer_for
from .proto import PARALLEL_MIN

INDEX = "index.json"
OVERVIEW = "overview"  # its name in the folder while the parts are written


@dataclass
class Split:
    overview: Path
    folder: Path
    windows: list[Window]
    bytes: int


def windows_folder(path: Path) -> Path:
    """run.pftrace → run.windows (the format's suffixes dropped)."""
    found = writer_for(path)
    name = path.name
    if found is not None:
        kind, gz = found
        name = name[:len(name) - len(kind.suffix) - (len(GZ) if gz else 0)]
    return path.with_name(name + ".windows")


def suffix_of(path: Path) -> str:
    found = writer_for(path)
    assert found is not None
    return found[0].suffix + (GZ if found[1] else "")


def write_split(tl: Timeline, path: Path, window_events: int, compress: bool = True,
                overview_slices: int = OVERVIEW_SLICES, progress: Progress | None = None) -> Split:
    """Write `tl` as windows of about `window_events` events and an overview; returns what was written. Forked
    workers each cut and write whole windows (one of them the overview first): windows are independent files, so
    the cores stay busy, where encoding one window's tracks at a time left them idle between windows."""
    parts = plan(tl, window_events)
    t0 = parts[0].start if parts else 0
    folder, suffix = windows_folder(path), suffix_of(path)
    names = [f"{w.name}_{(w.start - t0) / 1e9:.3f}s-{(w.end - t0) / 1e9:.3f}s{suffix}" for w in parts]
    cut = Cutter(tl)  # before the fork: every worker inherits its index of the tracks
    total, done, size = tl.n_events(), 0, 0
    with atomic_folder(folder) as tmp, stopping_on_error():  # its workers stop before the folder goes
        def write_part(k: int) -> tuple[int, int]:
            """Part k (-1: the overview, written in the folder until all is done) → (k, bytes written)."""
            if k < 0:
                return k, write_trace(overview(tl, parts, overview_slices), tmp / (OVERVIEW + suffix), compress)
            return k, write_trace(cut(parts[k]), tmp / names[k], compress)

        jobs = None if total >= PARALLEL_MIN else 1
        for k, n in forked_map(write_part, range(-1, len(parts)), jobs):
            size += n
            done += parts[k].events if k >= 0 else 0
            if progress is not None:
                progress(done, total)
        entries = [{"file": name, "start_ns": w.start, "end_ns": w.end, "start_s": (w.start - t0) / 1e9,
                    "end_s": (w.end - t0) / 1e9, "events": w.events} for w, name in zip(parts, names, strict=True)]
        index = {"overview": path.name, "t0_ns": t0, "events": total, "windows": entries}
        write_atomic(tmp / INDEX, (json.dumps(index, indent=1) + "\n").encode())
        os.replace(tmp / (OVERVIEW + suffix), path)
    return Split(path, folder, parts, size)


def read_index(trace: Path) -> dict | None:
    """The windows index beside a trace written by write_split (None if it was written whole)."""
    index = windows_folder(trace) / INDEX
    return json.loads(index.read_text()) if index.is_file() else None
