"""What a command shows on stderr while it works, on a terminal only (nothing in pipes, files or CI logs): a status
line from its first second (what it is doing, and for how long), then a bar per phase of the writing, each counting
whole units it names (events, contexts) or a percentage where the work has no countable unit. Light to import:
`python -m vizexport` shows its first status line while the command's modules load (seconds on a busy machine)."""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from .text import shown

if TYPE_CHECKING:
    from .output import Progress

TICK = 0.5  # seconds between two refreshes of the status line
WIDTH = 80  # columns of a terminal that says none
PERCENT = "%"  # the unit of a phase with no countable unit: the bar shows the share done
SCALED = 10_000  # a phase of more units is counted as 12.3k, 1.05M
# what the Run derives for a writer (writers.Writer.reads), as the status line says it
STAGES = {"timeline": "laying out the timeline", "summary": "counting events", "summaries": "counting events",
          "step_graphs": "replaying the rewrites", "listings": "disassembling programs",
          "report": "building the run report", "diff": "comparing the runs", "kernel_table": "ranking kernels",
          "launches": "decoding SQTT captures", "loaded": "reading"}
Phase = tuple[str, str]  # a bar's label and unit (" events", " contexts", PERCENT)


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (OSError, ValueError):  # closed, or not a file
        return False


def _columns(fd: int) -> int:
    try:
        return os.get_terminal_size(fd).columns or WIDTH
    except OSError:
        return WIDTH


class Status:
    """One line on a terminal's stderr, `what · 3 s`, refreshed every TICK s by a thread until `stop`; written with
    os.write (no lock a forked worker could inherit held) to the descriptor stderr had when it began (the unpickler
    swaps sys.stderr for a buffer while it loads). Nothing off a terminal, nor from a forked worker."""

    def __init__(self) -> None:
        self.what, self.since, self.pid = "", time.monotonic(), os.getpid()
        self.fd = sys.stderr.fileno() if on_terminal() else -1
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def say(self, what: str) -> None:
        """Show `what` (a name it quotes is made safe) from now on, its time counted from now: at once if it is the
        first, else at the next tick (a step done within a tick is never shown)."""
        if self.fd < 0:
            return
        self.what, self.since = shown(what), time.monotonic()
        if self.thread is None:
            self._draw()
            self.done = threading.Event()
            self.thread = threading.Thread(target=self._tick, daemon=True)
            self.thread.start()

    def _tick(self) -> None:
        while not self.done.wait(TICK):
            self._draw()

    def _draw(self, text: str | None = None) -> None:
        if os.getpid() != self.pid:  # a worker forked meanwhile: the line is its parent's
            return
        if text is None:
            text = f"{self.what} · {int(time.monotonic() - self.since)} s"
        with suppress(OSError):
            os.write(self.fd, f"\r{text[:_columns(self.fd) - 1]}\x1b[K".encode(errors="replace"))

    def stop(self) -> None:
        """End the line: erased (the bars or the command's own lines come next)."""
        if self.thread is not None:
            self.done.set()
            self.thread.join()
            self.thread = None
            self._draw("")


_starting: Status | None = None  # the status line shown while the command's modules load (starting)


def starting(what: str = "vizexport: starting") -> None:
    """The first status line on a terminal, before the command's modules load; the command ends it (started)."""
    global _starting
    _starting = Status()
    _starting.say(what)


def started() -> None:
    """End the line `starting` showed (before the command prints anything of its own)."""
    global _starting
    if _starting is not None:
        _starting.stop()
        _starting = None


@contextmanager
def status(what: str) -> Iterator[Status]:
    """A Status saying `what` while the block runs."""
    s = Status()
    s.say(what)
    try:
        yield s
    finally:
        s.stop()


class Bars:
    """The Progress callback of a writer whose work comes in phases: a tqdm bar per phase, made at its first report
    (when its total is known), the next phase's at the first report after the bar is complete."""

    def __init__(self, phases: Sequence[Phase]) -> None:
        self.phases, self.bar = list(phases), None
        self.at = 0

    def __call__(self, done: int, total: int) -> None:
        bar = self.bar
        if bar is not None and bar.n >= (bar.total or 0) and (done, total) != (bar.n, bar.total) \
                and self.at + 1 < len(self.phases):
            self.close()
            self.at += 1
            bar = None
        if bar is None:
            bar = self.bar = _bar(*self.phases[self.at], total)
        bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _bar(label: str, unit: str, total: int) -> Any:
    from tqdm import tqdm  # here: the first status line comes before it loads
    if unit == PERCENT:
        fmt = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"
    else:
        fmt = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{unit} [{elapsed}<{remaining}]"
    return tqdm(desc=label, unit=unit, total=total, unit_scale=total >= SCALED, leave=False, bar_format=fmt,
                file=sys.stderr)


@contextmanager
def progress_bars(phases: Sequence[Phase] | None) -> Iterator[Progress | None]:
    """The Progress callback to pass a writer with `phases` (None: it reports none): bars on a terminal only."""
    if not phases or not on_terminal():
        yield None
        return
    bars = Bars(phases)
    try:
        yield bars
    finally:
        bars.close()
