"""A big pickle's top-level list unpickled batch by batch, its memo kept small; with a second CPU, in two halves at
once. The same safe unpickler as `load` (the package's trust boundary), fed the file's own frames.
"""
from __future__ import annotations

import itertools
import mmap
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import InputError
from ..forks import SERIAL, Executor, Later
from . import SafeUnpickler, open_input, opscan
from .opscan import (
    APPENDS,
    BINGET,
    BINGET_REACH,
    COUNT1,
    COUNT4,
    COUNT8,
    FIXED,
    FRAME,
    FRAME_HEADER,
    LONG_BINGET,
    MARK,
    MEMOIZE,
    NOARG,
    OP,
    STOP,
    TO_MARK,
)

# A profile.pkl is one list. pickle.load keeps every object it made in the unpickler's memo until the end, so a
# 20M-event profile needs ~19 GiB however little of it the reader keeps. `stream` instead hands each APPENDS batch
# to a consumer and drops memo entries nothing will fetch again:
#   pass 1 finds where each FRAME starts, how many memo entries each frame makes, and the last frame that fetches
#     (GET) each entry. A big framed pickle is scanned beside pass 2, in forked workers (opscan: many frames at once),
#     its fetches found first by a byte search (a superset); a small or unframed one by one sequential walk first
#     (`_walk`).
#   pass 2 runs the C unpickler on the same bytes with two changes fed in between frames: the list is replaced by a
#     sink whose `extend` receives each batch, and each entry past its last use is overwritten with a sentinel
#     (LONG_BINPUT on a filled slot keeps the memo's numbering: MEMOIZE numbers by count). Every overwrite adds one
#     reference to the sentinel, so any other reference means a released entry was fetched: the load is abandoned
#     (the caller loads the whole file instead) rather than return wrong data. The objects go, their slots
#     stay: the C unpickler's memo array holds 8 bytes for each index up to the highest made, grown by doubling (a
#     20M-event profile makes ~160M entries); only renumbering the entries in the stream could avoid that.
# A big stream is read in two halves at once, where a second CPU and fork allow: the process that called `stream`
# reads the front, a forked one the back (BACK_SHARE of the bytes). The back starts just after an APPENDS that ends a
# batch of the top-level list (nothing else open on the stack). Its reader first unpickles the stream's first frames
# (_PREFIX: the classes, devices and names that every event fetches are made there), then fills the memo up to the
# cut with a stand-in (MEMOIZE numbers by count, so it waits for pass 1's counts of the front), then reads on from
# the cut; the tail reader it is given turns the items into a part the front's reader merges. An entry made between
# the first frames and the cut that a LONG_BINGET past the cut fetches (pass 1's byte search finds the places, a
# walk of their frames tells a real opcode) must be made there too: the reader unpickles the frames up to it first,
# unless they are more than a _REREAD-th of the front's, when the back half is left to the front. The front
# stops at the cut once it has seen the batch end there (the APPENDS extended the sink) and the back half is read;
# whatever goes wrong in the back half, the front reads on past the cut itself.

_ENDS_LIST = OP.APPENDS + OP.APPEND  # the opcodes a non-empty top-level list ends with, before STOP
_CHUNK = 1 << 22
_KEEP_BELOW = BINGET_REACH  # memo entries BINGET can fetch stay: a few hundred classes and names
_BESIDE_MIN = 64 << 20  # framed pickles this big are scanned beside pass 2; smaller ones first, in one walk
_BLOCKS = (512, 1024)  # frames per scan of pass 1 beside pass 2: small first (pass 2 waits for them), then …
_BLOCK = 2048  # … this many (each numpy step of opscan then moves ~2,000 cursors: fewer would cost more steps)
_LAG = 256  # frames pass 2 may read before pass 1 beside it has counted their memo entries (~16 MB of pickle)
SPLIT_MIN = 32 << 20  # streams this big are read in two halves at once (where fork and a second CPU allow)
BACK_SHARE = 0.47  # the back half's share of the stream's bytes: the halves end together (the back is a bit slower)
_CUT_SEARCH = 8  # frames searched for the batch end to cut at
_FILL = 1 << 22  # memo entries filled per frame of MEMOIZE (the back half's memo below the cut)
_PREFIX = 16  # frames the back half's reader unpickles first: those that make the entries fetched all along
_REREAD = 8  # … or more, to make what the back half fetches: at most this fraction of the front's frames
_WALKS = 256  # frames walked opcode by opcode to tell real fetches past the cut (~16 MB)


class StreamAbort(Exception):
    """Streaming gave up (unsupported stream, consumer declined, or a released memo entry was fetched)."""


class _Plan:
    """What pass 1 learns: where each frame starts, the memo entries each makes (counts come in blocks of frames,
    perhaps while pass 2 runs), and the entries that may be fetched with the last frame that may fetch each."""

    def __init__(self, size: int, frames: list[int], fetched: np.ndarray, last: np.ndarray,
                 counts: Iterator[tuple[int, np.ndarray | None]], lag: int = 0,
                 shared: _Counts | None = None, split: _Split | None = None) -> None:
        self.size, self.frames, self.fetched, self.last, self.lag = size, frames, fetched, last, lag
        self.shared, self.split = shared, split  # the counts again for a reader of the back half, and its cut
        self.counts, self.early = counts, {}  # blocks (first frame, memo counts) in any order; those that came early
        self.memo_at = [0]  # memo entries made before each frame counted so far
        self.due: dict[int, list[int]] = {}  # frame → entries made earlier that it is the last to fetch

    def _count(self, j: int) -> None:
        """Wait until frame j's memo entries are counted."""
        while len(self.memo_at) <= j + 1:
            block = self.early.pop(len(self.memo_at) - 1, None)
            if block is None:
                first, memos = next(self.counts)
                if memos is None:
                    raise StreamAbort("pass 1 found an opcode it does not take")
                self.early[first] = memos
                continue
            self.memo_at += (self.memo_at[-1] + np.cumsum(block)).tolist()
        if self.memo_at[j + 1] >= 1 << 32:
            raise StreamAbort("more memo entries than LONG_BINPUT can name")

    def releases(self, k: int) -> np.ndarray:
        """Memo entries to drop once frame k has been read: those made in frame k - lag that no later frame fetches,
        and those last fetched in frame k."""
        out = [np.asarray(self.due.pop(k, ()), np.int64)]
        j = k - self.lag
        if j >= 0:
            self._count(j)
            a, b = max(self.memo_at[j], _KEEP_BELOW), max(self.memo_at[j + 1], _KEEP_BELOW)
            lo, hi = np.searchsorted(self.fetched, [a, b])
            later = self.last[lo:hi] > k
            made = np.ones(b - a, bool)
            for idx, f in zip(self.fetched[lo:hi][later].tolist(), self.last[lo:hi][later].tolist(), strict=True):
                made[idx - a] = False
                self.due.setdefault(f, []).append(idx)
            out.append(np.flatnonzero(made) + a)
        return np.concatenate(out)

    def memos_before(self, k: int) -> int:
        """Memo entries made before frame k (waiting for pass 1 to count them)."""
        if k:
            self._count(k - 1)
        return self.memo_at[k]

    def finish(self) -> None:
        """Take pass 1's last counts (its workers then exit of themselves; stopping them costs more)."""
        for _ in self.counts:
            pass

    def close(self) -> None:
        self.counts.close()  # stops pass 1's workers


class _Counts:
    """Pass 1's memo counts per frame in memory shared with forked processes: pass 1's workers write them as they
    go, so a reader of the back half, forked before they are done, can take them too (their results go to the
    process that started them)."""

    PENDING, DONE, REFUSED = 0, 1, 2
    POLL = 0.002  # seconds between looks for counts not yet written

    def __init__(self, n: int) -> None:
        self.map = mmap.mmap(-1, 9 * n)  # anonymous, so shared with the processes forked later
        self.memos = np.frombuffer(self.map, np.int64, n)
        self.state = np.frombuffer(self.map, np.int8, n, 8 * n)

    def put(self, a: int, b: int, memos: np.ndarray | None) -> None:
        if memos is not None:
            self.memos[a:b] = memos
        self.state[a:b] = self.DONE if memos is not None else self.REFUSED  # after the counts: a reader sees both

    def blocks(self) -> Iterator[tuple[int, np.ndarray | None]]:
        """(first frame, counts) in frame order, as pass 1 writes them; (frame, None) where it refused a frame."""
        at, n = 0, len(self.memos)
        while at < n:
            if self.state[at] == self.PENDING:
                time.sleep(self.POLL)
                continue
            if self.state[at] == self.REFUSED:
                yield at, None
                return
            rest = np.flatnonzero(self.state[at:] != self.DONE)
            end = n if not len(rest) else at + int(rest[0])
            yield at, self.memos[at:end].copy()
            at = end


def _plan(f: Any, size: int, share: bool = False, executor: Executor = SERIAL) -> _Plan | None:
    """Pass 1 for this stream (see above). None: not a protocol 4/5 top-level list we can stream. `share`: keep its
    counts where a forked process can read them too."""
    f.seek(0)
    head = f.read(16)
    framed = head[2:3] == OP.FRAME  # a list opens the first frame, unless a big payload comes first (no frame yet)
    if len(head) < 4 or head[:1] != OP.PROTO or head[1] not in (4, 5) or \
            head[11 if framed else 2:][:2] != OP.EMPTY_LIST + OP.MEMOIZE:
        return None
    fd = f.fileno()
    frames = opscan.frame_offsets(fd, size) if framed and size >= _BESIDE_MIN else None
    if frames is not None:
        ends = [*frames[1:], size]
        blocks, a = [], 0
        for n in itertools.chain(_BLOCKS, itertools.repeat(_BLOCK)):
            if a >= len(frames):
                break
            blocks.append((a, min(a + n, len(frames))))
            a += n
        # a split needs the counts made in worker processes (the back half's reader waits for them)
        split = _split(fd, size, frames, ends) if share and len(blocks) > 1 else None
        shared = _Counts(len(frames)) if split is not None else None
        counts = executor.started_map(partial(_count_block, fd, frames, ends, shared), blocks)
        try:
            fetches = opscan.fetch_candidates(fd, size, frames, late=split and (frames[split.cut[0]], split.floor))
        except BaseException:
            counts.close()
            raise
        if fetches is None:
            counts.close()
            return None
        if split is not None:
            split.late = fetches[2]
        return _Plan(size, frames, *fetches[:2], counts, _LAG, shared, split)
    walked = _walk(fd, size, framed)
    if walked is None or not walked.stopped or not walked.frames or walked.frames[0] != 2:
        return None
    fetches = {idx: last for idx, last in walked.fetches.items() if idx >= _KEEP_BELOW}
    fetched = np.fromiter(sorted(fetches), np.int64, len(fetches))
    last = np.fromiter((fetches[i] for i in fetched.tolist()), np.int64, len(fetches))
    counts = (block for block in [(0, np.asarray(walked.memos, np.int64))])  # a generator, as started_map's
    return _Plan(size, walked.frames, fetched, last, counts)


def _count_block(fd: int, frames: list[int], ends: list[int], shared: _Counts | None, block: tuple[int, int]
                 ) -> tuple[int, np.ndarray | None]:
    a, b = block
    memos = opscan.frame_memos(fd, frames[a:b], ends[a:b], b == len(frames))
    if shared is not None:
        shared.put(a, b, memos)
    return a, memos


@dataclass
class _Walked:
    """What the sequential pass 1 learnt: frame offsets, the memo entries made in each, the fetches (memo index → last
    frame), and whether the stream's STOP was seen where a list ends (else the full load reads it)."""

    frames: list[int] = field(default_factory=list)
    memos: list[int] = field(default_factory=list)
    fetches: dict[int, int] = field(default_factory=dict)
    stopped: bool = False


def _walk(fd: int, size: int, framed: bool) -> _Walked | None:
    """Pass 1 one opcode at a time: the stream after PROTO (small or unframed pickles, and the reference the tests
    compare opscan with)."""
    walked = _Walked(frames=[] if framed else [2])  # unframed: the stream's start is frame 0 all the same
    frames, memos, fetches = walked.frames, walked.memos, walked.fetches
    frame = len(frames) - 1  # the frame being read
    noarg, fixed, count1 = NOARG, FIXED, COUNT1
    base, buf, i, memo = 2, os.pread(fd, _CHUNK, 2), 0, 0
    limit = _limit(base, buf, size)
    while True:
        if i >= limit:
            if base + i >= size:
                break
            buf, base, i, limit = _read_on(fd, buf, base, i, size)
            if not buf:
                return None  # truncated: the full load reports it
        op = buf[i]
        if op == MEMOIZE:  # the commonest opcodes first
            memo += 1
            i += 1
            continue
        if op == BINGET:  # entries below 256 (classes, first names) are never released, so not tracked
            i += 2
        elif op in noarg:
            if op == STOP:  # a list ends with APPENDS or APPEND (or is empty): else not `stopped`, a full load
                walked.stopped = buf[i - 1] in _ENDS_LIST or base + i == (13 if framed else 4)
                break
            i += 1
        elif op in count1:
            i += 2 + buf[i + 1]
        elif op == LONG_BINGET:
            fetches[int.from_bytes(buf[i + 1:i + 5], "little")] = frame
            i += 5
        elif op in fixed:
            i += 1 + fixed[op]
        elif op == FRAME:
            if frames:
                memos.append(memo)
            frames.append(base + i)
            frame, memo, i = frame + 1, 0, i + FRAME_HEADER
        elif op in COUNT4 or op in COUNT8:
            buf, base, i, limit = _past_payload(fd, (buf, base, i), 4 if op in COUNT4 else 8, size)
        else:
            return None  # PUT/GET by text, persistent ids, extensions, out-of-band buffers: use the full load
        if buf[i] == MEMOIZE:  # most objects are memoized right after they are made (the margin keeps i inside)
            memo += 1
            i += 1
    if frames:
        memos.append(memo)
    return walked


def _limit(base: int, buf: bytes, size: int) -> int:
    """Where _walk reads the buffer up to: any short opcode kept whole in it (a margin), except at the stream's end."""
    return min(len(buf) - 300 if base + len(buf) < size else len(buf), size - base)


def _read_on(fd: int, buf: bytes, base: int, i: int, size: int) -> tuple[bytes, int, int, int]:
    """_walk's buffer from position i on, topped up from the file: (buffer, its offset, position 0, its limit)."""
    buf, base = buf[i:] + os.pread(fd, _CHUNK, base + len(buf)), base + i
    return buf, base, 0, _limit(base, buf, size)


def _past_payload(fd: int, at: tuple[bytes, int, int], width: int, size: int) -> tuple[bytes, int, int, int]:
    """_walk's (buffer, its offset, position, limit) past the opcode at `at` (buffer, offset, position) with a
    `width`-byte length and its payload: a big payload is skipped on disk."""
    buf, base, i = at
    stop = base + i + 1 + width + int.from_bytes(buf[i + 1:i + 1 + width], "little")
    if stop - base > len(buf):
        buf, base = os.pread(fd, _CHUNK, stop), stop
        return buf, base, 0, _limit(base, buf, size)
    return buf, base, stop - base, _limit(base, buf, size)


def _frame(payload: bytes) -> bytes:
    return OP.FRAME + len(payload).to_bytes(8, "little") + payload


def _puts(idxs: np.ndarray) -> bytes:
    """LONG_BINPUT for each index."""
    out = np.empty((len(idxs), 5), np.uint8)
    out[:, 0] = OP.LONG_BINPUT[0]
    out[:, 1:] = idxs.astype("<u4").view(np.uint8).reshape(-1, 4)
    return out.tobytes()


def _pids(*objs: Any) -> tuple[dict[str, Any], list[bytes]]:
    """Unguessable persistent ids for objects pass 2 pushes, and the PERSID opcode that pushes each."""
    names = [secrets.token_hex(16) for _ in objs]
    return dict(zip(names, objs, strict=True)), [OP.PERSID + n.encode() + b"\n" for n in names]


_START = OP.PROTO + b"\x04"


class _Feed:
    """The byte stream of pass 2 as the C unpickler reads it, taken piece by piece from `pieces`. The unpickler asks
    for a piece only once it has run every opcode before it (it reads a frame whole, and no further): the code that
    makes the pieces sees what the earlier ones did."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces, self.buf, self.pos = pieces, b"", 0

    def _next(self) -> bool:
        for piece in self.pieces:
            if piece:
                self.buf, self.pos = piece, 0
                return True
        return False

    def read(self, n: int = -1) -> bytes:
        out = []
        while n != 0 and (self.pos < len(self.buf) or self._next()):
            take = len(self.buf) - self.pos if n < 0 else min(n, len(self.buf) - self.pos)
            out.append(self.buf if take == len(self.buf) and self.pos == 0 else self.buf[self.pos:self.pos + take])
            self.pos += take
            n -= take if n > 0 else 0
        return out[0] if len(out) == 1 else b"".join(out)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def readline(self) -> bytes:
        out = []
        while self.pos < len(self.buf) or self._next():
            j = self.buf.find(b"\n", self.pos)
            stop = len(self.buf) if j < 0 else j + 1
            out.append(self.buf[self.pos:stop])
            self.pos = stop
            if j >= 0:
                break
        return b"".join(out)


class _Released:
    """What a released memo entry holds (or one below the back half's cut): nothing may ever reference it."""


class _Watch:
    """Releases memo entries (LONG_BINPUT of a `_Released`), and checks that no released entry was fetched: each
    overwrite adds one reference to the stand-in, so any other reference means one was (the load is then
    abandoned rather than return wrong data). `held`: the stand-in released entries get, then any other stand-in
    that fills entries which are never overwritten."""

    def __init__(self, push: bytes, *held: _Released) -> None:
        self.push, self.held = push, held  # push: the PERSID that pushes held[0]
        self.refs: list[int] = []

    def expect(self, fills: int = 0) -> None:
        """Take the references there are now (before any release), plus `fills` to the last stand-in held (a call's
        own arguments would count: this takes none)."""
        self.refs = [sys.getrefcount(x) for x in self.held]
        self.refs[-1] += fills

    def __call__(self, plan: _Plan, k: int, keep_below: int = 0) -> bytes:
        """The pieces that release what the plan releases once frame k is read (entries below `keep_below` kept)."""
        released = plan.releases(k)
        if keep_below:
            released = released[released >= keep_below]
        self.check(len(released))
        return _frame(self.push + _puts(released) + OP.POP) if len(released) else b""

    def check(self, n: int = 0) -> None:
        """Raise if a released entry was fetched; then count n more releases."""
        if [sys.getrefcount(x) for x in self.held] != self.refs:
            raise StreamAbort("a released memo entry was fetched again")
        self.refs[0] += n


def _read_frame(fd: int, frames: list[int], size: int, k: int, start: int | None = None) -> bytes:
    """Frame k's bytes from `start` (by default its FRAME header) to its end."""
    start = frames[k] if start is None else start
    return os.pread(fd, (frames[k + 1] if k + 1 < len(frames) else size) - start, start)


def _frames(f: Any, plan: _Plan, first: int, stop: int, watch: _Watch | None = None, keep_below: int = 0
            ) -> Iterator[bytes]:
    """Frames first…stop-1 of the stream, the list's EMPTY_LIST left out (a sink is pushed instead), each after the
    releases due once the frame before it is read (none without `watch`)."""
    for k in range(first, stop):
        if k and watch is not None:
            yield watch(plan, k - 1, keep_below)
        data = _read_frame(f.fileno(), plan.frames, plan.size, k)
        if k == 0:
            data = _frame(data[FRAME_HEADER + 1:]) if data[:1] == OP.FRAME else data[1:]
        yield data


class _Sink:
    """Stands in for the top-level list: the C unpickler calls extend (APPENDS) or append (APPEND) on it. Hands the
    items on in batches of at least BATCH (pickle's are 1,000): the consumer's cost per batch is paid less often."""

    BATCH = 16_000

    def __init__(self, consume: Any) -> None:
        self.consume, self.items, self.calls, self.n = consume, [], 0, 0

    def extend(self, items: list) -> None:
        self.calls += 1
        self.n += len(items)
        self.items += items
        if len(self.items) >= self.BATCH:
            self.flush()

    def append(self, item: Any) -> None:
        self.extend([item])

    def flush(self) -> None:
        if self.items:
            items, self.items = self.items, []
            self.consume(items)


class _StreamUnpickler(SafeUnpickler):
    def __init__(self, file: Any, pids: dict[str, Any], budget: int) -> None:
        super().__init__(file, budget)
        self.pids = pids

    def persistent_load(self, pid: Any) -> Any:
        obj = self.pids.get(pid) if isinstance(pid, str) else None
        if obj is None:
            raise InputError("refused persistent id in pickle")
        return obj


class TailReader(Protocol):
    """What reads a stream's back half in a forked process: its items in batches, then a part to send back."""

    def feed(self, items: list) -> None: ...

    def part(self) -> Any: ...


def stream(path: str | Path, consume: Callable[[list], None], tail: Callable[[], TailReader] | None = None,
           min_front: int = 0, executor: Executor = SERIAL) -> tuple[set[str], Any]:
    """Unpickle the top-level list in `path` batch by batch: `consume(items)` gets each batch (a list) in order.

    With `tail`, a big stream's back half may be read at the same time in a process `executor` forks (and a big
    framed stream is scanned in its workers), by the TailReader tail() makes: `consume` then gets the items before
    it (at least `min_front` of them), and its part comes back. Returns the tinygrad classes named, and that part
    (None when the whole list went to `consume`). Raises StreamAbort when the file cannot be streamed (the caller
    then uses `load`), InputError (naming the file) for a refused global, as `load` does.
    """
    f, size = open_input(Path(path))
    with f:
        split = tail is not None and size >= SPLIT_MIN and executor.parallel
        try:
            plan = _plan(f, size, split, executor)
        except IndexError:  # an opcode cut off by the end of the file
            plan = None
        if plan is None:
            raise StreamAbort("not a streamable list")
        back: list[Later] = []
        try:
            cut = plan.split.cut if plan.split is not None else None
            if cut is not None:
                back.append(executor.forked(partial(_read_back, path, plan, tail)))
            out = _unpickle(path, f, size, plan, consume, cut, back, min_front)
        except BaseException:
            plan.close()
            for b in back:
                b.stop()
            raise
        plan.finish()
        return out


@dataclass
class _Split:
    """Where a stream's back half starts (`cut`: its frame, its offset, the memo entries that frame makes before
    it), the frames `prefix` that make the first `floor` memo entries (the back half's reader unpickles them), and
    `late`: each place past the cut where a LONG_BINGET may fetch an entry made after them, as rows (index,
    offset). The back half may only fetch entries made before the cut from the prefix: pass 1's byte search finds
    places that may fetch others, and the back half's reader checks each is no real opcode."""

    cut: tuple[int, int, int]
    prefix: int
    floor: int
    late: np.ndarray = field(default_factory=lambda: np.empty((0, 2), np.int64))


def _split(fd: int, size: int, frames: list[int], ends: list[int]) -> _Split | None:
    """Where a stream splits into halves read at once, None where it does not."""
    cut = _cut(fd, size, frames)
    if cut is None:
        return None
    prefix = min(_PREFIX, cut[0])
    memos = opscan.frame_memos(fd, frames[:prefix], ends[:prefix], False)
    floor = int(memos.sum()) if memos is not None else 0
    return _Split(cut, prefix, floor) if floor >= BINGET_REACH else None


def _cut(fd: int, size: int, frames: list[int]) -> tuple[int, int, int] | None:
    """Where the back half starts: just after an APPENDS that ends a batch of the top-level list, near
    1 - BACK_SHARE of the stream. As (its frame, its offset, the memo entries that frame makes before it).

    Found by walking the opcodes of a few frames, counting the marks open: the list's own APPENDS leaves the fewest
    (none), and is taken where two batch ends in the walk agree. A wrong guess costs only time: the front checks the
    APPENDS it stops after extends the list, and the back half's reader finds any mark left open."""
    first = int(np.searchsorted(frames, size * (1 - BACK_SHARE)))
    if not 0 < first < len(frames) - 1:
        return None
    best, seen, depth = None, 0, 0
    for k in range(first, min(first + _CUT_SEARCH, len(frames))):
        start = frames[k] + FRAME_HEADER
        made = 0
        for i, op in opscan.opcodes(_read_frame(fd, frames, size, k, start)):
            if op == MEMOIZE:
                made += 1
            elif op == MARK:
                depth += 1
            elif op in TO_MARK:
                depth -= 1
                if op == APPENDS and (best is None or depth < best[0]):
                    best, seen = (depth, k, start + i + 1, made), 1
                elif op == APPENDS and depth == best[0]:
                    seen += 1
    return best[1:] if best is not None and seen > 1 else None


def _last_fetched(fd: int, plan: _Plan, late: np.ndarray) -> int:
    """The highest memo index among rows (index, offset) whose offset holds a real LONG_BINGET (not bytes of
    another opcode's data), or -1. Raises StreamAbort where that takes walking more than _WALKS frames."""
    ops: dict[int, set[int]] = {}  # frame → offsets of its LONG_BINGETs
    for idx, at in late[np.argsort(-late[:, 0], kind="stable")].tolist():  # the highest index first
        k = int(np.searchsorted(plan.frames, at, "right")) - 1
        if k not in ops:
            if len(ops) == _WALKS:
                raise StreamAbort("too many places to tell real fetches at")
            start = plan.frames[k] + FRAME_HEADER
            ops[k] = {start + i for i, op in opscan.opcodes(_read_frame(fd, plan.frames, plan.size, k, start))
                      if op == LONG_BINGET}
        if at in ops[k]:
            return idx
    return -1


def _unpickle(path: str | Path, f: Any, size: int, plan: _Plan, consume: Any, cut: tuple[int, int, int] | None,
              back: list[Later], min_front: int = 0) -> tuple[set[str], Any]:
    """Pass 2 of the front (or the whole stream): the C unpickler on the frames, with the releases pass 1 planned
    fed in between; it stops at the cut if the back half was read."""
    sink, released = _Sink(consume), _Released()
    pids, (push_sink, push_released) = _pids(sink, released)
    watch = _Watch(push_released, released)
    watch.expect()
    part: list = []
    u = _StreamUnpickler(_Feed(_front(f, plan, sink, push_sink, watch, cut, back, part, min_front)), pids, size)
    try:
        if u.load() is not sink:  # the list was inside another object (e.g. a rewrites tuple)
            raise StreamAbort("the pickle is not one list")
        sink.flush()
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except (StreamAbort, MemoryError):
        raise
    except Exception as e:  # let the full load report a corrupt file in its own words
        raise StreamAbort(f"{type(e).__name__}: {e}") from None
    watch.check()
    if not part:
        return u.classes, None
    classes, got = part[0]
    return u.classes | classes, got


def _front(f: Any, plan: _Plan, sink: _Sink, push_sink: bytes, watch: _Watch, cut: tuple[int, int, int] | None,
           back: list[Later], part: list, min_front: int) -> Iterator[bytes]:
    """The pieces of pass 2 for the stream up to the cut, then STOP if the back half was read (its part goes to
    `part`), else on to the end."""
    yield _START + _frame(push_sink)
    k = cut[0] if cut is not None else len(plan.frames)
    yield from _frames(f, plan, 0, k, watch)
    if cut is None:
        return
    yield watch(plan, k - 1)
    data, i = _read_frame(f.fileno(), plan.frames, plan.size, k), cut[1] - plan.frames[k]
    yield _frame(data[FRAME_HEADER:i - 1])
    calls = sink.calls
    yield _frame(data[i - 1:i])  # the APPENDS
    pending = back.pop()
    if sink.calls > calls and sink.n >= min_front:  # it extended the list: nothing else open, the back half follows
        got = _result(pending)
        if got is not None:
            part.append(got)
            yield OP.STOP
            return
    else:
        pending.stop()
    yield _frame(data[i:])
    yield from _frames(f, plan, k + 1, len(plan.frames), watch)


def _result(pending: Later) -> Any:
    try:
        return pending()
    except Exception:  # the pool failed to send it: the front reads on
        return None


def _read_back(path: str | Path, plan: _Plan, tail: Callable[[], TailReader]) -> tuple[set[str], Any] | None:
    """The back half, read in a forked process: the classes it names and the tail reader's part, or None if it
    cannot be read apart (the front then reads on, and reports what is wrong with those bytes)."""
    try:
        with open_input(Path(path))[0] as f:
            return _back(f, plan, tail)
    except Exception:
        return None


def _back(f: Any, plan: _Plan, tail: Callable[[], TailReader]) -> tuple[set[str], Any] | None:
    split = plan.split
    assert plan.shared is not None and split is not None
    mine = _Plan(plan.size, plan.frames, plan.fetched, plan.last, plan.shared.blocks(), plan.lag)
    (k, at, made), prefix = split.cut, split.prefix
    start = mine.memos_before(k) + made  # memo entries made before the cut
    late = split.late
    late = late[(late[:, 0] < start) & (late[:, 1] > at)]  # places past the cut that may fetch from before it
    if len(late):  # each real one's entry must be made by the frames the reader unpickles first
        prefix = max(prefix, int(np.searchsorted(mine.memo_at, _last_fetched(f.fileno(), plan, late), "right")))
        if prefix > k // _REREAD:
            return None
    reader = tail()
    discard, sink, released, filler = _Sink(lambda items: None), _Sink(reader.feed), _Released(), _Released()
    pids, (push_discard, push_sink, push_released, push_filler) = _pids(discard, sink, released, filler)
    fills = start - mine.memo_at[prefix]
    watch = _Watch(push_released, released, filler)
    watch.expect(fills)

    def pieces() -> Iterator[bytes]:
        yield _START + _frame(push_discard)
        yield from _frames(f, mine, 0, prefix)
        yield OP.NONE + OP.STOP  # (a mark may be open: STOP takes the None)
        yield _START + _frame(push_filler)
        for a in range(0, fills, _FILL):
            yield _frame(OP.MEMOIZE * min(_FILL, fills - a))
        yield _frame(OP.POP + push_sink)
        yield _frame(_read_frame(f.fileno(), plan.frames, plan.size, k, at))
        yield from _frames(f, mine, k + 1, len(plan.frames), watch, start)

    u = _StreamUnpickler(_Feed(pieces()), pids, plan.size)
    u.load()  # the prefix: only the memo entries it makes are kept
    if u.load() is not sink:
        return None
    sink.flush()
    watch.check()
    return u.classes, reader.part()
