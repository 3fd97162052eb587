"""`diff`'s verdicts on real CPU runs (tinygrad 0.14.0, an MLP, made by tools/make_runs.py; per kernel its launches'
start times and durations as vizexport reads them, kept in tests/data/diff/mlp-cpu-launches.json.gz by
tools/verdict_rates.py --export-launches): the CPU device times a short kernel's launches now at 0.05–1 µs, now at
~10 µs, for a stretch of the run, and every kernel launched in that stretch moves by as much."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from vizexport.analysis import neighbours
from vizexport.analysis.diff import kernel_changes
from vizexport.analysis.launches import KernelId, Runs
from vizexport.analysis.neighbours import own_moves
from vizexport.analysis.stats import FASTER, SLOWER, beyond
from vizexport.timeline import Role

from .conftest import ROOT

DATA = ROOT / "tests" / "data" / "diff" / "mlp-cpu-launches.json.gz"
SHORT = ("CPU", "E_2")  # 11 launches a run, 0.5 µs; 10 µs on every launch in runs 2 and 15
LONG = ("CPU", "r_8_32_2_4_4_196_4")  # 6 launches a run, 0.5 ms


def launches(run: int, slowed: tuple[str, str] | None = None, factor: float = 1.0) -> list[Runs]:
    data = json.loads(gzip.decompress(DATA.read_bytes()))["runs"][str(run)]
    return [Runs(KernelId(k["device"], k["name"], bytes.fromhex(k["program"]) if k["program"] else None),
                 k["category"], Role.QUEUE, np.array(k["ts"], np.int64),
                 np.round(np.array(k["dur"], np.int64) * (factor if (k["device"], k["name"]) == slowed else 1.0))
                 .astype(np.int64)) for k in data]


def flagged(a: list[Runs], b: list[Runs]) -> dict:
    kernels, _ = kernel_changes(a, b)
    return {(k.device, k.name): k.verdict for k in kernels if k.verdict in (SLOWER, FASTER)}


@pytest.mark.parametrize("base, pr", [(1, 2), (4, 15)])
def test_a_short_kernel_in_the_cpus_slow_state_is_no_change(base: int, pr: int):
    """E_2 takes 20× as long on every launch (its launches consistent: the launch test alone is sure of it), as do
    the kernels launched beside it or elsewhere in the run by the same 10 µs: nothing is flagged (both pairs were,
    before the launches' neighbours and the jitter's margin counted)."""
    kernels, wide = kernel_changes(launches(base), launches(pr))
    (short,) = [k for k in kernels if (k.device, k.name) == SHORT]
    assert short.median_after_ns / short.median_before_ns > 15 and short.q < 0.01 and short.interval[0] > 3
    assert 8_000 < wide.jitter < 10_000
    assert flagged(launches(base), launches(pr)) == {}


@pytest.mark.parametrize("base, pr", [(1, 2), (2, 1)])
def test_a_long_kernel_twice_as_long_is_flagged_alone(base: int, pr: int):
    assert flagged(launches(base), launches(pr, LONG, 2.0)) == {LONG: SLOWER}


def test_six_launches_one_of_them_preempted_tell_nothing():
    """A limit: one of run 4's six launches of the long kernel was preempted (1.8 ms against 0.5 ms), and two runs'
    six paired launches, one pair off by 3×, are no evidence against the many kernels of a diff (history check
    finds it)."""
    assert max(launches(4)[[k.kernel.name for k in launches(4)].index(LONG[1])].dur) > 1_800_000
    assert flagged(launches(4), launches(15, LONG, 2.0)) == {}


def test_own_moves_set_aside_what_the_launches_beside_them_moved():
    """Kernels a and b launched in one stretch that moved by 10 µs as a whole: their own moves are 0; c, launched in
    another stretch beside d (which stayed), moved 10 µs by itself; d's own move is −10 µs, beside c."""
    t = np.arange(6) * 1_000
    moved, kept = np.full(6, 10_000.0), np.zeros(6)
    a, b = (t, moved), (t + 500, moved)
    c, d = (t + 1_000_000, moved), (t + 1_000_500, kept)
    assert own_moves([a, b, c, d]) == [0.0, 0.0, 10_000.0, -10_000.0]
    assert own_moves([a]) == [10_000.0]  # no other kernel: its move is its own


def test_a_move_must_pass_the_jitter_by_the_least_change():
    assert not beyond(9_636, 9_550) and not beyond(-9_900, 9_550) and beyond(10_100, 9_550)
    assert beyond(1, 0.0) and beyond(0, 0.0)


def test_neighbours_found_a_block_at_a_time_are_the_same(monkeypatch: pytest.MonkeyPatch):
    """The CPU run's paired launches (99, one device) by blocks of 7 rows: the same own moves as all at once."""
    base = {r.kernel: r for r in launches(1)}
    groups = [(y.ts, (y.dur - base[y.kernel].dur).astype(np.float64)) for y in launches(2)
              if y.kernel in base and base[y.kernel].count == y.count and y.kernel.device == "CPU"]
    assert sum(len(t) for t, _ in groups) == 99
    whole = own_moves(groups)
    monkeypatch.setattr(neighbours, "BLOCK", 7)
    assert own_moves(groups) == whole and any(abs(m) > 1_000 for m in whole)
