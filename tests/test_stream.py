"""Streaming load of big profiles (pickles.streaming): same records and trace bytes as the whole-file load, and a
released memo entry that is fetched again makes it give up rather than return wrong data."""
from __future__ import annotations

import copy
import io
import os
import pickle
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from vizexport import forks, pickles
from vizexport.perfetto import proto
from vizexport.pickles import InputError, opscan, streaming
from vizexport.pickles.streaming import StreamAbort
from vizexport.tinygrad import profile as profile_reader
from vizexport.tinygrad.profile import _EventReader, profile_from, stream_profile
from vizexport.tinygrad.timeline import build_timeline

from .conftest import ROOT, fixture_params

SAMPLE = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"


def _trace(prof) -> bytes:
    out = io.BytesIO()
    proto.write(build_timeline(prof), out)
    return out.getvalue()


def _same(path, executor: forks.Executor = forks.SERIAL) -> None:
    streamed = stream_profile(path, min_bytes=0, executor=executor)
    assert streamed is not None, "not streamed"
    whole = profile_from(*pickles.load(path), str(path))
    assert streamed.release == whole.release and streamed.n_events == whole.n_events
    assert streamed.spans == whole.spans
    for f in ("points", "graphs", "programs", "devices", "captures", "unknown"):
        assert repr(getattr(streamed, f)) == repr(getattr(whole, f)), f
    assert _trace(streamed) == _trace(whole)


def test_sample_streams_identically():
    _same(SAMPLE)


@pytest.mark.parametrize("path", fixture_params("tinygrad/*/profile.pkl") + fixture_params("sqtt/*/*_run_0.pkl"))
def test_fixture_streams_identically(path):
    _same(path)


def test_batches_arrive_in_order(tmp_path):
    got: list = []
    streaming.stream(SAMPLE, got.append)
    assert repr([e for b in got for e in b]) == repr(pickles.load(SAMPLE)[0])
    shared, events = _shared_pickle(tmp_path)
    got = []
    streaming.stream(shared, got.append)  # pickle's batches of 1,000 are handed on 16,000 at a time
    assert [len(b) for b in got] == [16000, 14000] and [e for b in got for e in b] == events


@pytest.fixture(params=["walk", "beside"])
def pass1(request, monkeypatch):
    """Run a test with each pass 1: the sequential walk first, or opscan beside pass 2 (made to take these small
    pickles, in blocks of a few frames, counted at most one frame behind pass 2)."""
    used = SimpleNamespace(beside=request.param == "beside", searched=[])  # opscan's byte search runs in this process
    if used.beside:
        monkeypatch.setattr(streaming, "_BESIDE_MIN", 0)
        monkeypatch.setattr(streaming, "_BLOCKS", (1, 2))
        monkeypatch.setattr(streaming, "_BLOCK", 3)
        monkeypatch.setattr(streaming, "_LAG", 1)
        search = opscan.fetch_candidates
        monkeypatch.setattr(opscan, "fetch_candidates", lambda *a, **k: used.searched.append(a) or search(*a, **k))
    return used


def _frames(path) -> list[int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return opscan.frame_offsets(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def test_fetching_a_released_entry_aborts(monkeypatch, tmp_path, pass1):
    """Release every entry after its frame (as if nothing fetched it later): the sentinel check must notice."""
    devices = [f"device {n}" for n in range(3)]  # each fetched again for 10,000 events (many frames)
    events = [{"name": f"n{i}", "dev": devices[i // 10000], "ts": str(i)} for i in range(30000)]
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(events, protocol=4))
    assert len(_frames(path)) > 5
    streaming.stream(path, lambda items: None)
    init = streaming._Plan.__init__

    def forgetful(self, size, frames, fetched, last, *rest):
        init(self, size, frames, fetched[:0], last[:0], *rest)
    monkeypatch.setattr(streaming._Plan, "__init__", forgetful)
    with pytest.raises(StreamAbort, match="released"):
        streaming.stream(path, lambda items: None)


BIG = [b"x" * 5_000_000, "shared", "\u2014" * 70_000, *(("shared", i) for i in range(3000)), b"y" * 100_000]


@pytest.mark.parametrize("obj", [([1, 2], [3]), {"a": [1]}, "text", [1, 2, 3], [], [7], BIG])
def test_other_pickles_stream_or_abort(tmp_path, obj):
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps(obj, protocol=4))
    got: list = []
    if isinstance(obj, list):
        streaming.stream(path, got.extend)
        assert got == obj
    else:
        with pytest.raises(StreamAbort):
            streaming.stream(path, got.extend)


def test_persistent_ids_are_not_streamed(tmp_path):
    path = tmp_path / "p.pkl"
    path.write_bytes(b"\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00]\x94(Pevil\nK\x01e.")
    with pytest.raises(StreamAbort):
        streaming.stream(path, lambda items: None)
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


def _shared_pickle(tmp_path):
    devices = [f"device {n}" for n in range(3)]
    # made after 300 events: memo entries past BINGET's 256, fetched by LONG_BINGET from every later frame
    events = [{"name": f"n{i}", "dev": devices[i % 3] if i >= 300 else f"own {i}", "ts": str(i)} for i in range(30000)]
    path = tmp_path / "shared.pkl"
    path.write_bytes(pickle.dumps(events, protocol=4))
    return path, events


@pytest.mark.parametrize("path", [SAMPLE, *fixture_params("tinygrad/0.14.0-hcq2/profile.pkl"),
                                  *fixture_params("sqtt/gfx950/profile_gemm_run_0.pkl")])
def test_opscan_plans_what_the_walk_plans(tmp_path, path):
    """opscan (many frames at once, any split into blocks) counts each frame's memo entries exactly as the
    sequential walk does, and its byte search finds every LONG_BINGET fetch, none later than it may be: on real
    profiles and on one whose shared objects are fetched from many later frames."""
    if path is None:
        pytest.skip("fixture not present")
    shared, _ = _shared_pickle(tmp_path)
    for p in (path, shared):
        size, frames = p.stat().st_size, _frames(p)
        ends = [*frames[1:], size]
        fd = os.open(p, os.O_RDONLY)
        try:
            walked = streaming._walk(fd, size, True)
            for block in (len(frames) // 2 + 1, len(frames)):  # each call walks as many steps as its longest frame
                counts = [opscan.frame_memos(fd, frames[a:a + block], ends[a:a + block], a + block >= len(frames))
                          for a in range(0, len(frames), block)]
                assert np.concatenate(counts).tolist() == walked.memos
            fetched, last, _ = opscan.fetch_candidates(fd, size, frames, chunk=4096)  # fetches across chunks too
        finally:
            os.close(fd)
        assert walked.frames == frames and sum(walked.memos) > 1000
        found = dict(zip(fetched.tolist(), last.tolist(), strict=True))
        real = {i: f for i, f in walked.fetches.items() if i >= 256}
        assert all(found.get(i, -1) >= f for i, f in real.items()) and (real or p != shared)
        assert sum(i < sum(walked.memos) for i in found) == len(real)  # no false candidate in range here


def test_opscan_refuses_what_it_cannot_count(tmp_path):
    """A frame whose opcode runs past its end, or that holds an opcode the stream does not take, is not counted."""
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps([(f"s{i:08d}", i) for i in range(20000)], protocol=4))
    data, frames = path.read_bytes(), _frames(path)
    ends = [*frames[1:], len(data)]

    def memos(blob: bytes):
        path.write_bytes(blob)
        fd = os.open(path, os.O_RDONLY)
        try:
            return opscan.frame_memos(fd, frames, ends, True)
        finally:
            os.close(fd)
    assert memos(data).sum() > 20000
    last = data.rindex(b"\x8c\x09s", 0, frames[1])  # the last SHORT_BINUNICODE in frame 0, made to run past its end
    at = data.index(b"\x8c\x09s", frames[1])
    for bad in (data[:last + 1] + b"\xff" + data[last + 2:],
                data[:at] + b"\x8e" + (1 << 63).to_bytes(8, "little") + data[at + 9:],  # BINBYTES8 past int64
                data[:at] + b"Q" + data[at + 1:]):  # BINPERSID: never taken
        assert len(bad) == len(data) and memos(bad) is None


@pytest.mark.parametrize("path", [SAMPLE, *fixture_params("tinygrad/*/profile.pkl"),
                                  *fixture_params("sqtt/gfx1100/profile_gemm_run_0.pkl")])
def test_streams_identically_with_pass1_beside(path, pass1):
    """Both pass 1s give the records and trace bytes of the whole-file load."""
    if path is None:
        pytest.skip("fixture not present")
    _same(path)
    if pass1.beside and _frames(path) is not None:
        assert pass1.searched


def test_big_shared_pickle_streams(tmp_path, pass1):
    shared, events = _shared_pickle(tmp_path)
    got: list = []
    streaming.stream(shared, got.extend)
    assert got == events


def test_too_many_fetch_candidates_leave_the_file_to_the_whole_load(tmp_path, monkeypatch):
    """Bytes that look like LONG_BINGETs of distinct entries: past opscan.MAX_CANDIDATES the stream declines."""
    monkeypatch.setattr(streaming, "_BESIDE_MIN", 0)
    blobs = [b"".join(b"j" + (256 + 50 * i + k).to_bytes(4, "little") for k in range(50)) for i in range(100)]
    path = tmp_path / "j.pkl"
    path.write_bytes(pickle.dumps(blobs, protocol=4))
    got: list = []
    streaming.stream(path, got.extend)
    assert got == blobs
    monkeypatch.setattr(opscan, "MAX_CANDIDATES", 4999)  # 5,000 distinct candidates
    with pytest.raises(StreamAbort, match="not a streamable list"):
        streaming.stream(path, got.extend)


# ---- a big stream read in two halves at once ----

@pytest.fixture
def halves(monkeypatch):
    """Split even these small pickles (their frames counted beside pass 2), with a second CPU or not."""
    monkeypatch.setattr(streaming, "SPLIT_MIN", 0)
    monkeypatch.setattr(streaming, "_BESIDE_MIN", 0)
    monkeypatch.setattr(streaming, "_BLOCKS", (1, 2))  # counted in workers, in blocks of a few frames
    monkeypatch.setattr(streaming, "_BLOCK", 3)
    monkeypatch.setattr(forks, "default_jobs", lambda: 2)  # (the executor's `parallel`)
    merged: list = []
    merge = _EventReader.merge
    monkeypatch.setattr(_EventReader, "merge", lambda self, part: merged.append(part.n) or merge(self, part))
    return merged


@pytest.fixture
def ex():
    """The executor that reads the back half, and scans, in forked processes."""
    with forks.ForkExecutor() as executor:
        yield executor


class _Kept:
    """A tail reader that keeps the items."""

    def __init__(self) -> None:
        self.items: list = []

    def feed(self, items: list) -> None:
        self.items += items

    def part(self) -> list:
        return self.items


def _events(shared_at: int, n: int = 30000) -> list:
    """Events that fetch strings made at event `shared_at` from every later frame (LONG_BINGET)."""
    devices = [f"device {k}" for k in range(3)]
    return [{"name": f"n{i}", "dev": devices[i % 3] if i >= shared_at else f"own {i}", "ts": str(i)} for i in range(n)]


def test_halves_of_a_stream_come_back_in_order(tmp_path, halves, monkeypatch, ex):
    """The back half's items arrive as its part, the front's through consume: together the list, in order; the
    back half's reader took the strings the front made from the frames it unpickles first, and filled the memo up to
    the cut (most of it: one frame first)."""
    monkeypatch.setattr(streaming, "_PREFIX", 1)
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(events := _events(300), protocol=4))
    got: list = []
    _, back = streaming.stream(path, got.extend, tail=_Kept, executor=ex)
    assert back and got and got + back == events
    assert 0.5 * streaming.BACK_SHARE < len(back) / len(events) < 1.5 * streaming.BACK_SHARE
    assert got[-1]["name"] == f"n{len(got) - 1}" and len(got) % 1000 == 0  # cut where a batch of 1,000 ends


def test_a_back_half_that_fetches_from_the_front_is_read_by_the_front(tmp_path, halves, monkeypatch, ex):
    """Strings made in the middle of the front and fetched past the cut: the back half cannot have them (they come
    from neither its first frames nor its own), so the front reads on past the cut, and nothing is lost."""
    monkeypatch.setattr(streaming, "_PREFIX", 1)
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(events := _events(9000), protocol=4))
    got: list = []
    assert streaming.stream(path, got.extend, tail=_Kept, executor=ex)[1] is None and got == events


def test_a_back_half_reads_first_the_frames_that_make_what_it_fetches(tmp_path, halves, monkeypatch, ex):
    """Strings made after the first frames but early in the stream, fetched all along: the back half's reader
    unpickles the frames up to them first (at most an eighth of the front's)."""
    monkeypatch.setattr(streaming, "_PREFIX", 1)
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(events := _events(3000, 120000), protocol=4))
    assert len(_frames(path)) > 40
    got: list = []
    _, back = streaming.stream(path, got.extend, tail=_Kept, executor=ex)
    assert back and got + back == events


def test_a_back_half_that_fails_leaves_it_to_the_front(tmp_path, halves, monkeypatch, ex):
    class Failing(_Kept):
        def feed(self, items: list) -> None:
            raise ValueError("no")
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(events := _events(300), protocol=4))
    got: list = []
    assert streaming.stream(path, got.extend, tail=Failing, executor=ex)[1] is None and got == events


def _batches_of_the_sample(path, batches: int, monkeypatch) -> None:
    """A profile of the sample's events, repeated to fill `batches` batches of 1,000, each of fresh objects (texts
    aside), pickled again under their tinygrad names: objects are shared within a batch only, as with make_big_profile.
    (The stand-ins' classes get tinygrad-named twins in stand-in modules.)"""
    events = pickles.load(SAMPLE)[0]
    one = (events * (1000 // len(events) + 1))[:1000]

    def named(cls: type) -> type:
        module, name = cls._qualname.rsplit(".", 1)
        for m in ("tinygrad", module):
            if m not in sys.modules:
                monkeypatch.setitem(sys.modules, m, types.ModuleType(m))
        if not hasattr(sys.modules[module], name):
            setattr(sys.modules[module], name, type(name, (), {"__module__": module, "__qualname__": name}))
        return getattr(sys.modules[module], name)

    class Repickler(pickle.Pickler):
        def reducer_override(self, obj):
            cls = type(obj)
            if type(cls) is not pickles.StandInType:
                return NotImplemented
            if issubclass(cls, pickles.EnumValue):
                return named(cls), (int(obj),)
            state = dict(obj.__dict__)
            args = state.pop("_args", None)
            if issubclass(cls, pickles.FloatStub):
                return named(cls), (float(obj),), (None, state)
            return named(cls), args or (), state or None  # REDUCE (no NEWOBJ of another class), then BUILD

    out = io.BytesIO()
    Repickler(out, protocol=4).dump([e for _ in range(batches) for e in copy.deepcopy(one)])
    path.write_bytes(out.getvalue())


def test_profile_read_in_halves_is_the_whole_load(tmp_path, halves, monkeypatch, ex):
    """A profile whose batches share only texts made in the first: read in halves, the records and trace bytes of
    the whole-file load (Keys of the same content are one Key, graph entries and batches renumbered)."""
    path = tmp_path / "p.pkl"
    _batches_of_the_sample(path, 40, monkeypatch)
    _same(path, ex)
    assert 10000 < halves[0] < 20000 and halves[0] % 1000 == 0  # the front has the first LEAF_EVENTS


@pytest.mark.parametrize("room", ["enough", "a span's", "no address space"])
def test_a_back_half_hands_its_span_columns_over_in_shared_memory(tmp_path, halves, monkeypatch, ex, room):
    """The back half's span columns reach the front through memory both map (the part says where), or down the pipe
    with the rest of the part where they do not fit, or where the system will not map that much; the records and trace
    bytes are the whole-file load's either way."""
    path = tmp_path / "p.pkl"
    _batches_of_the_sample(path, 40, monkeypatch)
    if room == "a span's":
        monkeypatch.setattr(profile_reader, "_MIN_SPAN_PICKLE", path.stat().st_size)
    elif room == "no address space":  # a tebibyte per span: more than any machine maps
        monkeypatch.setattr(profile_reader, "_SPAN_BYTES", 1 << 40)
    kinds: list = []
    merge = _EventReader.merge
    monkeypatch.setattr(_EventReader, "merge", lambda self, part: kinds.append(type(part.columns)) or merge(self, part))
    _same(path, ex)
    assert kinds == [profile_reader._Placed if room == "enough" else dict] and len(halves) == 1


@pytest.mark.parametrize("path", fixture_params("tinygrad/0.14.0/profile.pkl"))
def test_a_profile_that_shares_objects_across_the_cut_is_read_by_the_front(path, halves, ex):
    """tinygrad shares objects between nearby events: those made just before the cut and fetched after it are the
    front's, so the front reads on; the records and trace bytes are the whole-file load's."""
    if path is None:
        pytest.skip("fixture not present")
    _same(path, ex)
    assert halves == []
