"""The resource budget of the command: a pickle from a pull request's CI is untrusted, and CI runners rarely limit
memory or disk. The command states its bounds and holds them, each ending in one clean line instead of taking the
machine's memory or disk:

- memory: data memory (RLIMIT_DATA) at MEMORY_BASE + MEMORY_PER_INPUT_BYTE × (total size of its input files) for
  the whole command: each forked worker is lent a share of what the command has left (`lend`) and capped at what it
  inherited plus that share; fewer workers are forked where shares would be too small. Graphviz gets what its
  process has left (`child_memory`). Inherited pages a worker writes to are copied (copy on write) uncounted: the
  workers' parent freezes its objects for the fork so that a collection does not write to them. Real runs stay far
  below the cap (a 1,000,000-event profile peaks near 0.9 GiB of its 3.2 GiB; the 20,000,000-event one near 7 of
  26.6 GiB).
- output: every byte written through output.atomic_file, by this process and its forked workers, is counted; past
  max(OUTPUT_BASE, OUTPUT_PER_INPUT_BYTE × the inputs' size) (SVG_OUTPUT_PER_INPUT_BYTE × for the SVG export) the
  command stops with OutputLimitError, and nothing is left of the output.
- names: a name longer than NAME_CAP characters (a text value longer than TEXT_CAP) is cut with a visible marker
  (`capped`); tinygrad's names are tens of characters, a crafted pickle's may be a megabyte shared by every event.
"""
from __future__ import annotations

import io
import multiprocessing
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import InputError
from .text import unicode

try:
    import resource
except ImportError:  # not on Windows: no cap there
    resource = None  # type: ignore[assignment]

MEMORY_BASE = 2 << 30  # the interpreter, numpy, a site's rendering and a rewrites trace's replay: a training step's
# site (a 6 MB rewrites trace, 49,000 matches) needs ~1.5 GiB of data memory as RLIMIT_DATA counts it (0.45 resident)
MEMORY_PER_INPUT_BYTE = 16  # loading takes about 10× a profile's size, the timeline and writer a little more
GIB = 1 << 30
MIB = 1 << 20
OUTPUT_BASE = 64 * MIB  # any input may make this much output (a site's own files are 2 MB)
OUTPUT_PER_INPUT_BYTE = 64  # real outputs are well below: a site or a Chrome JSON trace a few times the pickle
SVG_OUTPUT_PER_INPUT_BYTE = 512  # the SVG export: the largest fixture's is 125 × its pickle (every step: ~300 ×)
NAME_CAP = 4096  # characters of a name kept in a trace (a track's, a slice's); tinygrad's are tens
TEXT_CAP = 16384  # characters of a text value kept in a trace (a traceback, metadata); tinygrad's are a few KB
MIN_WORKER_MEMORY = 128 * MIB  # a forked worker is lent at least this much, or fewer workers are forked
HELPER_MEMORY = 256 * MIB  # at most this much for a helper forked ahead of its task (the report plots: ~30 MB)

_memory_cap: int | None = None  # this process's data memory cap, where the command set one
_lent = 0  # bytes of it lent to forked workers that still run


# ---- memory ----

def memory_budget(inputs: Iterable[Path]) -> int:
    """Bytes of data memory allowed for these input files."""
    return MEMORY_BASE + MEMORY_PER_INPUT_BYTE * input_size(inputs)


def input_size(inputs: Iterable[Path]) -> int:
    total = 0
    for p in inputs:
        with suppress(OSError):  # reported by whoever opens it
            total += p.stat().st_size
    return total


def limit_memory(limit: int | None) -> int | None:
    """Cap this process's data memory at `limit` bytes (never above a cap already set); the cap in force, or None
    where the platform has none or `limit` is None. Workers forked from here on share it (`lend`)."""
    global _memory_cap, _lent
    if resource is None or limit is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    for cap in (soft, hard):
        if cap != resource.RLIM_INFINITY:
            limit = min(limit, cap)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    _memory_cap, _lent = limit, 0
    return limit


def data_size() -> int | None:
    """This process's data memory as RLIMIT_DATA counts it (VmData), or None where the OS does not say."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def lend(workers: int, most: int | None = None) -> tuple[int, int | None]:
    """(how many, each one's allowance) of `workers` about to be forked, so that the command's cap holds for all:
    what this process may still allocate is shared equally by it and the workers (at most `most` each), which
    inherit a copy of this process's memory and are capped at that plus their allowance; this process's own cap
    shrinks by what it lends until `give_back`. Fewer workers where a share would be below MIN_WORKER_MEMORY:
    (0, None) means none (do the work here). (workers, None) without a cap."""
    global _lent
    free = _free()
    if free is None:
        return workers, None
    workers = max(0, min(workers, free // MIN_WORKER_MEMORY - 1))
    if not workers:
        return 0, None
    each = min(free // (workers + 1), most or free)
    _lent += workers * each
    _set_soft(_memory_cap - _lent)
    return workers, each


def share(workers: int) -> int | None:
    """What each of `workers` forked now would be lent at most (None: no cap): workers forked one at a time that
    are lent no more than this each hold the command's cap as `lend(workers)` would."""
    free = _free()
    return None if free is None else max(MIN_WORKER_MEMORY, free // (workers + 1))


def _free() -> int | None:
    """What this process may still allocate under the command's cap, less what it lent (None: no cap)."""
    used = data_size() if _memory_cap is not None else None
    return None if _memory_cap is None or used is None else _memory_cap - _lent - used


def give_back(amount: int) -> None:
    """Workers that `lend` lent `amount` to in all have ended: this process may use it again."""
    global _lent
    if _memory_cap is None or not amount:
        return
    _lent = max(0, _lent - amount)
    _set_soft(_memory_cap - _lent)


def cap_worker(allowance: int | None) -> None:
    """In a forked worker: cap its data memory at what it inherited plus its `allowance`."""
    global _memory_cap, _lent
    used = data_size()
    if allowance is None or used is None or resource is None:
        return
    _memory_cap, _lent = used + allowance, 0
    _set_soft(_memory_cap)


def child_memory() -> int | None:
    """Data memory a program this process runs and waits for (Graphviz) may use: what this process may still
    allocate itself, as it allocates nothing while it waits. None without a cap."""
    used = data_size() if _memory_cap is not None else None
    if _memory_cap is None or used is None:
        return None
    return max(MIN_WORKER_MEMORY, _memory_cap - _lent - used)


def limit_process_memory(pid: int, limit: int | None) -> None:
    """Cap the data memory of the child process `pid` (just started) at `limit` bytes (None: leave it)."""
    if limit is None or resource is None or not hasattr(resource, "prlimit"):
        return
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    with suppress(OSError):  # it has ended already
        resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))


def _set_soft(limit: int) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


# ---- output ----

class OutputLimitError(InputError):
    """The output passed its bound."""


SYNC_BYTES = MIB  # bytes a process counts on its own before it adds them to the shared count
LOCK_WAIT = 5.0  # seconds to wait for the shared count's lock (a worker killed while holding it never lets go)


@dataclass
class _Output:
    """The command's output bound and count (forked workers inherit it, and add to the count)."""

    written: Any  # multiprocessing.Value: bytes written by every process, as far as they have added them
    limit: int
    why: str  # how the bound was set, for the error
    names: str  # the inputs, for the error
    input_bytes: int | None  # None: the user set the bound
    pending: int = 0  # this process's bytes not yet in `written`


_output: _Output | None = None


def limit_output(inputs: Iterable[Path] | None, limit: int | None = None) -> None:
    """Bound the bytes written through output.atomic_file from here on, by this process and the workers it forks:
    at `limit` where given, else at max(OUTPUT_BASE, OUTPUT_PER_INPUT_BYTE × the size of `inputs`); None for both:
    no bound."""
    global _output
    if inputs is None and limit is None:
        _output = None
        return
    inputs = list(inputs or ())
    size = None if limit is not None else input_size(inputs)
    why = ("--output-limit" if size is None else
           f"max({OUTPUT_BASE // MIB} MiB, {OUTPUT_PER_INPUT_BYTE} × the inputs' size)")
    _output = _Output(_shared_count(), limit or max(OUTPUT_BASE, OUTPUT_PER_INPUT_BYTE * (size or 0)), why,
                      ", ".join(map(str, inputs)), size)


class _LocalCount:
    """A count of this process's own, where the OS has no shared semaphores (no /dev/shm)."""

    def __init__(self) -> None:
        self.value, self.lock = 0, threading.Lock()

    def get_lock(self) -> Any:
        return self.lock


def _shared_count() -> Any:
    try:
        return multiprocessing.Value("q", 0)
    except (OSError, ImportError):
        return _LocalCount()


def widen_output(per_input_byte: int, what: str) -> None:
    """Allow `per_input_byte` × the inputs' size of output (for `what`), unless the user set the bound."""
    o = _output
    if o is not None and o.input_bytes is not None and per_input_byte * o.input_bytes > o.limit:
        o.limit, o.why = per_input_byte * o.input_bytes, f"{per_input_byte} × the inputs' size for {what}"


@contextmanager
def uncounted() -> Iterator[None]:
    """Writes that are not output (a cache in a temporary folder) are not counted."""
    global _output
    saved, _output = _output, None
    try:
        yield
    finally:
        _output = saved


def count_output(n: int) -> None:
    """Count `n` bytes written; OutputLimitError once the command's output passes its bound."""
    o = _output
    if o is None:
        return
    o.pending += n
    if o.pending >= SYNC_BYTES:
        sync_output()


def sync_output() -> None:
    """Add this process's counted bytes to the command's (at the end of each file, and every SYNC_BYTES)."""
    o = _output
    if o is None or not o.pending:
        return
    lock = o.written.get_lock()
    locked = lock.acquire(timeout=LOCK_WAIT)
    try:
        o.written.value += o.pending
        total = o.written.value
    finally:
        if locked:
            lock.release()
    o.pending = 0
    if total > o.limit:
        raise OutputLimitError(f"{o.names}: the output passed its limit of {o.limit / MIB:,.0f} MiB ({o.why}); "
                               "nothing was written (--output-limit GIB sets another)")


def forked_child() -> None:
    """In a forked worker: the bytes its parent had counted are the parent's to add."""
    if _output is not None:
        _output.pending = 0


class _Counted(io.BufferedWriter):
    """A file whose writes count in the output budget."""

    def write(self, b: Any) -> int:
        n = super().write(b)
        count_output(n)
        return n


def counted_file(fd: int) -> BinaryIO:
    """The open file descriptor `fd` as a buffered binary file (as os.fdopen(fd, "wb")) whose bytes are counted."""
    return _Counted(io.FileIO(fd, "wb"))


def output_written() -> int:
    """Bytes counted so far (by every process), or 0 without a bound."""
    return 0 if _output is None else _output.written.value + _output.pending


# ---- names ----

CAP_MARK = " more characters]"
CAP_MARK_ROOM = 40  # characters a marker takes at most


def capped(s: str, cap: int = NAME_CAP) -> str:
    """`s` as valid Unicode (text.unicode), or its first `cap` characters and a marker saying how much was left out
    (a text capped once is kept)."""
    s = unicode(s)
    if len(s) <= cap or (len(s) <= cap + CAP_MARK_ROOM and s[cap] == "…" and s.endswith(CAP_MARK)):
        return s
    return f"{s[:cap]}…[{len(s) - cap:,}{CAP_MARK}"
