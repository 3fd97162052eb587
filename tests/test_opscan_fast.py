"""Pass 1's compiled frame walk (vizexport/pickles/_opscan.c) counts exactly what the numpy walk counts (the
reference, and the fallback where no compiler built it): on every real pickle, and on thousands of seeded mutations
of real frames (the fuzz harness's byte mutations, counts near 2^63 and 2^64, FRAME, STOP and PROTO inside a frame,
cuts) and random bytes, the same memo entries per frame or the same refusal. Its fetch search (fetch_scan) finds what
numpy's finds: the same candidates, last frames and late rows, or the same refusal past MAX_CANDIDATES, on every real
pickle, on hand-made chunk and file ends, and on seeded random and mutated bytes read in chunks of any size.
VIZEXPORT_PURE_PYTHON=1, or no compiled module, walks and searches with numpy."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from vizexport import pickles
from vizexport.pickles import opscan

from .conftest import ROOT, fixture_params
from .test_hostile import FUZZ  # tools/fuzz.py: its seeded byte mutations

try:
    from vizexport.pickles import _opscan
except ImportError:  # no compiler at install: only the numpy walk, which test_stream covers
    _opscan = None
needs_c = pytest.mark.skipif(_opscan is None, reason="the compiled walk is not built (no compiler at install)")

SAMPLE = ROOT / "vizexport" / "data" / "sample"
CASES, SEED = 5000, 36
FRAME_OPS = 24  # opcodes in a fuzzed frame at most: numpy takes a step per opcode, so cases stay fast
COUNTED = {1: (0x8C, 0x43, 0x55, 0x8A), 4: (0x58, 0x42, 0x54, 0x8B), 8: (0x8D, 0x8E, 0x96)}  # by count width
INSIDE = (opscan.FRAME, opscan.STOP, 0x80, opscan.MEMOIZE, 0x00, 0xFF)  # FRAME, STOP, PROTO, ... inside a frame


@pytest.fixture(autouse=True)
def _tables():
    if _opscan is not None:
        _opscan.set_tables(opscan._LENGTH, opscan._COUNT)  # VIZEXPORT_PURE_PYTHON skips it at import


def _c(raw: bytes, cur: np.ndarray, end: np.ndarray) -> list[int] | None:
    out = np.full(len(cur), -7, np.int64)
    return out.tolist() if _opscan.frame_memos(raw, cur, end, out) else None


def _numpy(raw: bytes, cur: np.ndarray, end: np.ndarray) -> list[int] | None:
    got = opscan._lockstep(raw, cur.copy(), end.copy())  # it moves the cursors it is given
    return None if got is None else got.tolist()


def _file_memos(path, blocks: int, fast) -> list:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        frames = opscan.frame_offsets(fd, size)
        if frames is None:
            return []
        ends, block = [*frames[1:], size], -(-len(frames) // blocks)
        opscan._fast = fast
        return [None if m is None else m.tolist() for a in range(0, len(frames), block)
                for m in [opscan.frame_memos(fd, frames[a:a + block], ends[a:a + block], a + block >= len(frames))]]
    finally:
        os.close(fd)


@needs_c
@pytest.mark.parametrize("path", [SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl",
                                  *fixture_params("tinygrad/*/*.pkl")])
def test_both_walks_count_every_real_pickle_alike(path, monkeypatch):
    if path is None:
        pytest.skip("fixture not present")
    monkeypatch.setattr(opscan, "_fast", _opscan)
    fast = _file_memos(path, 2, _opscan)  # in two blocks: the second ends with the stream's STOP
    assert fast == _file_memos(path, 2, None)
    if path.name == "profile.pkl":
        assert fast and None not in fast[0] and sum(fast[0]) > 30


def _pieces(rng: random.Random) -> list[bytes]:
    """Runs of up to FRAME_OPS whole opcodes cut from the frames of the bundled pickles."""
    out = []
    for name in ("profile.pkl", "rewrites.pkl"):
        data = (SAMPLE / name).read_bytes()
        fd = os.open(SAMPLE / name, os.O_RDONLY)
        try:
            frames = opscan.frame_offsets(fd, len(data))
        finally:
            os.close(fd)
        for at, end in zip(frames, [*frames[1:], len(data) - 1], strict=True):
            payload = data[at + opscan.FRAME_HEADER:end]
            starts = [i for i, _ in opscan.opcodes(payload)]
            for _ in range(200):
                a = rng.randrange(len(starts))
                b = min(a + rng.randint(1, FRAME_OPS), len(starts))
                out.append(payload[starts[a]:starts[b] if b < len(starts) else len(payload)])
    return out


def _count(rng: random.Random, n: int) -> int:
    """A count a hostile file might hold: tiny, near the block's end, near 2^63 or 2^64, or any."""
    return rng.choice((0, 1, 2, n, n + rng.randrange(-20, 20), (1 << 63) + rng.randrange(-12, 12),
                       (1 << 64) - rng.randrange(1, 12), rng.getrandbits(64)))


def _mutate(rng: random.Random, raw: bytearray, starts: list[int]) -> None:
    """One mutation in place, at an opcode of a frame or anywhere."""
    at = rng.choice(starts) % len(raw)  # an earlier cut may have left fewer bytes
    kind = rng.randrange(3)
    if kind == 0:  # a counted opcode and a count of its width
        width = rng.choice((1, 4, 8))
        count = _count(rng, len(raw)) % (1 << 8 * width)
        raw[at:at + 1 + width] = bytes([rng.choice(COUNTED[width])]) + count.to_bytes(width, "little")
    elif kind == 1:
        raw[at] = rng.choice(INSIDE)
    else:
        raw[:] = FUZZ.mutate(bytes(raw), rng)[1]  # a cut, bit flips, bytes doubled, deleted or overwritten


def _case(rng: random.Random, pieces: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Consecutive frames of real opcode runs, mutated; or random bytes with random cursors."""
    if rng.random() < 0.15:
        raw = rng.randbytes(rng.randrange(1, 64))
        cur = [rng.randrange(len(raw) + 1) for _ in range(rng.randint(1, 3))]
        return raw, np.array(cur, np.int64), np.array([rng.randint(c - 2, len(raw)) for c in cur], np.int64)
    raw, cur, end = bytearray(), [], []
    for piece in (rng.choice(pieces) for _ in range(rng.randint(1, 4))):
        raw += bytes([opscan.FRAME]) + len(piece).to_bytes(8, "little")
        cur.append(len(raw))
        raw += piece
        end.append(len(raw))
    starts = [c + i for c, e in zip(cur, end, strict=True) for i, _ in opscan.opcodes(raw[c:e])]
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        if raw:  # (a cut may leave none)
            _mutate(rng, raw, starts or cur)
    if rng.random() < 0.5:
        raw.append(opscan.STOP)  # the stream's last byte, after the last frame
    cur = np.minimum(cur, len(raw))  # a cut leaves frames past the block's end: they start and end at it
    return bytes(raw), cur, np.minimum(end, len(raw))


@needs_c
def test_both_walks_agree_on_mutated_frames():
    rng = random.Random(SEED)
    pieces = _pieces(rng)
    seen: Counter = Counter()
    for i in range(CASES):
        raw, cur, end = _case(rng, pieces)
        c = _c(raw, cur, end)
        assert c == _numpy(raw, cur, end), (i, raw.hex(), cur.tolist(), end.tolist())
        seen["refused" if c is None else "counted"] += 1
        seen["memos"] += sum(c or ())
    assert seen["refused"] > CASES // 5 and seen["counted"] > CASES // 10 and seen["memos"] > CASES, seen


def _frame(payload: bytes) -> tuple[bytes, np.ndarray, np.ndarray]:
    raw = bytes([opscan.FRAME]) + len(payload).to_bytes(8, "little") + payload
    return raw, np.array([9], np.int64), np.array([len(raw)], np.int64)


@needs_c
@pytest.mark.parametrize(("payload", "memos"), [
    (b"\x8c\x02ab\x94\x94", [2]),  # SHORT_BINUNICODE, MEMOIZE, and a MEMOIZE alone
    (b"\x8e" + (9 - 9 + 4).to_bytes(8, "little") + b"abcd\x94", [1]),  # BINBYTES8 of 4 bytes
    (b"\x8e" + (1 << 63).to_bytes(8, "little"), None),  # past int64: negative in numpy
    (b"\x8e" + ((1 << 64) - 1).to_bytes(8, "little"), None),  # wraps to a step of 8: into its own count's 0xff
    (b"\x8e" + ((1 << 64) - 9).to_bytes(8, "little"), None),  # wraps to a step of 0
    (b"\x58\xff\xff\xff\x7f", None),  # BINUNICODE past the block
    (b"\x8c", None),  # its count past the block reads PAD's zero: a 2-byte step past the frame's end
    (b"", None),  # an empty frame: numpy takes one step (here PAD's zero) before it looks at the end
    (b"N.", None), (b"N\x80\x04", None), (b"N\x95", None),  # STOP, PROTO, FRAME inside a frame
])
def test_both_walks_read_crafted_frames_alike(payload, memos):
    raw, cur, end = _frame(payload)
    assert _c(raw, cur, end) == _numpy(raw, cur, end) == memos


@needs_c
def test_a_count_that_crosses_its_frames_end_reads_the_next_frame():
    """numpy reads the bytes after a frame as they are: a count split by the end is refused all the same."""
    a, cur_a, end_a = _frame(b"N\x8c")  # its count is the next frame's FRAME byte: past its end
    b, cur_b, end_b = _frame(b"N\x94")
    raw, cur, end = a + b, np.r_[cur_a, cur_b + len(a)], np.r_[end_a, end_b + len(a)]
    assert _c(raw, cur, end) == _numpy(raw, cur, end) is None
    assert _c(b, cur_b, end_b) == _numpy(b, cur_b, end_b) == [1]


@needs_c
def test_the_compiled_walk_checks_what_it_is_given():
    raw, cur, end = _frame(b"N")
    out = np.zeros(1, np.int64)
    for bad_cur, bad_end in (([-1], [10]), ([11], [10]), ([9], [11])):  # a cursor or end outside the block
        with pytest.raises(ValueError, match="outside the block"):
            _opscan.frame_memos(raw, np.array(bad_cur, np.int64), np.array(bad_end, np.int64), out)
    with pytest.raises(ValueError, match="differ in length"):
        _opscan.frame_memos(raw, cur, end, np.zeros(2, np.int64))
    for wrong in (cur.astype(np.int32), cur.astype(np.float64), np.zeros((1, 1), np.int64)):
        with pytest.raises(TypeError):
            _opscan.frame_memos(raw, wrong, end, out)
    with pytest.raises(BufferError):
        _opscan.frame_memos(raw, cur, end, bytes(8))  # a read-only out
    assert _opscan.frame_memos(raw, cur, end, out) and out.tolist() == [0]


@needs_c
def test_the_compiled_walk_takes_only_sound_tables():
    """Its tables are opscan's (one source of truth): a table it could not walk safely is refused and the last
    good one kept; its constants are opscan's and pickle's."""
    assert (_opscan.PAD, _opscan.MEMOIZE) == (opscan.PAD, opscan.MEMOIZE)
    bad_count, bad_length = opscan._COUNT.copy(), opscan._LENGTH.copy()
    bad_count[0x4E] = 3
    bad_length[0x4E] = opscan.PAD  # NONE's step could then pass numpy's bound unchecked
    for length, count in ((opscan._LENGTH, bad_count), (bad_length, opscan._COUNT),
                          (opscan._LENGTH[:255], opscan._COUNT[:255])):
        with pytest.raises(ValueError, match="tables"):
            _opscan.set_tables(length, count)
    assert _c(*_frame(b"N\x94")) == [1]


def test_without_the_compiled_walk_numpy_walks(monkeypatch):
    monkeypatch.delenv("VIZEXPORT_PURE_PYTHON", raising=False)
    assert opscan._compiled() is _opscan  # None where it was not built
    monkeypatch.setitem(sys.modules, "vizexport.pickles._opscan", None)  # as if no compiler built it
    monkeypatch.delattr(pickles, "_opscan", raising=False)
    assert opscan._compiled() is None
    monkeypatch.undo()
    monkeypatch.setenv("VIZEXPORT_PURE_PYTHON", "1")
    assert opscan._compiled() is None
    code = "from vizexport.pickles import opscan; print(opscan._fast)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout == "None\n"


# ---- fetch_candidates: the C search (fetch_scan) against numpy's ----

SEARCHES = [pytest.param(None, id="numpy"), pytest.param(_opscan, id="c", marks=needs_c)]
J = bytes([opscan.LONG_BINGET])
REACH = opscan.BINGET_REACH


def _index(i: int) -> bytes:
    return J + i.to_bytes(4, "little")


def _search(path, impl, frames=None, **kw) -> tuple | None:
    """fetch_candidates of the file with one search (None: numpy's), as lists: (indices, last frames, late rows)."""
    old = opscan._fast
    opscan._fast = impl
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        got = opscan.fetch_candidates(fd, size, [0] if frames is None else frames, **kw)
    finally:
        os.close(fd)
        opscan._fast = old
    if got is not None:
        assert [a.dtype for a in got] == [np.int64] * 3 and got[2].shape == (len(got[2]), 2)
    return None if got is None else tuple(a.tolist() for a in got)


def _both(path, frames=None, **kw) -> tuple | None:
    """fetch_candidates by numpy's search, and by the C one where built: the same."""
    want = _search(path, None, frames, **kw)
    if _opscan is not None:
        assert _search(path, _opscan, frames, **kw) == want, kw
    return want


@pytest.mark.parametrize("path", [SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl",
                                  *fixture_params("tinygrad/*/*.pkl")])
def test_both_searches_find_the_same_fetches_in_every_real_pickle(path):
    if path is None:
        pytest.skip("fixture not present")
    fd = os.open(path, os.O_RDONLY)
    try:
        frames = opscan.frame_offsets(fd, os.fstat(fd).st_size) or [0]
    finally:
        os.close(fd)
    whole = _both(path, frames)
    late = (frames[len(frames) // 2], REACH + 100)
    for chunk in (4096, 1000, 77 if path.stat().st_size < 1 << 20 else 65536):  # many chunks: indices across ends
        assert _both(path, frames, chunk=chunk) == whole
        assert _both(path, frames, chunk=chunk, late=late) == _both(path, frames, late=late)
    if path.name == "profile.pkl" and path.parent == SAMPLE:
        fetched, last, rows = _both(path, frames, late=late)
        assert len(fetched) > 50 and min(fetched) >= REACH and set(last) <= set(range(len(frames)))
        assert rows and all(i >= late[1] and at >= late[0] for i, at in rows)


@pytest.mark.parametrize("impl", SEARCHES)
def test_an_index_across_a_chunks_end_is_read_whole(tmp_path, impl):
    """A LONG_BINGET in each of a chunk's last 4 bytes has its index in the next chunk: found once, where it is."""
    for at in (7, 8, 9, 10, 11):
        path = tmp_path / f"at{at}.bin"
        data = bytearray(b"." * 24)
        data[at:at + 5] = _index(REACH + at)
        path.write_bytes(data)
        for chunk in (11, 12, 5, 1):
            got = _search(path, impl, [0, 10], chunk=chunk, late=(0, 0))
            assert got == ([REACH + at], [0 if at < 10 else 1], [[REACH + at, at]]), (at, chunk)


@pytest.mark.parametrize("impl", SEARCHES)
def test_what_a_search_takes_and_leaves(tmp_path, impl):
    """The bounds: BINGET's reach (BINGET_REACH - 1 is not a candidate), an index cut by the file's end, the last
    place of an index, its frame (before the first frame: -1), and late rows from their offset and floor on."""
    path = tmp_path / "j.bin"
    body = _index(REACH - 1) + _index(REACH) + _index(2**32 - 1) + b"..." + _index(REACH) + _index(REACH + 1)
    for tail in (b"", J, J + b"\x00", J + b"\x00\x01", J + b"\x00\x01\x00"):  # cut by the end: no candidate
        path.write_bytes(body + tail)
        assert _search(path, impl, [5, 18]) == ([REACH, REACH + 1, 2**32 - 1], [1, 1, 0], [])
        assert _search(path, impl, [20]) == ([REACH, REACH + 1, 2**32 - 1], [-1, 0, -1], [])
        assert _search(path, impl, [5], chunk=3, late=(18, REACH + 1)) == \
            ([REACH, REACH + 1, 2**32 - 1], [0, 0, 0], [[REACH + 1, 23]])  # at 18: REACH, under the floor
        assert _search(path, impl, [5], late=(10, REACH))[2] == [[2**32 - 1, 10], [REACH, 18], [REACH + 1, 23]]
        assert _search(path, impl, [5], late=(11, REACH))[2] == [[REACH, 18], [REACH + 1, 23]]
    path.write_bytes(J * 40)  # overlapping: every byte is a LONG_BINGET of 0x6a6a6a6a, but the last 4
    jjjj = 0x6A6A6A6A
    assert _search(path, impl, [0], chunk=7, late=(30, 0)) == ([jjjj], [0], [[jjjj, a] for a in range(30, 36)])


@pytest.mark.parametrize("impl", SEARCHES)
def test_past_max_candidates_neither_search_plans(tmp_path, impl, monkeypatch):
    """MAX_CANDIDATES is read at each call; a chunk's distinct indices count beside those of the chunks before,
    once more where they repeat (so 3 + 3 of the same indices in two chunks are past 5)."""
    path = tmp_path / "j.bin"
    path.write_bytes(b"".join(_index(REACH + i) for i in range(6)))
    monkeypatch.setattr(opscan, "MAX_CANDIDATES", 6)
    assert _search(path, impl)[0] == [REACH + i for i in range(6)]
    monkeypatch.setattr(opscan, "MAX_CANDIDATES", 5)
    assert _search(path, impl) is None
    assert _search(path, impl, chunk=15) is None  # 3 and 3: the second chunk is past it
    path.write_bytes(b"".join(_index(REACH + i % 3) for i in range(6)))
    assert _search(path, impl, chunk=15) is None  # the same 3 in each chunk: counted twice, as numpy counts
    monkeypatch.setattr(opscan, "MAX_CANDIDATES", 6)
    assert _search(path, impl, chunk=15, late=(0, 0))[0] == [REACH, REACH + 1, REACH + 2]
    monkeypatch.setattr(opscan, "BINGET_REACH", REACH + 4)  # read at each call too
    assert _search(path, impl)[0] == []


def _fuzzed(rng: random.Random, real: list[bytes]) -> bytes:
    """Random bytes thick with LONG_BINGETs of few indices, near BINGET_REACH; or a real pickle mutated."""
    if rng.random() < 0.3:
        data = real[rng.randrange(len(real))]
        for _ in range(rng.randint(1, 3)):
            data = FUZZ.mutate(data, rng)[1] if data else data
        return data
    out, length = bytearray(), rng.randrange(0, 400)
    while len(out) < length:
        pick = rng.random()
        if pick < 0.4:
            out += _index(REACH + rng.randrange(-3, 40))
        elif pick < 0.5:
            out += J * rng.randint(1, 6)
        else:
            out += rng.randbytes(rng.randint(1, 9))
    return bytes(out)


@needs_c
def test_both_searches_agree_on_fuzzed_bytes(tmp_path, monkeypatch):
    rng = random.Random(SEED)
    real = [(SAMPLE / n).read_bytes()[:20000] for n in ("profile.pkl", "rewrites.pkl")]
    path = tmp_path / "f.bin"
    seen: Counter = Counter()
    for i in range(CASES // 5):
        data = _fuzzed(rng, real)
        path.write_bytes(data)
        monkeypatch.setattr(opscan, "MAX_CANDIDATES", rng.choice((2, 10, 40, 10**6)))
        frames = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(1, 5))))
        chunk = rng.choice((1, 2, 3, 4, 5, 6, 9, 16, 64, 1000, 64 << 20))
        kw = {"chunk": chunk if len(data) < 1000 else max(chunk, 1000),  # (numpy's search: a step per chunk)
              "late": rng.choice((None, (rng.randrange(len(data) + 1), REACH + rng.randrange(-5, 30))))}
        want = _search(path, None, frames, **kw)
        assert _search(path, _opscan, frames, **kw) == want, (i, data.hex(), frames, kw)
        seen["none" if want is None else "found"] += 1
        seen["rows"] += len(want[2]) if want else 0
    assert seen["none"] > 300 and seen["found"] > 300 and seen["rows"] > 3000, seen


@needs_c
def test_the_compiled_search_checks_what_it_is_given():
    rows = bytearray()
    ok = _opscan.fetch_scan(_index(REACH), 1, 0, REACH, 1, (0, 0, rows))
    assert [np.frombuffer(b, np.int64).tolist() for b in ok] == [[REACH], [0]] and len(rows) == 16
    for chunk, base, limit in ((-1, 0, 1), (1, -1, 1), (1, 0, -1), (1, 2**63 - 3, 1)):
        with pytest.raises(ValueError, match=r"negative|past int64"):
            _opscan.fetch_scan(_index(REACH), chunk, base, REACH, limit, None)
    for buf in (np.zeros(8, np.int64), np.zeros((2, 5), np.uint8)):
        with pytest.raises(TypeError):
            _opscan.fetch_scan(buf, 1, 0, REACH, 1, None)
    with pytest.raises(TypeError):
        _opscan.fetch_scan(_index(REACH), 1, 0, REACH, 1, (0, 0, b""))  # rows: a bytearray only
    held = memoryview(rows)
    with pytest.raises(BufferError):  # rows that cannot grow
        _opscan.fetch_scan(_index(REACH), 1, 0, REACH, 1, (0, 0, rows))
    held.release()
    assert _opscan.fetch_scan(_index(REACH), 1, 0, REACH, 0, None) is None  # a limit of none
    buf = b"." * 9 + _index(REACH) + b"." * 9  # only buf[:chunk] is searched, whatever follows it
    for chunk, found in ((9, []), (10, [9 + 100])):
        got = _opscan.fetch_scan(buf, chunk, 100, REACH, 1, None)
        assert np.frombuffer(got[1], np.int64).tolist() == found
