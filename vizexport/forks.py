"""Where work runs: an Executor, made by the command (cli, api) and handed down to whatever has work to spread. The
plain `Executor` (SERIAL) does everything in this process; a `ForkExecutor` spreads it over forked processes: each
inherits the parent's memory (a profile's timeline, a rewrites trace, the function and its items), so only the small
results travel back. Used by the trace encoder, the windows writer, the SVG export, the site's step packs, the
streaming reader's scan and back half, the timeline builder's launch links, buffer lifetimes and host spans (one
process, in turn: `forked_in_turn`), and the report's plots (a helper forked ahead of its task: `prepare`). The
executor holds its workers; there is no state in this module.

The command's memory cap is for all of its processes: each group of workers is lent a share of what is left of it
(limits.lend), and fewer are forked, or none (the work is done in this process), where a share would be too small.
Workers die with the command, quietly: on its error or Ctrl-C it stops them (`stop_all` for any still running), and
a worker whose parent is gone (killed, or ended without stopping it) is sent SIGTERM by the kernel (Linux)."""
from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from multiprocessing.pool import MaybeEncodingError, RemoteTraceback
from typing import Any

from .limits import HELPER_MEMORY, cap_worker, forked_child, give_back, lend, share

TERMINATE_GRACE = 2.0  # seconds a stopped worker has to exit before it is killed
BACKGROUND_NICE = 10  # started_map's workers: CFS gives a nice-10 process about a tenth of a normal one's share
POLL = 0.5  # seconds between looks at whether the workers a result is awaited from are still there
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent ends
# Held (blocked) while workers are forked, until each has its own handlers: a worker forked as the command is being
# stopped would otherwise take the command's handler, and its stop, for its own, and print a traceback.
HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGALRM})

Job = Callable[[], "tuple[int, Callable[[], Any]] | None"]  # a worker's next task (its key, the call), None: done


def default_jobs() -> int:
    """CPUs this process may run on (taskset and cgroup limits included where the OS says)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def in_worker() -> bool:
    """Whether this process is a forked worker (a daemon: it may not fork workers of its own; its maps run in it)."""
    return multiprocessing.current_process().daemon


class Executor:
    """Runs work in this process: the interface every executor has, and what a caller is given that wants no
    processes (SERIAL; a library function called without one). It holds no state."""

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None, ordered: bool = False
            ) -> Iterator[Any]:
        """fn(item) for each item, in `jobs` workers (None: the CPUs), results in item order or, unordered, as
        they finish. `fn` may be a closure. An error or Ctrl-C stops the workers."""
        return _here(fn, items)

    def map_fresh(self, fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None) -> Iterator[Any]:
        """`map` (unordered) where each item has a worker of its own, `jobs` at a time: what a worker copied of this
        process's memory ends with its item, and no core waits for the others to start the next."""
        return _here(fn, items)

    def started_map(self, fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None
                    ) -> Iterator[Any]:
        """`map` (unordered) whose workers are at work when it returns: the caller does something else, then takes
        the results. Work done in this process waits until then."""
        return _here(fn, list(items))

    def forked(self, fn: Callable[[], Any]) -> Later:
        """Start fn() beside this process (a closure: only its result travels); returns what waits for the result
        when called (or stops the task). Here: fn runs when waited for."""
        return self.forked_in_turn([fn])[0]

    def forked_in_turn(self, fns: list[Callable[[], Any]]) -> list[Later]:
        """`forked` for tasks run one after another by one process beside this one: what waits for each one's result
        (taken as soon as that task is done, while the next ones run). Here: each runs when waited for."""
        return [Later(fn) for fn in fns]

    def prepare(self, warm: Callable[[], Any]) -> None:
        """Fork now the helper a later in_background(…, warm=warm) will use, running warm() (a slow import)."""

    def discard_prepared(self) -> None:
        """Stop the helpers `prepare` forked that no task used."""

    def in_background(self, fn: Callable[..., Any], *args: Any, warm: Callable[[], Any] | None = None
                      ) -> Callable[[], Any]:
        """Start fn(*args) in a helper process (fn module-level, args and result picklable) that has run warm()
        first; returns the function that waits for its result. Here: at once."""
        result = fn(*args)
        return lambda: result

    @property
    def parallel(self) -> bool:
        """Whether `forked` work runs beside this process."""
        return False

    def pids(self) -> list[int]:
        """The worker processes still running."""
        return []

    def stop_all(self) -> None:
        """Stop every worker still running (the command ends: nothing may outlive it)."""

    @contextlib.contextmanager
    def stopping_on_error(self) -> Iterator[None]:
        """Every worker stops at once when the block fails (an error, Ctrl-C), before what encloses it cleans up:
        none may go on writing into a folder that is being removed (a site's step packs are written meanwhile)."""
        try:
            yield
        except BaseException:
            self.stop_all()
            raise

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


SERIAL = Executor()


@dataclass(frozen=True)
class _Setup:
    """What a worker does first: its priority, its warm-up, its share of the memory cap, its parent's pid."""

    nice: int = 0
    warm: Callable[[], Any] | None = None
    allowance: int | None = None
    parent: int | None = None


class Workers:
    """A group of forked workers and the queue their results come back on (each result as pickled bytes, with the
    key of its task); `tasks` takes the one task of a helper forked before it was known."""

    def __init__(self, processes: list[Any], results: Any, lent: int, tasks: Any = None, shared: bool = False
                 ) -> None:
        self.processes, self.results, self.lent, self.tasks = processes, results, lent, tasks
        self.shared = shared  # the results queue is other groups' too: whoever made it closes it

    @property
    def started(self) -> list[Any]:
        """The workers started so far: a signal may stop the parent while it starts them (pid None: not started)."""
        return [p for p in self.processes if p.pid is not None]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.started]

    def get(self) -> tuple[int, Any]:
        """The next result (key, value) as it comes; a task's error is raised here."""
        while True:
            try:
                data = self.results.get(timeout=POLL)
                break
            except queue.Empty:
                if all(p.exitcode is not None for p in self.processes) and self.results.empty():
                    code = next((p.exitcode for p in self.processes if p.exitcode), 0)  # (a pool would wait forever)
                    raise RuntimeError(f"a worker process ended without its result (exit code {code})") from None
        key, ok, value = pickle.loads(data)
        if ok:
            return key, value
        error, remote = value
        error.__cause__ = RemoteTraceback(remote)
        raise error

    def terminate(self) -> None:
        """SIGTERM to each worker (it exits through SystemExit, cleaning up: Graphviz and temporary files go), and
        SIGKILL for one still there TERMINATE_GRACE seconds later."""
        started = self.started
        for p in started:
            with contextlib.suppress(OSError):
                p.terminate()
        end = time.monotonic() + TERMINATE_GRACE
        for p in started:
            p.join(max(0.0, end - time.monotonic()))
            if p.exitcode is None:
                with contextlib.suppress(OSError):
                    p.kill()
                p.join()

    def join(self) -> None:
        for p in self.started:
            p.join()


class Later:
    """fn() to be run when waited for (called), in this process; `stop` drops it."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()

    def stop(self) -> None:
        pass


class _InTurn:
    """The results of a one-worker group's tasks, held as they come until taken; the worker ends once all came."""

    def __init__(self, executor: ForkExecutor, workers: Workers, n: int) -> None:
        self.executor, self.workers, self.n, self.held = executor, workers, n, {}

    def take(self, k: int) -> Any:
        try:
            while k not in self.held:
                key, value = self.workers.get()
                self.held[key] = value
                self.n -= 1
        except BaseException:
            self.stop()
            raise
        if not self.n:
            self.executor._end(self.workers, stop=False)
        return self.held.pop(k)

    def stop(self) -> None:
        self.executor._end(self.workers, stop=True)


class Pending(Later):
    """Task k's result to come from a group's one worker (_InTurn): call it to wait for the result, or `stop` the
    group's tasks."""

    def __init__(self, turns: _InTurn, k: int) -> None:
        self.turns, self.k = turns, k

    def __call__(self) -> Any:
        return self.turns.take(self.k)

    def stop(self) -> None:
        self.turns.stop()


class ForkExecutor(Executor):
    """Runs work in forked workers where it can (fork exists, this is no worker, the memory cap has room, more than
    one job and item), else in this process. Holds the groups of workers it forked until they end."""

    def __init__(self) -> None:
        self._live: dict[int, Workers] = {}  # id(group) → the group, until its workers have ended
        self._prepared: dict[Callable[[], Any], Workers] = {}  # warm function → the helper `prepare` forked for it

    # --- maps -------------------------------------------------------------------------------------------------------
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None, ordered: bool = False
            ) -> Iterator[Any]:
        """Ctrl-C or an error stops the workers: they exit through SystemExit, so their own child processes
        (Graphviz) and temporary files are cleaned up."""
        return self._map(fn, list(items), jobs, ordered, nice=0, started=False)

    def started_map(self, fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None
                    ) -> Iterator[Any]:
        """The workers run at a lower priority (BACKGROUND_NICE): what the caller and its other helpers do meanwhile
        is done first, and the workers, whose many items share out evenly, take up the cores to the end, rather than
        one late helper alone on one core."""
        it = self._map(fn, list(items), jobs, False, nice=BACKGROUND_NICE, started=True)
        next(it)  # up to the workers' start
        return it

    def _map(self, fn: Callable[[Any], Any], items: list, jobs: int | None, ordered: bool, nice: int,
             started: bool) -> Iterator[Any]:
        jobs = max(1, default_jobs() if jobs is None else jobs)
        group = None
        if jobs > 1 and len(items) > 1 and self._may_fork():
            counter = multiprocessing.get_context("fork").Value("q", 0)  # the next item to take, shared

            def next_item() -> tuple[int, Callable[[], Any]] | None:
                with counter.get_lock():
                    i = counter.value
                    counter.value = i + 1
                return (i, lambda: fn(items[i])) if i < len(items) else None
            group = self._fork(min(jobs, len(items)), next_item, _Setup(nice))
        if group is None:
            if started:
                yield None
            yield from map(fn, items)
            return
        yield from self._results(group, len(items), ordered, started)

    def map_fresh(self, fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = None) -> Iterator[Any]:
        items = list(items)
        jobs = max(1, min(len(items), default_jobs() if jobs is None else jobs))
        if jobs == 1 or not self._may_fork():
            yield from map(fn, items)
            return
        results, running = multiprocessing.get_context("fork").Queue(), {}
        every = Workers([], results, 0)  # the workers forked so far, for `get`: each result comes on one queue
        each, at = share(jobs), 0  # each worker is lent what one of `jobs` forked at once would be
        try:
            while at < len(items) or running:
                while at < len(items) and len(running) < jobs:
                    group = self._fork(1, _in_turn([partial(fn, items[at])], at), _Setup(), (results, each))
                    if group is None:  # no room in the memory cap: here
                        yield fn(items[at])
                    else:
                        running[at] = group
                        every.processes += group.processes
                    at += 1
                if running:
                    key, value = every.get()
                    self._end(running.pop(key), stop=False)
                    yield value
        finally:
            for group in running.values():
                self._end(group, stop=True)
            results.close()

    def _results(self, group: Workers, n: int, ordered: bool, started: bool) -> Iterator[Any]:
        """The group's n results, in item order or as they come; the workers stop unless all came (an error,
        Ctrl-C, the caller closing the iterator)."""
        stop = True
        try:
            if started:
                yield None
            held, at = {}, 0  # results of later items that came first; the next item to yield
            for _ in range(n):
                key, value = group.get()
                if not ordered:
                    yield value
                    continue
                held[key] = value
                while at in held:
                    yield held.pop(at)
                    at += 1
            stop = False
        finally:
            self._end(group, stop)

    # --- one task beside this process ----------------------------------------------------------------------------
    def forked_in_turn(self, fns: list[Callable[[], Any]]) -> list[Later]:
        """Where there is no fork, or in a forked worker, or no room in the memory cap, each runs when waited for."""
        group = self._fork(1, _in_turn(fns), _Setup()) if self._may_fork() else None
        if group is None:
            return [Later(fn) for fn in fns]
        turns = _InTurn(self, group, len(fns))
        return [Pending(turns, k) for k in range(len(fns))]

    def prepare(self, warm: Callable[[], Any]) -> None:
        if warm not in self._prepared and self._may_fork():
            group = self._fork(1, None, _Setup(warm=warm))
            if group is not None:
                self._prepared[warm] = group

    def discard_prepared(self) -> None:
        while self._prepared:
            self._end(self._prepared.popitem()[1], stop=True)

    def in_background(self, fn: Callable[..., Any], *args: Any, warm: Callable[[], Any] | None = None
                      ) -> Callable[[], Any]:
        """Uses the helper `prepare(warm)` forked, if any. In this process, at once, where there is no fork or no
        room for a helper in the memory cap."""
        group = self._prepared.pop(warm, None) if warm is not None else None
        if group is None and self._may_fork():
            group = self._fork(1, None, _Setup(warm=warm))
        if group is None:
            return super().in_background(fn, *args)
        group.tasks.put(pickle.dumps((fn, args), pickle.HIGHEST_PROTOCOL))
        return Pending(_InTurn(self, group, 1), 0)

    # --- the workers ----------------------------------------------------------------------------------------------
    @property
    def parallel(self) -> bool:
        return self._may_fork() and default_jobs() > 1

    def pids(self) -> list[int]:
        return [pid for g in self._live.values() for pid in g.pids]

    def stop_all(self) -> None:
        self._prepared.clear()
        for group in list(self._live.values()):
            self._end(group, stop=True)

    def _may_fork(self) -> bool:
        return can_fork() and not in_worker()

    def _fork(self, n: int, jobs: Job | None, setup: _Setup, shared: tuple[Any, int | None] | None = None
              ) -> Workers | None:
        """Up to n workers taking tasks from `jobs` (None: one task sent later, through the group's `tasks`); as
        many as the memory cap has room for (None: none). `shared`: (the results queue to use, the most each may
        be lent). The parent's objects are frozen for the fork: a collection in a worker then never walks them,
        which would copy every page they are on (2-3 % of a site's pack time)."""
        most = shared[1] if shared is not None else HELPER_MEMORY if setup.warm is not None else None
        n, each = lend(n, most)  # a helper's task is small: the plots
        if not n:
            return None
        ctx = multiprocessing.get_context("fork")
        setup = _Setup(setup.nice, setup.warm, each, os.getpid())
        results = shared[0] if shared is not None else ctx.Queue()
        tasks = ctx.SimpleQueue() if jobs is None else None
        take = jobs if jobs is not None else _received(tasks)
        processes = [ctx.Process(target=self._serve, args=(take, results, setup), daemon=True) for _ in range(n)]
        group = Workers(processes, results, n * (each or 0), tasks, shared is not None)
        gc.freeze()
        try:
            self._live[id(group)] = group
            with _signals_held():
                for p in processes:
                    p.start()
        except BaseException:
            self._end(group, stop=True)
            raise
        finally:
            gc.unfreeze()
        return group

    def _end(self, group: Workers, stop: bool) -> None:
        """The group's workers end (stopped, or once done): what they were lent of the memory cap is this
        process's again."""
        if self._live.pop(id(group), None) is None:
            return
        try:
            if stop:
                group.terminate()
            else:
                group.join()
        finally:
            give_back(group.lent)
            if not group.shared:
                group.results.close()

    # --- in a worker ----------------------------------------------------------------------------------------------
    def _serve(self, jobs: Job, results: Any, setup: _Setup) -> None:
        """A worker's life: set up, then each task's result (or error) back, until there are no more."""
        self._become_worker(setup, results)
        while (job := jobs()) is not None:
            key, call = job
            results.put(_outcome(key, call))

    def _become_worker(self, setup: _Setup, results: Any) -> None:
        self._live.clear()  # the parent's workers, not this worker's to stop
        self._prepared.clear()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the workers
        signal.signal(signal.SIGTERM, lambda signum, frame: _exit(results))
        signal.signal(signal.SIGALRM, signal.SIG_IGN)  # the parent's retries of its stop (cli) are not a worker's
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
        _die_with(setup.parent)
        cap_worker(setup.allowance)
        forked_child()
        if setup.nice:
            os.nice(setup.nice)
        if setup.warm is not None:
            with contextlib.suppress(Exception):  # the task says it, if its warm-up failed
                setup.warm()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """HELD_SIGNALS blocked in this thread meanwhile (a forked worker inherits the mask): one that arrives is
    handled on leaving."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _here(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
    """fn(item) for each item, in this process, as the caller takes them (a generator: it can be closed)."""
    yield from map(fn, items)


def _in_turn(fns: list[Callable[[], Any]], first: int = 0) -> Job:
    """The tasks of a worker forked for fns, in turn, keyed from `first` (inherited: they are never pickled)."""
    todo = list(enumerate(fns, first))[::-1]
    return lambda: todo.pop() if todo else None


def _received(tasks: Any) -> Job:
    """The task of a helper: (fn, args) sent once, pickled, after it was forked."""
    todo = [tasks]

    def take() -> tuple[int, Callable[[], Any]] | None:
        if not todo:
            return None
        fn, args = pickle.loads(todo.pop().get())
        return 0, lambda: fn(*args)
    return take


def _outcome(key: int, call: Callable[[], Any]) -> bytes:
    """(key, True, result) or (key, False, (error, its traceback)), pickled here: what cannot be is said so."""
    try:
        out: tuple = (key, True, call())
    except Exception as e:
        out = (key, False, (e, traceback.format_exc()))
    try:
        return pickle.dumps(out, pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        error = MaybeEncodingError(e, out[2])
        return pickle.dumps((key, False, (error, traceback.format_exc())), pickle.HIGHEST_PROTOCOL)


def _exit(results: Any) -> None:
    """SIGTERM in a worker: exit quietly (no traceback), through `finally` blocks (Graphviz and temporary files go),
    without waiting to hand on results no one will read."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the exit's own clean-up is not cut short again
    warnings.simplefilter("ignore")  # what was cut short may warn (an import): the command has its last line
    results.cancel_join_thread()
    sys.unraisablehook = _end_now
    raise SystemExit(1)


def _end_now(unraisable: Any) -> None:
    """Where the SIGTERM's SystemExit cannot unwind (it arrived in a callback: an import's module lock, a weakref),
    the worker ends there, quietly, instead of printing it and running on."""
    if isinstance(unraisable.exc_value, SystemExit):
        os._exit(1)
    sys.__unraisablehook__(unraisable)


def _die_with(parent: int | None) -> None:
    """Have the kernel send this worker SIGTERM when its parent ends (Linux), however it ends: a worker must not
    outlive the command, nor write to it after its last line."""
    if parent is None or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the request
        raise SystemExit(1)
