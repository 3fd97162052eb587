"""The timeline builder places the biggest host track last (its order comes from a forked process) and moves it where
it goes: the timeline is the one built in order, byte for byte, whatever the host tracks look like."""
from __future__ import annotations

import random

import numpy as np
import pytest

from vizexport import load_profile
from vizexport.forks import ForkExecutor, Pending
from vizexport.records import Alloc, Exec, Key, Marker, Point, Profile, Release, Span, SpanTable
from vizexport.timeline import Role, Timeline
from vizexport.tinygrad import timeline as builder
from vizexport.tinygrad.timeline import build_timeline

from .conftest import ROOT

SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"


def _content(tl: Timeline) -> list:
    tab = tl.launches
    return [tl.strings, tl.stacks, tl.flow_kinds, tl.metadata,
            [(t.uuid, t.name, t.parent, t.rank, t.kind, t.role, t.ts, t.dur, t.names, t.args, t.stacks, t.flows_out,
              t.flows_in) for t in tl.tracks],
            tab.tracks, tab.first.tolist(), tab.programs,
            [getattr(tab, c).tolist() for c in ("ts", "dur", "name", "program", "category", "exec", "latency")]]


def _in_order(prof: Profile, monkeypatch: pytest.MonkeyPatch) -> Timeline:
    """The timeline as built before: every host track placed in turn (no host device set aside)."""
    with monkeypatch.context() as m:
        m.setattr(builder, "_biggest_host", lambda by_dev: None)
        return build_timeline(prof)


def _host_heavy() -> Profile:
    """USER holds more spans than TINY, some overlapping partially (USER needs lanes); Keys with callstacks and a
    host span named as a kernel; kernels with their exec events, buffers and markers."""
    rng = random.Random(5)
    tb = lambda n: (("model.py", n, f"f{n}", "x = y"), ("train.py", 1, "main", "step()"))  # noqa: E731
    host = [Key(f"user {n}", tb=tb(n) if n % 2 else None) for n in range(12)] + [Key("E_4", ret="meta")]
    tiny = [Key("schedule", tb=tb(99)), Key("lower")]
    spans = [Span("USER", rng.choice(host), st, st + rng.choice([0, 5, 50, 400])) for st in
             sorted(rng.randrange(0, 5000, 5) for _ in range(600))]
    spans += [Span("TINY", rng.choice(tiny), st, st + 20) for st in range(0, 5000, 97)]
    kernels = [Key(n) for n in ("E_4", "r_8", "E_4n1")]
    points = [Point("NULL", "alloc", 1, "b0", Alloc(64, "float", 16)), Point("NULL", "free", 4000, "b0", None)]
    for n, st in enumerate(range(10, 5000, 40)):
        k = rng.choice(kernels)
        points.append(Point("NULL", "exec", st, n, Exec(k.name, None, {}, ["b0"], (), ())))
        spans.append(Span("NULL", k, st + 3, st + 30))
    points += [Point("TINY", "marker", ts, None, Marker(f"m{ts % 3}", "red" if ts % 2 else None))
               for ts in range(0, 5000, 333)]
    rng.shuffle(spans)
    p = Profile("host-heavy", Release("0.14.0", "override", "test"), len(spans) + len(points))
    p.spans, p.points = SpanTable.of(spans), points
    return p


@pytest.mark.parametrize("which", ["sample", "host-heavy"])
def test_the_biggest_host_track_placed_last_gives_the_timeline_built_in_order(which: str,
                                                                               monkeypatch: pytest.MonkeyPatch):
    prof = load_profile(SAMPLE) if which == "sample" else _host_heavy()
    want = _in_order(prof, monkeypatch)
    here = build_timeline(prof)
    monkeypatch.setattr(builder, "FORK_SPANS", 0)
    with ForkExecutor() as ex:
        started = []
        in_turn = ex.forked_in_turn
        monkeypatch.setattr(ex, "forked_in_turn", lambda fns: started.extend(later := in_turn(fns)) or later)
        forked = build_timeline(prof, executor=ex)
    # launch links, memory, buffer lifetimes, the host track's Keys in order and its order: in turn, in a forked process
    assert len(started) == 5 and all(isinstance(later, Pending) for later in started)
    assert _content(here) == _content(want) and _content(forked) == _content(want)
    lanes = [t for t in want.tracks if t.role is Role.HOST and t.kind == "slice"]
    assert sum(map(len, lanes)) > 100 and any(t.flows_out for t in want.tracks)
    if which == "host-heavy":  # USER is set aside: it has lanes, and TINY's tracks (with Launches) come first
        assert [t.name for t in lanes].count("USER") > 1 and lanes[0].name == "TINY"
        assert sum(len(t.stacks) for t in lanes) > 50 and len(want.launches) == 125


def test_move_last_renumbers_as_if_added_there():
    """Tracks added last and moved to an index get the uuids, parents and ranks they would have had."""
    def add(tl: Timeline, order: list[tuple[str, str | None]]) -> None:
        by = {}
        for name, parent in order:
            by[name] = tl.add_track(name, by.get(parent), "group" if parent is None else "slice", Role.HOST)

    made = [("A", None), ("a1", "A"), ("B", None), ("b1", "B"), ("C", None), ("c1", "C")]
    want, got = Timeline(), Timeline()
    add(want, [*made[:2], ("a2", "A"), ("a3", "A"), *made[2:]])
    add(got, made)
    add_late = {t.name: t for t in got.tracks}
    for name in ("a2", "a3"):
        got.add_track(name, add_late["A"], "slice", Role.HOST)
    moved = got.move_last(2, 2)
    shape = lambda tl: [(t.uuid, t.name, t.parent, t.rank) for t in tl.tracks]  # noqa: E731
    assert shape(got) == shape(want) and moved == {3: 5, 4: 6, 5: 7, 6: 8, 7: 3, 8: 4}
    assert got.add_track("c2", got.tracks[-2], "slice", Role.HOST).rank == 2  # counts follow the new uuids


def test_first_use_is_the_order_sorting_gives():
    """_first_use finds the Keys in order of first use without sorting: as np.unique over the sorted rows finds
    them, with shared starts, shared ends, zero ends and never-ended rows."""
    rng = np.random.default_rng(3)
    for n, keys in ((1, 1), (50, 3), (5000, 40), (20000, 300)):
        spans = SpanTable()
        spans.keys = [Key(f"k{k}") for k in range(keys)]
        spans.key = rng.integers(0, keys, n).astype(np.int32)
        spans.st = rng.integers(0, 30, n).astype(np.int64) * 10
        spans.en = np.where(rng.random(n) < 0.2, np.where(rng.random(n) < 0.5, 0, spans.st),
                            spans.st + rng.integers(0, 4, n) * 10)
        idx = np.sort(rng.choice(n, max(1, n * 3 // 4), replace=False))  # a device's rows: some, ascending
        order = builder._sorted_spans(spans, idx)[0]
        used, at = np.unique(spans.key[idx[order]], return_index=True)
        assert builder._first_use(spans, idx).tolist() == used[np.argsort(at)].tolist()


@pytest.mark.parametrize("n_devices", [3, 40])
def test_by_device_scans_or_sorts_alike(n_devices: int):
    """Rows per device, ascending, devices by first appearance: the same from a pass per device (few devices) as
    from a stable sort (many)."""
    rng = np.random.default_rng(n_devices)
    t = SpanTable()
    t.devices = [f"D{d}" for d in range(n_devices + 2)]  # two never used
    t.device = rng.integers(0, n_devices, 10_000).astype(np.int32)
    t.st = np.zeros(len(t.device), np.int64)
    order = np.argsort(t.device, kind="stable")
    want = {}
    for c in sorted(set(t.device.tolist()), key=lambda c: int(np.flatnonzero(t.device == c)[0])):
        want[t.devices[c]] = order[t.device[order] == c]
    got = t.by_device()
    assert list(got) == list(want) and all(np.array_equal(got[d], want[d]) for d in want)
    assert len(got) == n_devices and all(np.all(np.diff(r) > 0) for r in got.values())
