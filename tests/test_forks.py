"""Forked helpers: a prepared helper runs its warm-up before its task, in the process forked for it; the site's
background workers yield to the foreground."""
from __future__ import annotations

import os

import pytest

from vizexport import forks

WARMED: list[int] = []  # the pids whose warm-up ran (in a forked helper: its own copy of this list)

needs_fork = pytest.mark.skipif(not forks._can_fork(), reason="no fork on this platform")


def warm() -> None:
    WARMED.append(os.getpid())


def task(x: int) -> tuple[int, list[int], int]:
    return os.getpid(), list(WARMED), x * 2


def niceness(_: int) -> int:
    return os.nice(0)


@needs_fork
def test_a_prepared_helper_runs_its_warm_up_then_the_task():
    forks.prepare(warm)
    (pool,) = forks._prepared.values()
    (helper_pid,) = (p.pid for p in pool._pool)
    pid, warmed, out = forks.in_background(task, 21, warm=warm)()
    assert (pid, warmed, out) == (helper_pid, [helper_pid], 42) and pid != os.getpid()
    assert not forks._prepared and WARMED == []  # used up; the warm-up ran there, not here


@needs_fork
def test_an_unprepared_helper_warms_up_too_and_unused_ones_are_stopped():
    pid, warmed, _ = forks.in_background(task, 1, warm=warm)()
    assert warmed == [pid] and pid != os.getpid()
    forks.prepare(warm)
    (pool,) = forks._prepared.values()
    procs = list(pool._pool)
    forks.discard_prepared()
    assert not forks._prepared and all(not p.is_alive() for p in procs)


@needs_fork
def test_started_map_workers_run_at_background_priority():
    here = os.nice(0)
    got = list(forks.started_map(niceness, [1, 2, 3], jobs=2))
    assert got == [min(19, here + forks.BACKGROUND_NICE)] * 3
    assert os.nice(0) == here  # this process keeps its own
    assert sorted(forks.forked_map(niceness, [1, 2], jobs=2)) == [here, here]  # waited-for work does not yield
