"""The trace encoder's compiled loops (vizexport/perfetto/_wire.c) write exactly what their references write: the packet
framing what numpy's (wire.packets_numpy) does, and the packet tails with their debug annotations what proto's
Python loops do, with the same interning tables left behind. On every real profile (the whole trace, byte for byte)
and on thousands of seeded random columns and args (nested dicts, lists and tuples, their subclasses, ints past 64
bits, negative and boolean ones, NaN, long and short strings, keys that are not strings, flows).
VIZEXPORT_PURE_PYTHON=1, or no compiled module, writes with the references."""
from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from array import array

import numpy as np
import pytest

from vizexport.api import build_timeline, load_profile
from vizexport.perfetto import proto, wire, write_trace
from vizexport.timeline import Role, Track

from .conftest import ROOT, fixture_files
from .test_launches import _pickle

needs_c = pytest.mark.skipif(wire.fast is None, reason="the compiled encoder is not built (no compiler at install)")
CASES, SEED = 2000, 36
SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"
CORPUS = sorted((ROOT / "tests" / "data" / "corpus").glob("*/profile.pkl.gz"))


def _both(monkeypatch: pytest.MonkeyPatch, make):
    """make() with the compiled encoder, then with the references."""
    fast = make()
    monkeypatch.setattr(wire, "fast", None)
    slow = make()
    monkeypatch.undo()
    return fast, slow


@needs_c
@pytest.mark.parametrize("path", [SAMPLE, *CORPUS, *fixture_files("tinygrad/*/profile*.pkl"),
                                  *fixture_files("sqtt/*/profile_*_run_0.pkl")],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_profiles_trace_is_the_same_bytes(monkeypatch, tmp_path, path):
    tl = build_timeline(load_profile(_pickle(path, tmp_path)))

    def write() -> list[bytes]:  # absolute and delta timestamps
        out, traces = tmp_path / "t.pftrace", []
        for delta in (False, True):
            write_trace(tl, out, False, delta_time=delta)
            traces.append(out.read_bytes())
        return traces

    fast, slow = _both(monkeypatch, write)
    assert fast == slow and len(fast[1]) > 8 * tl.n_events() > 0 and fast[0] != fast[1]


# ---- packets ----

def _values(rng: random.Random, n: int) -> np.ndarray:
    edge = [0, 1, 127, 128, 16383, 16384, 2**21, 2**35, 2**56 - 1, 2**56, 2**63 - 1, -1, -128, -(2**63)]
    return np.array([rng.choice(edge) if rng.random() < 0.3 else rng.randrange(0, 2**rng.choice((7, 14, 28, 42, 63)))
                     for _ in range(n)], np.int64)


@needs_c
def test_packets_frame_as_numpy_does():
    rng = random.Random(SEED)
    for _ in range(CASES):
        n = rng.randrange(0, 40)
        fields = [(bytes([rng.randrange(1, 128)]) * rng.randrange(1, 3), _values(rng, n))
                  for _ in range(rng.randrange(0, 4))]
        tails = [rng.randbytes(rng.choice((0, 1, 5, 127, 128, 300))) for _ in range(rng.randrange(1, 6))]
        ids = np.array([rng.randrange(len(tails)) for _ in range(n)], np.int64)
        data, ends = wire.packets(fields, ids, tails)
        ref, ref_ends = wire.packets_numpy(fields, ids, tails)
        assert data == ref and ends.tolist() == ref_ends.tolist()


@needs_c
def test_packets_refuse_what_numpy_would_not_index():
    with pytest.raises(IndexError):
        wire.packets([], np.array([0, 2], np.int64), [b"a", b"b"])
    with pytest.raises(ValueError):
        wire.fast.packets(wire.PACKET_TAG[0], [(b"\x08", np.zeros(3, np.int64))], np.zeros(2, np.int64), [b""],
                          np.zeros(2, np.int64))


# ---- tails and debug annotations ----

class Mapping(dict):
    pass


class Items(list):
    pass


LONG = "x" * 40


def _scalar(rng: random.Random):
    return rng.choice([0, 1, -1, 7, 300, 2**40, 2**63 - 1, 2**63, 2**64 + 5, -(2**63), -(2**70), True, False, 0.5,
                       -0.0, math.nan, math.inf, 1e300, "", "ab", "abc", "float", LONG, LONG + "y", None, b"raw"])


def _value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 3 or r < 0.55:
        return _scalar(rng)
    if r < 0.75:
        return _args(rng, depth + 1, Mapping if rng.random() < 0.1 else dict)
    kind = rng.choice((list, tuple, Items))
    return kind(_value(rng, depth + 1) for _ in range(rng.randrange(0, 5)))


def _args(rng: random.Random, depth: int = 0, kind: type = dict) -> dict:
    keys = ["buf", "bytes", "dtype", "users", "mode", "exec", "name", 3, True, (1, 2), "tb"]
    return kind((rng.choice(keys), _value(rng, depth)) for _ in range(rng.randrange(0, 5)))


def _track(rng: random.Random, n: int) -> Track:
    t = Track(uuid=9, name="t", parent=0, rank=0, kind="slice", role=Role.QUEUE)
    t.ts = array("q", range(0, 10 * n, 10))
    t.dur = array("q", (rng.choice((-1, 0, 5)) for _ in range(n)))
    t.names = array("i", (rng.randrange(4) for _ in range(n)))
    for i in range(n):
        if rng.random() < 0.6:
            t.args[i] = _args(rng) if rng.random() < 0.9 else Mapping(_args(rng))
        if rng.random() < 0.2:
            t.flows_out[i] = [rng.randrange(2**64) for _ in range(rng.randrange(0, 3))]
        if rng.random() < 0.2:
            t.flows_in[i] = [rng.randrange(2**64) for _ in range(rng.randrange(0, 3))]
    return t


def _state(seq: proto._Sequence) -> tuple:
    return (seq.names, seq.arg_names, seq.values, seq.entries, seq.named, seq.heads, bytes(seq.new_interned))


def _tails(track: Track, firsts: list[int], many: list[bool]) -> tuple:
    seq = proto._Sequence(2, track, ["a", "bb", "ccc", LONG])
    tails: list[bytes] = [b"end"]
    try:
        ids = proto._tails(seq, track, firsts, many, tails)
    except (RecursionError, OverflowError, ValueError, TypeError) as e:
        return type(e), str(e)[:20]
    return ids, tails, _state(seq)


@needs_c
def test_tails_and_annotations_are_the_references(monkeypatch):
    rng = random.Random(SEED)
    for _ in range(CASES):
        n = rng.randrange(1, 12)
        track = _track(rng, n)
        firsts = [rng.randrange(n) for _ in range(rng.randrange(0, 8))]
        many = [rng.random() < 0.5 for _ in firsts]
        fast, slow = _both(monkeypatch, lambda t=track, f=firsts, m=many: _tails(t, f, m))
        assert fast == slow


@needs_c
def test_an_annotation_nested_past_the_recursion_limit_is_an_error_not_a_crash():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    seq = proto._Sequence(2, _track(random.Random(1), 1), ["a"])
    with pytest.raises(RecursionError):
        seq.annotations(proto.TrackEvent.DEBUG_ANNOTATIONS, {"deep": deep})


def test_without_the_compiled_encoder_the_references_write(monkeypatch):
    code = "from vizexport.perfetto import wire; print(wire.fast)"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VIZEXPORT_PURE_PYTHON": "1"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout == "None\n"
