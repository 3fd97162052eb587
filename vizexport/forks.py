"""Work spread over forked processes: each inherits the parent's memory (a profile's timeline, a rewrites trace), so
only the small results travel back. Used by the trace encoder, the windows writer, the SVG export, the site's step
packs, the streaming reader's scan, the timeline builder's host spans (`forked`), and the report's plots (a helper
forked ahead of its task: `prepare`).

The command's memory cap is for all of its processes: each pool's workers are lent a share of what is left of it
(limits.lend), and fewer are forked, or none (the work is done in this process), where a share would be too small.
Workers die with the command, quietly: on its error or Ctrl-C it stops them (`stop_all` for any still running), and
a worker whose parent is gone (killed, or ended without stopping it) is sent SIGTERM by the kernel (Linux)."""
from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .limits import HELPER_MEMORY, cap_worker, forked_child, give_back, lend

_work: Callable[[Any], Any] | None = None  # the function forked workers run (inherited, never pickled)
_prepared: dict[Callable[[], Any], Any] = {}  # warm function → the helper `prepare` forked to run it
_in_worker = False  # set in forked workers: their own maps run in them (a pool's workers may not fork a pool)
_STARTED = object()  # what started_map's generator yields once its workers run
_live: dict[int, tuple[Any, int]] = {}  # id(pool) → (pool, bytes of the memory cap lent to its workers)
TERMINATE_GRACE = 2.0  # seconds a stopped worker has to exit before it is killed
BACKGROUND_NICE = 10  # started_map's workers: CFS gives a nice-10 process about a tenth of a normal one's share


def default_jobs() -> int:
    """CPUs this process may run on (taskset and cgroup limits included where the OS says)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def forked_map(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None, ordered: bool = False
               ) -> Iterator[Any]:
    """fn(item) for each item, in `jobs` forked workers (default: the CPUs), results in item order or, unordered,
    as they finish. `fn` may be a closure. In this process when there is one job or one item, in a forked worker,
    or no fork (not on Linux and macOS). Ctrl-C or an error stops the workers: they exit through SystemExit, so their
    own child processes (Graphviz) and temporary files are cleaned up."""
    return _map(fn, items, jobs, ordered, started=False)


def started_map(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None) -> Iterator[Any]:
    """forked_map (unordered) whose workers are at work when it returns: the caller does something else, then takes
    the results. Work done in this process (one job, no fork) waits until then. The workers run at a lower priority
    (BACKGROUND_NICE): what the caller and its other helpers do meanwhile is done first, and the workers, whose many
    items share out evenly, take up the cores to the end, rather than one late helper alone on one core."""
    it = _map(fn, items, jobs, False, started=True, nice=BACKGROUND_NICE)
    next(it)  # up to the pool's start
    return it


def _map(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None, ordered: bool, started: bool,
         nice: int = 0) -> Iterator[Any]:
    global _work
    items = list(items)
    jobs = max(1, default_jobs() if jobs is None else jobs)
    pool = None
    if jobs > 1 and len(items) > 1 and not _in_worker and _can_fork():
        _work = fn  # set before the fork: the workers inherit it
        pool = _pool(min(jobs, len(items)), nice)
        if pool is None:  # no worker fits in the memory cap
            _work = None
    if pool is None:
        if started:
            yield _STARTED
        yield from map(fn, items)
        return
    try:
        results = (pool.imap if ordered else pool.imap_unordered)(_call, items)  # the tasks go out now
        if started:
            yield _STARTED
        yield from results
        pool.close()
    except BaseException:
        _terminate(pool)
        raise
    finally:
        _work = None
        _join(pool)


def prepare(warm: Callable[[], Any]) -> None:
    """Fork now the helper process that a later in_background(…, warm=warm) will use, and have it run warm() (a slow
    import) while this process is still busy with other things: the task then starts in a ready process."""
    if warm not in _prepared and _can_fork() and (pool := _pool(1, warm=warm)) is not None:
        _prepared[warm] = pool


def discard_prepared() -> None:
    """Stop the helpers `prepare` forked that no task used."""
    while _prepared:
        _terminate(_prepared.popitem()[1])


def in_background(fn: Callable[..., Any], *args: Any, warm: Callable[[], Any] | None = None) -> Callable[[], Any]:
    """Start fn(*args) in a forked process (fn a module-level function, args and result picklable) that has run
    `warm()` first (the one `prepare(warm)` forked, if any); returns the function that waits for its result. In this
    process, at once, where there is no fork."""
    pool = _prepared.pop(warm, None) if warm is not None else None
    pool = pool or (_pool(1, warm=warm) if _can_fork() else None)
    if pool is None:  # no fork, or no room for a worker in the memory cap
        result = fn(*args)
        return lambda: result
    return Pending(pool, pool.apply_async(fn, args))


def forked(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Start fn() in a forked process, which inherits what fn needs (a closure: only its result is pickled); returns
    the function that waits for the result. Where there is no fork, or in a forked worker, fn runs when waited for."""
    global _work
    if _in_worker or not _can_fork():
        return fn
    _work = lambda _: fn()  # noqa: E731 (inherited by the worker forked next)
    try:
        pool = _pool(1)
    finally:
        _work = None
    if pool is None:  # no room for a worker in the memory cap
        return fn
    return Pending(pool, pool.apply_async(_call, (None,)))


class Pending:
    """A one-task pool's result to come: call it to wait for the result (the pool is closed: its worker exits once
    done), or `stop` the task."""

    def __init__(self, pool: Any, pending: Any) -> None:
        pool.close()
        self.pool, self.pending = pool, pending

    def __call__(self) -> Any:
        try:
            return self.pending.get()
        except BaseException:
            _terminate(self.pool)
            raise
        finally:
            _join(self.pool)

    def stop(self) -> None:
        _terminate(self.pool)
        _join(self.pool)


def _terminate(pool: Any) -> None:
    """pool.terminate(), and SIGKILL for a worker still there TERMINATE_GRACE seconds later. terminate() sends SIGTERM
    (the worker exits through SystemExit, cleaning up), then holds the task queue's lock and waits for every worker:
    one whose SIGTERM came just as it began to wait for that lock never runs its handler, and would be waited for
    forever."""
    workers = list(pool._pool)
    timer = threading.Timer(TERMINATE_GRACE, lambda: [p.kill() for p in workers])  # kill() skips reaped ones
    timer.start()
    try:
        pool.terminate()
    finally:
        timer.cancel()
        _release(pool)


def _join(pool: Any) -> None:
    pool.join()
    _release(pool)


def _release(pool: Any) -> None:
    """The pool's workers have ended: what they were lent of the memory cap is this process's again."""
    lent = _live.pop(id(pool), None)
    if lent is not None:
        give_back(lent[1])


def stop_all() -> None:
    """Stop every worker this process still has (the command ends: nothing may outlive it)."""
    _prepared.clear()
    for pool, _ in list(_live.values()):
        _terminate(pool)


@contextlib.contextmanager
def stopping_on_error() -> Iterator[None]:
    """Every worker stops at once when the block fails (an error, Ctrl-C), before what encloses it cleans up: none
    may go on writing into a folder that is being removed (a site's step packs are written meanwhile)."""
    try:
        yield
    except BaseException:
        stop_all()
        raise


def parallel() -> bool:
    """Whether `forked` work runs beside this process (forking works, this is no worker, there is a second CPU)."""
    return _can_fork() and not _in_worker and default_jobs() > 1


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _pool(n: int, nice: int = 0, warm: Callable[[], Any] | None = None) -> Any | None:
    """Up to n forked workers at `nice`, each running warm() first; as many as the memory cap has room for (None:
    none). The parent's objects are frozen for the fork: a collection in a worker then never walks them, which would
    copy every page they are on (2-3 % of a site's pack time)."""
    n, each = lend(n, HELPER_MEMORY if warm is not None else None)  # a helper's task is small: the plots
    if not n:
        return None
    gc.freeze()
    try:
        pool = multiprocessing.get_context("fork").Pool(n, initializer=_worker_init,
                                                        initargs=(nice, warm, each, os.getpid()))
    except BaseException:
        give_back(n * (each or 0))
        raise
    finally:
        gc.unfreeze()
    _live[id(pool)] = (pool, n * (each or 0))
    return pool


def _call(item: Any) -> Any:
    assert _work is not None
    return _work(item)


def _worker_init(nice: int = 0, warm: Callable[[], Any] | None = None, allowance: int | None = None,
                 parent: int | None = None) -> None:
    global _in_worker
    _in_worker = True
    _live.clear()  # the parent's pools, not this worker's to stop
    _prepared.clear()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the pool
    signal.signal(signal.SIGTERM, _exit)
    _die_with(parent)
    cap_worker(allowance)
    forked_child()
    if nice:
        os.nice(nice)
    if warm is not None:
        with contextlib.suppress(Exception):  # a failing initializer would be forked again and again: the task says it
            warm()


def _exit(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the exit's own clean-up is not cut short again
    warnings.simplefilter("ignore")  # what was cut short may warn (an import): the command has its last line
    raise SystemExit(1)  # quietly (no traceback), through `finally` blocks: Graphviz and temporary files go


PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent ends


def _die_with(parent: int | None) -> None:
    """Have the kernel send this worker SIGTERM when its parent ends (Linux), however it ends: a worker must not
    outlive the command, nor write to it after its last line."""
    if parent is None or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the request
        raise SystemExit(1)
