"""Forked helpers: a prepared helper runs its warm-up before its task, in the process forked for it; the site's
background workers yield to the foreground."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from vizexport import forks

WARMED: list[int] = []  # the pids whose warm-up ran (in a forked helper: its own copy of this list)

needs_fork = pytest.mark.skipif(not forks.can_fork(), reason="no fork on this platform")


@pytest.fixture
def ex():
    with forks.ForkExecutor() as executor:
        yield executor


def warm() -> None:
    WARMED.append(os.getpid())


def task(x: int) -> tuple[int, list[int], int]:
    return os.getpid(), list(WARMED), x * 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def niceness(_: int) -> int:
    return os.nice(0)


@needs_fork
def test_a_prepared_helper_runs_its_warm_up_then_the_task(ex):
    ex.prepare(warm)
    (helper_pid,) = ex.pids()
    pid, warmed, out = ex.in_background(task, 21, warm=warm)()
    assert (pid, warmed, out) == (helper_pid, [helper_pid], 42) and pid != os.getpid()
    assert not ex.pids() and WARMED == []  # used up (its worker has ended); the warm-up ran there, not here


@needs_fork
def test_an_unprepared_helper_warms_up_too_and_unused_ones_are_stopped(ex):
    pid, warmed, _ = ex.in_background(task, 1, warm=warm)()
    assert warmed == [pid] and pid != os.getpid()
    ex.prepare(warm)
    (helper,) = ex.pids()
    ex.discard_prepared()
    assert not ex.pids() and not _alive(helper)


@needs_fork
def test_started_map_workers_run_at_background_priority(ex):
    here = os.nice(0)
    got = list(ex.started_map(niceness, [1, 2, 3], jobs=2))
    assert got == [min(19, here + forks.BACKGROUND_NICE)] * 3
    assert os.nice(0) == here  # this process keeps its own
    assert sorted(ex.map(niceness, [1, 2], jobs=2)) == [here, here]  # waited-for work does not yield


def deaf(flag: str) -> None:
    """A task whose worker will not act on SIGTERM (as one whose SIGTERM came while it began to wait on a lock)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(flag, "w").close()
    time.sleep(60)


@needs_fork
def test_a_worker_deaf_to_sigterm_is_killed(monkeypatch, tmp_path, ex):
    monkeypatch.setattr(forks, "TERMINATE_GRACE", 0.5)
    flag = tmp_path / "started"
    pending = ex.in_background(deaf, str(flag))
    for _ in range(200):
        if flag.exists():
            break
        time.sleep(0.05)
    assert flag.exists()
    pending.stop()  # without the kill, this waits for the worker forever
    assert [p.exitcode for p in pending.turns.workers.processes] == [-signal.SIGKILL] and not ex.pids()


def sleepy(x: int) -> int:
    time.sleep(0.01)
    return x


@needs_fork
def test_a_stopped_map_leaves_no_worker(ex):
    it = ex.started_map(sleepy, range(50), jobs=2)
    assert next(it) in range(50)
    children = multiprocessing.active_children()
    it.close()
    assert children and all(p.exitcode is not None for p in children) and not ex.pids()


@needs_fork
def test_a_map_inside_a_forked_worker_runs_in_that_worker(ex):
    """Workers are daemons, which may not fork (the windows writer's workers each encode a whole trace)."""
    def inner_pids(_: int) -> tuple[int, set[int]]:
        """This worker's pid, and those of the processes that ran a map of its own."""
        return os.getpid(), set(ex.map(lambda _: os.getpid(), range(4), jobs=2))
    got = list(ex.map(inner_pids, range(2), jobs=2))  # (one worker may take both items)
    assert len(got) == 2 and all(pid != os.getpid() and inner == {pid} for pid, inner in got)
    assert forks.in_worker() is False


@needs_fork
def test_forked_runs_a_closure_in_a_child_that_inherits_its_data(ex):
    """The timeline builder prepares host spans this way: the data is inherited, only the result travels back."""
    data = list(range(100_000))
    wait = ex.forked(lambda: (os.getpid(), sum(data), forks.in_worker()))
    data.append(1)  # the child forked before this
    pid, total, in_worker = wait()
    assert pid != os.getpid() and total == 4_999_950_000 and in_worker is True


@needs_fork
def test_forked_passes_on_the_childs_error_and_runs_in_process_inside_a_worker(ex):
    def fail() -> None:
        raise KeyError("bad span")
    with pytest.raises(KeyError, match="bad span"):
        ex.forked(fail)()
    pids = list(ex.map(lambda _: ex.forked(os.getpid)() == os.getpid(), range(2), jobs=2))
    assert pids == [True, True]


@needs_fork
def test_tasks_in_turn_give_each_result_once_it_is_done(ex, tmp_path):
    """The timeline builder takes its launch links while the same process goes on to order the host spans: one
    forked process runs the tasks in turn, each result is taken as soon as its task is done, an error at its own
    task's take (which stops the process)."""
    gate = tmp_path / "gate"

    def later() -> int:
        while not gate.exists():
            time.sleep(0.01)
        return os.getpid()

    def fail() -> None:
        raise KeyError("bad buffer")
    first, second, third = ex.forked_in_turn([os.getpid, later, fail])
    pid = first()  # the second task waits for the gate meanwhile
    assert pid != os.getpid() and ex.pids() == [pid]
    gate.touch()
    assert second() == pid
    with pytest.raises(KeyError, match="bad buffer"):
        third()
    assert not ex.pids()
    here = forks.Executor().forked_in_turn([os.getpid, lambda: 7])
    assert [here[1](), here[0]()] == [7, os.getpid()]  # no executor: each runs when taken


def suicide(x: int) -> int:
    if x == 0:
        os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
    return x


@needs_fork
def test_a_worker_killed_mid_task_ends_the_map_with_an_error(ex):
    """Not a wait forever for the result that will not come (multiprocessing.Pool's behaviour)."""
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=f"ended without its result \\(exit code -{int(signal.SIGKILL)}\\)"):
        list(ex.map(suicide, range(2), jobs=2))
    assert not ex.pids() and time.monotonic() - started < 30


@pytest.mark.skipif(not forks.can_fork(), reason="no fork on this platform")
def test_a_group_stopped_while_its_workers_start_ends_those_started():
    """A signal can stop the parent between two workers' start(): stopping the group ends the started one and skips
    the other (its Process has no pid: terminate() or join() on it raised, and the command ended with that error
    instead of the signal's exit code)."""
    ctx = multiprocessing.get_context("fork")
    first, second = ctx.Process(target=time.sleep, args=(60,)), ctx.Process(target=time.sleep, args=(60,))
    first.start()
    group = forks.Workers([first, second], ctx.Queue(), 0)
    assert group.pids == [first.pid]
    t = time.monotonic()
    group.terminate()
    assert first.exitcode == -signal.SIGTERM and second.pid is None and time.monotonic() - t < 10
    group.join()


STOPPING = """
from vizexport import cli, forks
cli._on_stop(None)
cli._stopping = cli.Terminated  # a stop asked for, its exception dropped where it could not go on (an at-fork hook)
for _ in range(30):
    ex = forks.ForkExecutor()
    ex.prepare(lambda: None)
    ex.discard_prepared()  # SIGTERM at once, to a worker that may still be starting
print("done")
"""


@needs_fork
def test_a_worker_forked_while_the_command_stops_ends_quietly():
    """A worker forked just as the command is stopped took the command's stop handler, and its stop, for its own
    until it set its own: SIGTERM then printed a traceback from multiprocessing's bootstrap (CI, test_budget's
    site build stopped by SIGTERM). Stop signals are held across the fork until the worker has its handlers."""
    run = subprocess.run([sys.executable, "-c", STOPPING], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "done\n", "")


def overlap(x: int, live: object, others: int) -> tuple[int, int, int, bool]:
    """(item, this worker's pid, the most workers seen running at once so far, whether item 0 saw every other item
    done while it ran)."""
    with live.get_lock():
        live[0] += 1
        live[1] = max(live[1], live[0])
    waited_for_all = False
    if x == 0:  # item 0 runs until the others are done (at most 20 s): they go on beside it, a worker each
        end = time.monotonic() + 20
        while live[2] < others and time.monotonic() < end:
            time.sleep(0.01)
        waited_for_all = live[2] == others
    with live.get_lock():
        live[0] -= 1
        live[2] += x != 0
        return x, os.getpid(), live[1], waited_for_all


@needs_fork
def test_map_fresh_gives_each_item_a_worker_of_its_own_jobs_at_a_time(ex):
    live = multiprocessing.get_context("fork").Array("q", 3)  # workers running now, the most at once, items done
    got = list(ex.map_fresh(lambda x: overlap(x, live, 6), range(7), jobs=2))
    items, pids, _, waited = zip(*got, strict=True)
    assert sorted(items) == list(range(7)) and len(set(pids)) == 7 and os.getpid() not in pids
    assert live[1] == 2 and waited[items.index(0)]  # never more than 2 at once; the rest went on beside item 0
    assert not ex.pids()


@needs_fork
def test_map_fresh_ends_with_a_workers_error_or_death_and_leaves_no_worker(ex):
    def fail(x: int) -> int:
        if x == 3:
            raise KeyError("bad window")
        time.sleep(0.05)
        return x
    with pytest.raises(KeyError, match="bad window"):
        list(ex.map_fresh(fail, range(8), jobs=2))
    assert not ex.pids()
    with pytest.raises(RuntimeError, match="ended without its result"):
        list(ex.map_fresh(suicide, range(3), jobs=2))
    assert not ex.pids() and all(p.exitcode is not None for p in multiprocessing.active_children())


def test_map_fresh_runs_here_without_a_fork_or_inside_a_worker(ex):
    assert list(forks.SERIAL.map_fresh(lambda x: (x, os.getpid()), range(3))) == [(x, os.getpid()) for x in range(3)]
    if forks.can_fork():
        inner = list(ex.map(lambda _: {pid for _, pid in ex.map_fresh(lambda x: (x, os.getpid()), range(3), jobs=2)}
                            == {os.getpid()}, range(2), jobs=2))
        assert inner == [True, True]
