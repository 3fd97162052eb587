"""A timeline too big for one browser tab, written as an overview (at the output's name) and windows beside it:

    run.pftrace                       the overview of the whole run (windows.overview)
    run.windows/index.json            the run's start, and per window: file, start and end (ns and s from the start)
    run.windows/w0000_0.000s-12.500s.pftrace, …   the windows (windows.Cutter), in the output's format

Everything appears at once when complete (written beside and moved in), or not at all.
"""
from __future__ import annotations

import json
import math
import os
import reprlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..errors import InputError
from ..forks import SERIAL, Executor, default_jobs
from ..output import Progress, atomic_folder, write_atomic
from ..records import INT64
from ..text import shown
from ..timeline import Timeline
from ..windows import OVERVIEW_SLICES, WINDOW_EVENTS, Cutter, Window, overview, plan
from . import GZ, write_trace, writer_for
from .proto import PARALLEL_MIN

INDEX = "index.json"
INDEX_VALUE_CHARS = 80  # of a value an error quotes from a malformed index
OVERVIEW = "overview"  # its name in the folder while the parts are written


@dataclass(frozen=True)
class SplitOptions:
    """Windows of about `window_events` events; `compress`: compressed_packets in .pftrace files; the overview keeps
    about `overview_slices` slices whole; `delta_time`: timestamps as deltas in .pftrace files."""

    window_events: int = WINDOW_EVENTS
    compress: bool = True
    overview_slices: int = OVERVIEW_SLICES
    delta_time: bool = False


@dataclass
class Split:
    overview: Path
    folder: Path
    windows: list[Window]
    bytes: int


def _value(x: object) -> str:
    """A JSON value of the index as a short text (a hand-edited index may hold anything)."""
    return shown(reprlib.repr(x), INDEX_VALUE_CHARS)


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


def write_split(tl: Timeline, path: Path, options: SplitOptions = SplitOptions(), progress: Progress | None = None,
                executor: Executor = SERIAL) -> Split:
    """Write `tl` as windows and an overview (`options`); returns what was written. The executor's forked
    workers each cut and write whole windows (one of them the overview first): windows are independent files, so
    the cores stay busy, where encoding one window's tracks at a time left them idle between windows."""
    overview_slices = options.overview_slices
    written = partial(write_trace, compress=options.compress, executor=executor, delta_time=options.delta_time)
    parts = plan(tl, options.window_events)
    t0 = parts[0].start if parts else 0
    folder, suffix = windows_folder(path), suffix_of(path)
    names = [f"{w.name}_{(w.start - t0) / 1e9:.3f}s-{(w.end - t0) / 1e9:.3f}s{suffix}" for w in parts]
    cut = Cutter(tl)  # before the fork: every worker inherits its index of the tracks
    total, done, size = tl.n_events(), 0, 0
    with atomic_folder(folder) as tmp, executor.stopping_on_error():  # its workers stop before the folder goes
        def write_part(k: int) -> tuple[int, int]:
            """Part k (-1: the overview, written in the folder until all is done) → (k, bytes written)."""
            if k < 0:
                return k, written(overview(tl, parts, overview_slices), tmp / (OVERVIEW + suffix))
            return k, written(cut(parts[k]), tmp / names[k])

        # a worker per part: the parent's pages it copied (the reference counts of every object its window read) end
        # with it; a worker that wrote every other window came to copy most of the timeline (20M events: the process
        # tree's memory peaked at 5.4 GiB, against 4.7)
        jobs = default_jobs() if total >= PARALLEL_MIN else 1
        for k, n in executor.map_fresh(write_part, range(-1, len(parts)), jobs):
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
    """The windows index beside a trace written by write_split (None if it was written whole). It is checked as
    input (a trace's folder may come from someone else): InputError naming it unless every window names a plain
    file in the windows folder and gives integer times."""
    index = windows_folder(trace) / INDEX
    if not index.is_file():
        return None
    try:
        data = json.loads(index.read_bytes())
    except (ValueError, RecursionError) as e:  # bad JSON or UTF-8, or nested past the parser's stack
        raise InputError(f"{index}: not a windows index (not JSON: {e})") from None  # our words, not its
    _check_index(index, data)
    return data


def _check_index(index: Path, data: object) -> None:
    if type(data) is not dict or type(data.get("windows")) is not list:
        raise InputError(f"{index}: not a windows index (no list of windows)")
    if not _whole(data.get("t0_ns")):
        raise InputError(f"{index}: t0_ns is {_value(data.get('t0_ns'))}, not a time in ns")
    for k, w in enumerate(data["windows"]):
        if type(w) is not dict:
            raise InputError(f"{index}: window {k} is {_value(w)}, not a window")
        name = w.get("file")
        if not plain_name(name):
            raise InputError(f"{index}: window {k} names {_value(name)}, not a file in {index.parent.name}{os.sep} "
                             "(refused)")
        bad = next((f for f in ("start_ns", "end_ns", "events") if not _whole(w.get(f))), None) or \
            next((f for f in ("start_s", "end_s") if not _number(w.get(f))), None)
        if bad is not None:
            raise InputError(f"{index}: window {k}'s {bad} is {_value(w.get(bad))}, not a number of its kind")


def plain_name(name: object) -> bool:
    """A file name with no folder part (nothing that could lead out of the folder that holds it)."""
    return type(name) is str and name not in ("", ".", "..") and not {"/", "\\", "\0"} & set(name)


def _whole(x: object) -> bool:
    return type(x) is int and -INT64 <= x < INT64



def _number(x: object) -> bool:
    return type(x) in (int, float) and math.isfinite(x)
