"""Pass 1 of the streaming load (pickles.streaming) for framed pickles, vectorised with numpy.

- `frame_memos`: the memo entries each frame makes, found by walking the opcodes of many frames in lockstep: one
  numpy step advances every frame's cursor by one opcode (and the MEMOIZE after it), so the Python loop runs once per
  opcode of the longest frame, not once per opcode of the file. Exact: the same opcode rules as the sequential scan
  in pickles (`_walk`), which the tests compare it with.
  A compiled walk (`_opscan`, C, built by `pip install` where there is a compiler) gives the same counts one frame
  after another, faster; without it, or with VIZEXPORT_PURE_PYTHON=1 in the environment, numpy walks.
- `fetch_candidates`: which memo entries LONG_BINGET may fetch, and the last frame that may, by a byte search. Every
  real LONG_BINGET is found; a 0x6a byte inside other data only adds a candidate, which keeps that entry a little
  longer. So the stream can release entries without a scan of the frames still to come. In C too (`_opscan`), with
  numpy's search as its reference and fallback, as for the walk.
"""
from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from types import ModuleType

import numpy as np

from ..compiled import compiled

OP = pickle  # opcodes: the pickle module's constants (one byte each)


def _ops(*codes: bytes) -> frozenset[int]:
    return frozenset(c[0] for c in codes)


# The opcodes a streamed pickle may hold (any other: the whole-file load decides), by how their length is given:
NOARG = _ops(OP.MARK, OP.STOP, OP.POP, OP.POP_MARK, OP.DUP, OP.NONE, OP.REDUCE, OP.APPEND, OP.BUILD, OP.DICT,
             OP.EMPTY_DICT, OP.APPENDS, OP.LIST, OP.EMPTY_LIST, OP.OBJ, OP.EMPTY_TUPLE, OP.SETITEM, OP.TUPLE,
             OP.SETITEMS, OP.NEWOBJ, OP.TUPLE1, OP.TUPLE2, OP.TUPLE3, OP.NEWTRUE, OP.NEWFALSE, OP.EMPTY_SET,
             OP.ADDITEMS, OP.FROZENSET, OP.NEWOBJ_EX, OP.STACK_GLOBAL)
FIXED = {OP.BININT1[0]: 1, OP.PROTO[0]: 1, OP.BININT2[0]: 2, OP.BININT[0]: 4, OP.BINFLOAT[0]: 8}  # argument bytes
COUNT1 = _ops(OP.SHORT_BINUNICODE, OP.SHORT_BINBYTES, OP.SHORT_BINSTRING, OP.LONG1)  # a 1-byte length, then data
COUNT4 = _ops(OP.BINUNICODE, OP.BINBYTES, OP.BINSTRING, OP.LONG4)  # a 4-byte length
COUNT8 = _ops(OP.BINUNICODE8, OP.BINBYTES8, OP.BYTEARRAY8)  # an 8-byte length
# (MEMOIZE, BINGET and LONG_BINGET, and FRAME between frames, too)
MEMOIZE, BINGET, LONG_BINGET, FRAME, STOP = (OP.MEMOIZE[0], OP.BINGET[0], OP.LONG_BINGET[0], OP.FRAME[0],
                                             OP.STOP[0])
MARK, APPENDS = OP.MARK[0], OP.APPENDS[0]
TO_MARK = _ops(OP.APPENDS, OP.TUPLE, OP.LIST, OP.DICT, OP.SETITEMS, OP.ADDITEMS, OP.FROZENSET, OP.OBJ, OP.POP_MARK)
FRAME_HEADER = 9  # FRAME and its 8-byte length
BINGET_REACH = 256  # BINGET's one-byte index fetches the first 256 memo entries; LONG_BINGET any
MAX_CANDIDATES = 1_000_000  # distinct fetch candidates a stream may track (real profiles: hundreds)
PAD = 16  # zero bytes after a block: a cursor's lookahead stays inside the buffer
_LEN0, _LEN1, _LEN4, _LEN8, _REFUSED = 0, 1, 2, 3, 4  # an opcode's length: fixed, or + a 1/4/8-byte count


def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Per opcode byte: its length without a counted payload, and how the payload's length is given."""
    length, how = np.zeros(256, np.int64), np.full(256, _REFUSED, np.int8)
    for ops, n, h in ((NOARG, 1, _LEN0), (COUNT1, 2, _LEN1), (COUNT4, 5, _LEN4), (COUNT8, 9, _LEN8)):
        for op in ops:
            length[op], how[op] = n, h
    for op, n in (*FIXED.items(), (BINGET, 1), (LONG_BINGET, 4)):
        length[op], how[op] = 1 + n, _LEN0
    length[MEMOIZE], how[MEMOIZE] = 1, _LEN0
    for op in (OP.PROTO[0], STOP):  # PROTO only opens the stream; STOP only ends it (checked apart)
        how[op] = _REFUSED
    return length, how


_LENGTH, _HOW = _tables()
_LENGTHS, _HOWS = _LENGTH.tolist(), _HOW.tolist()
_WIDTH = {_LEN1: 1, _LEN4: 4, _LEN8: 8}
_COUNT = np.array([{**_WIDTH, _LEN0: 0, _REFUSED: -1}[h] for h in _HOWS], np.int8)  # count bytes; -1: refused


def _compiled() -> ModuleType | None:
    """The C walk with this module's tables, or None (compiled: not built, or VIZEXPORT_PURE_PYTHON set)."""
    module = compiled("vizexport.pickles._opscan")
    if module is not None:
        module.set_tables(_LENGTH, _COUNT)
    return module


_fast = _compiled()  # frame_memos' walk and fetch_candidates' search: the C ones, or None for numpy's


def opcodes(payload: bytes) -> Iterator[tuple[int, int]]:
    """(offset, opcode) of each opcode in a frame's payload, one at a time (for a few frames: `frame_memos` walks
    many at once); it stops at an opcode the stream does not take, and at STOP."""
    i = 0
    while i < len(payload):
        op = payload[i]
        how = _HOWS[op]
        if how == _REFUSED:
            return
        yield i, op
        i += _LENGTHS[op] if how == _LEN0 else \
            _LENGTHS[op] + int.from_bytes(payload[i + 1:i + 1 + _WIDTH[how]], "little")


def frame_offsets(fd: int, size: int) -> list[int] | None:
    """The offset of every FRAME after PROTO, hopping from header to header; None if anything but a frame follows a
    frame (a big payload outside any frame: the stream is then walked one opcode at a time)."""
    out, at = [], 2
    while at < size:
        head = os.pread(fd, FRAME_HEADER, at)
        if len(head) < FRAME_HEADER or head[0] != FRAME:
            return None
        out.append(at)
        at += FRAME_HEADER + int.from_bytes(head[1:], "little")
    return out if at == size else None


def _uint(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The little-endian unsigned integers of `width` bytes at `at`."""
    v = np.zeros(len(at), np.int64)
    for j in reversed(range(width)):
        v = (v << 8) | buf[at + j]
    return v


def frame_memos(fd: int, frames: list[int], ends: list[int], last: bool) -> np.ndarray | None:
    """Memo entries made in each of these consecutive frames (their FRAME offsets and where each ends), or None for
    anything the stream does not take: an opcode the sequential scan refuses, or one that crosses its frame's end.
    `last`: the run ends the stream, whose final byte (STOP) is left out of the walk."""
    start, stop = frames[0], ends[-1]
    raw = os.pread(fd, stop - start, start)
    if len(raw) != stop - start or (last and raw[-1] != STOP):
        return None
    cur = np.asarray(frames, np.int64) - start + FRAME_HEADER
    end = np.asarray(ends, np.int64) - start
    if last:
        end[-1] -= 1
    if _fast is None:
        return _lockstep(raw, cur, end)
    memos = np.empty(len(cur), np.int64)
    return memos if _fast.frame_memos(raw, cur, end, memos) else None


def _lockstep(raw: bytes, cur: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """frame_memos' numpy walk: every frame's cursor (from `cur` to `end`, offsets into `raw`) one opcode per step.
    The reference the C walk (_opscan.c) matches, count bytes past the block reading as PAD's zeros."""
    buf = np.concatenate([np.frombuffer(raw, np.uint8), np.zeros(PAD, np.uint8)])
    memos = np.zeros(len(cur), np.int64)
    which, memo = np.arange(len(cur)), np.zeros(len(cur), np.int64)
    while len(cur):
        op = buf.take(cur)
        how = _HOW.take(op)
        step = _LENGTH.take(op)
        if how.any():
            if (how == _REFUSED).any():
                return None
            for kind, width in ((_LEN1, 1), (_LEN4, 4), (_LEN8, 8)):
                m = how == kind
                if m.any():
                    step[m] += _uint(buf, cur[m] + 1, width)
            if not ((step > 0) & (step < len(buf))).all():  # an 8-byte count past int64, or past the block
                return None
        memo += op == MEMOIZE
        cur += step
        after = buf.take(np.minimum(cur, len(buf) - 1)) == MEMOIZE  # most objects are memoized right after
        after &= cur < end
        memo += after
        cur += after
        done = cur >= end
        if done.any():
            if (cur[done] != end[done]).any():
                return None
            memos[which[done]] = memo[done]
            cur, end, which, memo = cur[~done], end[~done], which[~done], memo[~done]
    return memos


def fetch_candidates(fd: int, size: int, frames: list[int], chunk: int = 64 << 20, late: tuple[int, int] | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Sorted memo indices past BINGET_REACH (the stream keeps the others) that a LONG_BINGET may fetch, and the last
    frame where one may; a superset of the real fetches. None past MAX_CANDIDATES distinct indices (real profiles
    have hundreds: a file made of 0x6a bytes is left to the whole load, which has its own limits).
    `late` (offset, floor): also every place at or past that offset where one may fetch an index of at least `floor`,
    as rows (index, offset); else none. The file is read `chunk` bytes at a time (and the 4 after: an index that
    crosses into the next chunk); the C search (`_opscan`) where built, else numpy's, to the same result."""
    search = _search_numpy if _fast is None else _search_compiled
    return search(fd, size, np.asarray(frames, np.int64), chunk, late)


def _last_frames(found: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The indices of `found` (index -> frame) in order, and their frames."""
    idx = np.fromiter(found, np.int64, len(found))
    order = np.argsort(idx)
    return idx[order], np.fromiter(found.values(), np.int64, len(found))[order]


def _search_numpy(fd: int, size: int, starts: np.ndarray, chunk: int, late: tuple[int, int] | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """fetch_candidates with numpy, a fresh buffer per chunk: the reference the C search (_opscan.c) matches."""
    found: dict[int, int] = {}
    places = [np.empty((0, 2), np.int64)]
    for at in range(0, size, chunk):
        buf = np.frombuffer(os.pread(fd, chunk + 4, at), np.uint8)
        pos = np.flatnonzero(buf[:chunk] == LONG_BINGET)
        pos = pos[pos + 5 <= len(buf)]
        idx = _uint(buf, pos + 1, 4)
        keep = idx >= BINGET_REACH
        idx, pos = idx[keep], pos[keep]
        if late is not None:
            m = (pos + at >= late[0]) & (idx >= late[1])
            places.append(np.stack([idx[m], pos[m] + at], 1))
        # the last position of each index: its first in the reversed arrays
        uniq, first = np.unique(idx[::-1], return_index=True)
        if len(found) + len(uniq) > MAX_CANDIDATES:
            return None
        frame = np.searchsorted(starts, pos[::-1][first] + at, "right") - 1
        found.update(zip(uniq.tolist(), frame.tolist(), strict=True))  # later chunks overwrite: later frames
    return *_last_frames(found), np.concatenate(places)


def _search_compiled(fd: int, size: int, starts: np.ndarray, chunk: int, late: tuple[int, int] | None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """fetch_candidates with _opscan.fetch_scan, chunk by chunk into one buffer (read, not mapped: a mapped file's
    pages would count in the process's RSS). Each call gives its chunk's distinct indices and their last offsets
    (or None, past what MAX_CANDIDATES leaves), and appends the chunk's late rows to `rows`."""
    found: dict[int, int] = {}
    rows = bytearray()
    buf = np.empty(max(chunk, 0) + 4, np.uint8)  # pages only where read: a small file's untouched
    for at in range(0, size, chunk):
        got = _fast.fetch_scan(buf[:_read_into(fd, buf, at)], chunk, at, BINGET_REACH, MAX_CANDIDATES - len(found),
                               None if late is None else (*late, rows))
        if got is None:
            return None
        idx, last = (np.frombuffer(b, np.int64) for b in got)
        frame = np.searchsorted(starts, last, "right") - 1
        found.update(zip(idx.tolist(), frame.tolist(), strict=True))  # later chunks overwrite: later frames
    return *_last_frames(found), np.frombuffer(rows, np.int64).reshape(-1, 2)


def _read_into(fd: int, buf: np.ndarray, at: int) -> int:
    """Bytes read into `buf` from offset `at` (fewer at the file's end)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [buf], at)
    raw = os.pread(fd, len(buf), at)
    buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    return len(raw)
