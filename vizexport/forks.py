"""Work spread over forked processes: each inherits the parent's memory (a profile's timeline, a rewrites trace), so
only the small results travel back. Used by the trace encoder, the SVG export and the site's step packs."""
from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_work: Callable[[Any], Any] | None = None  # the function forked workers run (inherited, never pickled)
_STARTED = object()  # what started_map's generator yields once its workers run


def default_jobs() -> int:
    """CPUs this process may run on (taskset and cgroup limits included where the OS says)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def forked_map(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None, ordered: bool = False
               ) -> Iterator[Any]:
    """fn(item) for each item, in `jobs` forked workers (default: the CPUs), results in item order or, unordered,
    as they finish. `fn` may be a closure. In this process when there is one job or one item, or no fork (not on
    Linux and macOS). Ctrl-C or an error stops the workers: they exit through SystemExit, so their own child
    processes (Graphviz) and temporary files are cleaned up."""
    return _map(fn, items, jobs, ordered, started=False)


def started_map(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None) -> Iterator[Any]:
    """forked_map (unordered) whose workers are at work when it returns: the caller does something else, then takes
    the results. Work done in this process (one job, no fork) waits until then."""
    it = _map(fn, items, jobs, False, started=True)
    next(it)  # up to the pool's start
    return it


def _map(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None, ordered: bool, started: bool
         ) -> Iterator[Any]:
    global _work
    items = list(items)
    jobs = max(1, default_jobs() if jobs is None else jobs)
    if jobs == 1 or len(items) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        if started:
            yield _STARTED
        yield from map(fn, items)
        return
    _work = fn  # set before the fork: the workers inherit it
    pool = multiprocessing.get_context("fork").Pool(min(jobs, len(items)), initializer=_worker_init)
    try:
        if started:
            yield _STARTED
        yield from (pool.imap if ordered else pool.imap_unordered)(_call, items)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        _work = None
        pool.join()


def in_background(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start fn(*args) in a forked process (fn a module-level function, args and result picklable); returns the
    function that waits for its result. In this process, at once, where there is no fork."""
    if "fork" not in multiprocessing.get_all_start_methods():
        result = fn(*args)
        return lambda: result
    pool = multiprocessing.get_context("fork").Pool(1, initializer=_worker_init)
    pending = pool.apply_async(fn, args)
    pool.close()

    def wait() -> Any:
        try:
            return pending.get()
        finally:
            pool.terminate()
            pool.join()
    return wait


def _call(item: Any) -> Any:
    assert _work is not None
    return _work(item)


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the pool
    signal.signal(signal.SIGTERM, _exit)


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(1)
