"""Streaming load of big profiles (pickles.stream): same records and trace bytes as the whole-file load, and a
released memo entry that is fetched again makes it give up rather than return wrong data."""
from __future__ import annotations

import io
import pickle

import pytest

from vizexport import pickles
from vizexport.perfetto import proto
from vizexport.pickles import InputError, StreamAbort
from vizexport.tinygrad.profile import profile_from, stream_profile
from vizexport.tinygrad.timeline import build_timeline

from .conftest import ROOT, fixture_params

SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"


def _trace(prof) -> bytes:
    out = io.BytesIO()
    proto.write(build_timeline(prof), out, jobs=1)
    return out.getvalue()


def _same(path) -> None:
    streamed = stream_profile(path, min_bytes=0)
    assert streamed is not None, "not streamed"
    whole = profile_from(*pickles.load(path), str(path))
    assert streamed.release == whole.release and streamed.n_events == whole.n_events
    for f in ("spans", "points", "graphs", "programs", "devices", "captures", "unknown"):
        assert repr(getattr(streamed, f)) == repr(getattr(whole, f)), f
    assert _trace(streamed) == _trace(whole)


def test_sample_streams_identically():
    _same(SAMPLE)


@pytest.mark.parametrize("path", fixture_params("tinygrad/*/profile.pkl") + fixture_params("sqtt/*/*_run_0.pkl"))
def test_fixture_streams_identically(path):
    _same(path)


def test_batches_arrive_in_order():
    got: list = []
    pickles.stream(SAMPLE, got.append)
    assert [len(b) for b in got][:-1] == [1000] * (len(got) - 1) or len(got) == 1
    assert repr([e for b in got for e in b]) == repr(pickles.load(SAMPLE)[0])


def test_fetching_a_released_entry_aborts(monkeypatch, tmp_path):
    """Release every entry after its frame (ignoring later fetches): the sentinel check must notice."""
    devices = [f"device {n}" for n in range(3)]  # each fetched again for 10,000 events (many frames)
    events = [{"name": f"n{i}", "dev": devices[i // 10000], "ts": str(i)} for i in range(30000)]
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(events, protocol=4))
    assert len(pickles._scan(open(path, "rb"), path.stat().st_size).frames) > 2
    monkeypatch.setattr(pickles._Plan, "finish", lambda self: setattr(self, "last", {}))
    with pytest.raises(StreamAbort, match="released"):
        pickles.stream(path, lambda items: None)


BIG = [b"x" * 5_000_000, "shared", "\u2014" * 70_000, *(("shared", i) for i in range(3000)), b"y" * 100_000]


@pytest.mark.parametrize("obj", [([1, 2], [3]), {"a": [1]}, "text", [1, 2, 3], [], [7], BIG])
def test_other_pickles_stream_or_abort(tmp_path, obj):
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps(obj, protocol=4))
    got: list = []
    if isinstance(obj, list):
        pickles.stream(path, got.extend)
        assert got == obj
    else:
        with pytest.raises(StreamAbort):
            pickles.stream(path, got.extend)


def test_persistent_ids_are_not_streamed(tmp_path):
    path = tmp_path / "p.pkl"
    path.write_bytes(b"\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00]\x94(Pevil\nK\x01e.")
    with pytest.raises(StreamAbort):
        pickles.stream(path, lambda items: None)
    with pytest.raises(InputError, match="persistent id"):
        pickles.load(path)


def test_truncated_big_file_is_left_to_the_whole_load(tmp_path):
    data = SAMPLE.read_bytes()
    path = tmp_path / "cut.pkl"
    path.write_bytes(data[: len(data) // 2])
    assert stream_profile(path, min_bytes=0) is None
    with pytest.raises(InputError, match="truncated"):
        pickles.load(path)


def test_refused_global_is_refused_while_streaming(tmp_path):
    import os
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps([os.system] * 3, protocol=4))
    with pytest.raises(InputError, match=r"evil.pkl: refused global (posix|os)\.system"):
        stream_profile(path, min_bytes=0)


@pytest.mark.parametrize("path", [SAMPLE, *fixture_params("tinygrad/0.14.0-hcq2/profile.pkl")])
def test_scan_in_parts_equals_one_scan(monkeypatch, tmp_path, path):
    """Pass 1 split over forked scanners (frames are independent) plans exactly what one sequential scan plans, on a
    real profile and on one whose shared objects are fetched from many later frames; and the stream then loads."""
    if path is None:
        pytest.skip("fixture not present")
    devices = [f"device {n}" for n in range(3)]
    events = [{"name": f"n{i}", "dev": devices[i % 3], "ts": str(i)} for i in range(60000)]
    shared = tmp_path / "shared.pkl"
    shared.write_bytes(pickle.dumps(events, protocol=4))
    monkeypatch.setattr(pickles, "_PARALLEL_SCAN", 0)
    for p in (path, shared):
        size = p.stat().st_size
        with open(p, "rb") as f:
            one, parts = pickles._scan(f, size, jobs=1), pickles._scan(f, size, jobs=3)
        assert len(one.frames) >= 2 and one.frames == parts.frames and one.memo_at == parts.memo_at
        assert one.due == parts.due and one.kept == parts.kept
    got: list = []
    pickles.stream(shared, got.extend)
    assert got == events
