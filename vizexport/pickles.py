"""The only place that unpickles. tinygrad classes become inert stand-ins; every other global is refused.

Nothing named by the pickle is ever imported or called, except the few stdlib constructors in SAFE_GLOBALS, and
those only with plain arguments of bounded size. Stand-ins keep what the pickle gave them: the BUILD state as
attributes, REDUCE arguments in `_args`; their classes cannot be changed by the pickle. A length field that asks
for more bytes than the file has left is refused before anything that size is made. Only regular files are read.
"""
from __future__ import annotations

import builtins
import io
import itertools
import os
import pickle
import reprlib
import secrets
import stat
import sys
from collections.abc import Generator
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from . import opscan
from .errors import InputError
from .forks import started_map
from .opscan import (
    BINGET,
    BINGET_REACH,
    COUNT1,
    COUNT4,
    COUNT8,
    FIXED,
    FRAME,
    FRAME_HEADER,
    LONG_BINGET,
    MEMOIZE,
    NOARG,
    OP,
    STOP,
)


class StandInType(type):
    """The type of the stand-in classes: a pickle can make instances of them, never change them (BUILD with slot
    state on a class object would otherwise set attributes on the class every later load shares)."""

    def __setattr__(cls, name: str, value: Any) -> None:
        raise InputError(f"refused: the pickle sets {name!r} on the class {cls.__name__}")

    def __delattr__(cls, name: str) -> None:
        raise InputError(f"refused: the pickle deletes {name!r} from the class {cls.__name__}")


class Stub(metaclass=StandInType):
    """Base of all stand-ins, made per qualified name by `stub_class`.

    No __new__ or __setstate__ of our own: NEWOBJ and BUILD (dict state, or (dict, slots)) then run in C, which is
    what makes loading millions of events as fast as with tinygrad's own dataclasses.
    """

    _qualname = "?"
    _args: tuple = ()

    def __init__(self, *args: Any) -> None:  # REDUCE: cls(*args); NEWOBJ with () skips __init__
        self._args = args

    def __repr__(self) -> str:
        return brief(self)


class EnumValue(int, metaclass=StandInType):
    """An enum member pickled by value (Ops, AxisType, ...): the integer, plus the enum's class name."""

    _enum = "?"

    def __repr__(self) -> str:
        return f"{self._enum}({int(self)})"


class FloatStub(float, metaclass=StandInType):
    """A float subclass such as ConstFloat: NEWOBJ(cls, (value,)) plus slot state."""

    _qualname = "?"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            self.__dict__.update(state[1])


ENUMS = {"Ops", "UOps", "AxisType", "AddrSpace", "OptOps", "BinaryOps", "UnaryOps", "TernaryOps", "ReduceOps",
         "MetaOps", "BufferOps", "LoadOps"}
FLOATS = {"ConstFloat"}

MAX_PLAIN_DEPTH = 4  # containers nested in an allowed constructor's arguments (a frozenset of tuples is 2)
MIN_BUDGET = 1 << 20  # what allowed constructors may make or walk: the file's size, and at least this
# tinygrad pickles every timestamp as Decimal(text): the exact text is kept (readers parse it), which loads 30 %
# faster and takes half the memory of Decimal objects. str.__str__ (in C: millions of calls) takes a text and
# nothing else: a Decimal of a shared list turned to text would take minutes and gigabytes.
DECIMAL_TEXT = str.__str__


_SCALARS = frozenset((type(None), bool, int, float, complex, str, bytes))
_CONTAINERS = frozenset((tuple, list, set, frozenset, dict))


def check_plain(name: str, args: tuple, budget: int) -> None:
    """Raise unless `args` are plain values (scalars, or containers of them a few levels deep) of at most `budget`
    items and bytes in all, counting a value shared twice twice: so the call can neither run long (hashing a shared
    tuple tree) nor allocate much (bytes(3 << 30) is 38 bytes of pickle)."""
    cost, stack = 0, [(a, 0) for a in args]
    while stack:
        x, depth = stack.pop()
        t = type(x)
        cost += len(x) if t in (str, bytes) else abs(x) if t is int and name in ("bytes", "bytearray") else 1
        if cost > budget:
            raise InputError(f"refused {name}(…): its arguments ask for more than {budget:,} items or bytes")
        if t in _SCALARS:
            continue
        if t not in _CONTAINERS or depth >= MAX_PLAIN_DEPTH:
            raise InputError(f"refused {name}() of {t.__name__} (only plain values are allowed)")
        stack.extend((v, depth + 1) for v in (x if t is not dict else (v for kv in x.items() for v in kv)))


def _guarded(name: str, fn: Any, budget: int) -> Any:
    def call(*args: Any) -> Any:
        check_plain(name, args, budget)
        return fn(*args)
    call.__name__ = name
    return call


BUILTINS = ("set", "frozenset", "slice", "complex", "bytearray", "bytes", "tuple", "list", "dict", "int", "float",
            "str", "bool")  # protocol 2/3 pickles build these with REDUCE
SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("decimal", "Decimal"): DECIMAL_TEXT, ("_pydecimal", "Decimal"): DECIMAL_TEXT,
    **{("builtins", n): getattr(builtins, n) for n in BUILTINS}}
# harmless stdlib objects seen inside old pickles (0.10.0-0.10.2 UPat state holds itertools.repeat): kept as stand-ins
INERT_GLOBALS = {("itertools", "repeat")}


class _Brief(reprlib.Repr):
    """repr bounded in depth, width and length: a pickle's shared structures would otherwise print for minutes."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother = 3, 60, 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 6

    def repr1(self, x: Any, level: int) -> str:
        if isinstance(x, (bytes, bytearray)):
            return f"<{len(x)} bytes>"
        if isinstance(x, Stub):
            if level <= 0:
                return f"<{x._qualname}>"
            parts = [self.repr1(a, level - 1) for a in x._args[:self.maxtuple]]
            parts += [f"{k}={self.repr1(v, level - 1)}" for k, v in list(x.__dict__.items())[:self.maxdict]
                      if k != "_args"]
            return f"<{x._qualname}({', '.join(parts)})>"
        return super().repr1(x, level)


_BRIEF = _Brief()
BRIEF_MAX = 400


def brief(x: Any) -> str:
    """A short, bounded text of any unpickled value (for names that are not texts, and error messages)."""
    text = _BRIEF.repr(x)
    return text if len(text) <= BRIEF_MAX else text[:BRIEF_MAX - 1] + "…"

_classes: dict[str, type] = {}


def stub_class(module: str, name: str) -> type:
    """The stand-in class for `module.name`, made once (so isinstance and identity checks work across loads)."""
    qual = f"{module}.{name}"
    cls = _classes.get(qual)
    if cls is None:
        base = EnumValue if name in ENUMS else FloatStub if name in FLOATS else Stub
        attrs: dict[str, Any] = {"_qualname": qual, "__module__": "vizexport.stubs"}
        if base is EnumValue:
            attrs["_enum"] = name
        cls = _classes[qual] = StandInType(name, (base,), attrs)
    return cls


class SafeUnpickler(pickle.Unpickler):
    """Resolves globals to stand-ins or SAFE_GLOBALS; records the tinygrad classes named (a schema fingerprint).
    `budget`: what an allowed constructor may make or walk (items and bytes), e.g. the file's size."""

    def __init__(self, file: Any, budget: int = MIN_BUDGET) -> None:
        super().__init__(file)
        self.classes: set[str] = set()
        self.budget = max(budget, MIN_BUDGET)

    def find_class(self, module: str, name: str) -> Any:
        if module == "tinygrad" or module.startswith("tinygrad.") or (module, name) in INERT_GLOBALS:
            self.classes.add(f"{module}.{name}")
            return stub_class(module, name)
        fn = SAFE_GLOBALS.get((module, name))
        if fn is None:
            raise InputError(f"refused global {module}.{name} (vizexport only loads tinygrad data)")
        return fn if module != "builtins" else _guarded(name, fn, self.budget)

    def persistent_load(self, pid: Any) -> Any:
        raise InputError("refused persistent id in pickle")


def qualname(obj: Any) -> str:
    """Qualified tinygrad class name of a stand-in ('' for anything else)."""
    return getattr(type(obj), "_qualname", "")


def class_name(obj: Any) -> str:
    return qualname(obj).rsplit(".", 1)[-1]


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_input(path: Path) -> tuple[io.BufferedReader, int]:
    """`path` opened for reading, and its size; only a regular file (a fifo with no writer would block forever,
    a device never ends). Raises InputError naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a fifo opens without waiting for a writer
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = next((what for test, what in _KINDS if test(st.st_mode)), "not a regular file")
        raise InputError(f"{path}: is {kind}, not a pickle file")
    return os.fdopen(fd, "rb", buffering=1 << 20), st.st_size


class BoundedReader:
    """The file as the C unpickler reads it. A read of more bytes than the file has left comes from a corrupt or
    cut length field (a pickle that declares a 3 GiB bytearray is 20 bytes): refused before anything that size is
    made. No `readinto` or `peek`: the unpickler then reads a length before it allocates, and into nothing of its
    own that an error could leave exported (CPython then prints 'deallocated bytearray object has exported buffers')."""

    def __init__(self, f: io.BufferedReader, size: int) -> None:
        self.f, self.left = f, size - f.tell()

    def read(self, n: int = -1) -> bytes:
        if n > self.left:
            raise EOFError(f"a field of {n:,} bytes where {self.left:,} remain")
        data = self.f.read(n)
        self.left -= len(data)
        return data

    def readline(self) -> bytes:
        line = self.f.readline()
        self.left -= len(line)
        return line


def load(path: str | Path) -> tuple[Any, set[str]]:
    """Unpickle `path` safely; return the object and the tinygrad classes it named.

    Raises InputError (one line, naming the file) for anything wrong with the file.
    """
    path = Path(path)
    f, size = open_input(path)
    with f:
        head = f.read(2)
        if not head:
            raise InputError(f"{path}: empty file")
        if head[:1] != pickle.PROTO or len(head) < 2 or head[1] < 2:
            raise InputError(f"{path}: not a pickle (no protocol 2+ header; tinygrad writes protocol 4 or 5)")
        f.seek(0)
        try:
            u = SafeUnpickler(BoundedReader(f, size), budget=size)
            # CPython prints some failures itself ('deallocated bytearray object has exported buffers' after a
            # refused allocation): the error raised here says what went wrong, in one line
            with redirect_stderr(io.StringIO()):
                return u.load(), u.classes
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
        except EOFError as e:
            why = f": {e}" if str(e) else ""
            raise InputError(f"{path}: truncated pickle (ends before its STOP opcode{why})") from None
        except RecursionError:
            raise InputError(f"{path}: pickle nests too deeply") from None
        except MemoryError:
            raise InputError(f"{path}: the pickle asks for more memory than it may have (corrupt or crafted)") from None
        except Exception as e:  # any other opcode-level failure means a corrupt stream
            raise InputError(f"{path}: corrupt pickle ({type(e).__name__}: {brief(str(e))})") from None


# --- streaming: a top-level list unpickled batch by batch, its memo kept small --------------------------------------
#
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
#     (the caller loads the whole file instead) rather than return wrong data.

_ENDS_LIST = OP.APPENDS + OP.APPEND  # the opcodes a non-empty top-level list ends with, before STOP
_CHUNK = 1 << 22
_KEEP_BELOW = BINGET_REACH  # memo entries BINGET can fetch stay: a few hundred classes and names
_BESIDE_MIN = 64 << 20  # framed pickles this big are scanned beside pass 2; smaller ones first, in one walk
_BLOCKS = (512, 1024)  # frames per scan of pass 1 beside pass 2: small first (pass 2 waits for them), then …
_BLOCK = 2048  # … this many (each numpy step of opscan then moves ~2,000 cursors: fewer would cost more steps)
_LAG = 256  # frames pass 2 may read before pass 1 beside it has counted their memo entries (~16 MB of pickle)


class StreamAbort(Exception):
    """Streaming gave up (unsupported stream, consumer declined, or a released memo entry was fetched)."""


class _Plan:
    """What pass 1 learns: where each frame starts, the memo entries each makes (counts come in blocks of frames,
    perhaps while pass 2 runs), and the entries that may be fetched with the last frame that may fetch each."""

    def __init__(self, size: int, frames: list[int], fetched: np.ndarray, last: np.ndarray,
                 counts: Generator[tuple[int, np.ndarray | None], None, None], lag: int = 0) -> None:
        self.size, self.frames, self.fetched, self.last, self.lag = size, frames, fetched, last, lag
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

    def finish(self) -> None:
        """Take pass 1's last counts (its workers then exit of themselves; stopping them costs more)."""
        for _ in self.counts:
            pass

    def close(self) -> None:
        self.counts.close()  # stops pass 1's workers


def _plan(f: Any, size: int) -> _Plan | None:
    """Pass 1 for this stream (see above). None: not a protocol 4/5 top-level list we can stream."""
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
        counts = started_map(partial(_count_block, fd, frames, ends), blocks)
        try:
            fetches = opscan.fetch_candidates(fd, size, frames)
        except BaseException:
            counts.close()
            raise
        if fetches is None:
            counts.close()
            return None
        return _Plan(size, frames, *fetches, counts, _LAG)
    walked = _walk(fd, size, framed)
    if walked is None or not walked.stopped or not walked.frames or walked.frames[0] != 2:
        return None
    fetches = {idx: last for idx, last in walked.fetches.items() if idx >= _KEEP_BELOW}
    fetched = np.fromiter(sorted(fetches), np.int64, len(fetches))
    last = np.fromiter((fetches[i] for i in fetched.tolist()), np.int64, len(fetches))
    counts = (block for block in [(0, np.asarray(walked.memos, np.int64))])  # a generator, as started_map's
    return _Plan(size, walked.frames, fetched, last, counts)


def _count_block(fd: int, frames: list[int], ends: list[int], block: tuple[int, int]) -> tuple[int, np.ndarray | None]:
    a, b = block
    return a, opscan.frame_memos(fd, frames[a:b], ends[a:b], b == len(frames))


@dataclass
class _Walked:
    """What the sequential pass 1 learnt: frame offsets, the memo entries made in each, the fetches (memo index → last
    frame), and whether the stream's STOP was seen."""

    frames: list[int] = field(default_factory=list)
    memos: list[int] = field(default_factory=list)
    fetches: dict[int, int] = field(default_factory=dict)
    stopped: bool = False


def _walk(fd: int, size: int, framed: bool) -> _Walked | None:
    """Pass 1 one opcode at a time: the stream after PROTO (small or unframed pickles, and the reference the tests
    compare opscan with)."""
    start, end = 2, size
    walked = _Walked()
    frames, memos, fetches = walked.frames, walked.memos, walked.fetches
    if not framed:  # the stream's start is frame 0 all the same
        frames.append(2)
    frame = len(frames) - 1  # the frame being read
    noarg, fixed, count1, count4, count8 = NOARG, FIXED, COUNT1, COUNT4, COUNT8
    base, buf, i, memo = start, os.pread(fd, _CHUNK, start), 0, 0

    def limit_of(base: int, buf: bytes) -> int:  # keep any short opcode whole in the buffer
        return min(len(buf) - 300 if base + len(buf) < size else len(buf), end - base)

    limit = limit_of(base, buf)
    while True:
        if i >= limit:
            if base + i >= end:
                break
            buf, base, i = buf[i:] + os.pread(fd, _CHUNK, base + len(buf)), base + i, 0
            limit = limit_of(base, buf)
            if i >= len(buf):
                return None  # truncated: the full load reports it
        op = buf[i]
        if op == MEMOIZE:  # the commonest opcodes first
            memo += 1
            i += 1
            continue
        if op == BINGET:  # entries below 256 (classes, first names) are never released, so not tracked
            i += 2
        elif op in noarg:
            if op == STOP:  # a list ends with APPENDS or APPEND (or is empty)
                if buf[i - 1] not in _ENDS_LIST and base + i != (13 if framed else 4):
                    return None
                walked.stopped = True
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
            frame += 1
            memo = 0
            i += FRAME_HEADER
        elif op in count4 or op in count8:
            w = 4 if op in count4 else 8
            stop = base + i + 1 + w + int.from_bytes(buf[i + 1:i + 1 + w], "little")
            if stop - base > len(buf):  # a big payload: skip it on disk
                buf, base, i = os.pread(fd, _CHUNK, stop), stop, 0
                limit = limit_of(base, buf)
            else:
                i = stop - base
        else:
            return None  # PUT/GET by text, persistent ids, extensions, out-of-band buffers: use the full load
        if buf[i] == MEMOIZE:  # most objects are memoized right after they are made (the margin keeps i inside)
            memo += 1
            i += 1
    if frames:
        memos.append(memo)
    return walked


def _frame(payload: bytes) -> bytes:
    return OP.FRAME + len(payload).to_bytes(8, "little") + payload


def _puts(idxs: np.ndarray) -> bytes:
    """LONG_BINPUT for each index."""
    out = np.empty((len(idxs), 5), np.uint8)
    out[:, 0] = OP.LONG_BINPUT[0]
    out[:, 1:] = idxs.astype("<u4").view(np.uint8).reshape(-1, 4)
    return out.tobytes()


class _Feed:
    """The byte stream of pass 2: the original frames, the list swapped for the sink, releases between frames."""

    def __init__(self, f: Any, plan: _Plan, sink_pid: str, sentinel_pid: str, check: Any) -> None:
        self.f, self.plan, self.check = f, plan, check
        self.sentinel_pid = sentinel_pid.encode()
        self.k = 0  # next frame to hand out
        self.buf, self.pos = OP.PROTO + b"\x04" + _frame(OP.PERSID + sink_pid.encode() + b"\n"), 0

    def _next(self) -> bool:
        plan, k = self.plan, self.k
        if k >= len(plan.frames):
            return False
        start = plan.frames[k]
        end = plan.frames[k + 1] if k + 1 < len(plan.frames) else plan.size
        self.f.seek(start)
        data = self.f.read(end - start)
        if k == 0 and data[:1] == OP.FRAME:  # the first frame opens with EMPTY_LIST: drop it (the sink is pushed)
            data = _frame(data[FRAME_HEADER + 1:])
        elif k == 0:
            data = data[1:]
        else:
            released = plan.releases(k - 1)
            self.check(len(released))
            if len(released):
                data = _frame(OP.PERSID + self.sentinel_pid + b"\n" + _puts(released) + OP.POP) + data
        self.buf, self.pos, self.k = data, 0, k + 1
        return True

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


class _Sink:
    """Stands in for the top-level list: the C unpickler calls extend (APPENDS) or append (APPEND) on it. Hands the
    items on in batches of at least BATCH (pickle's are 1,000): the consumer's cost per batch is paid less often."""

    BATCH = 16_000

    def __init__(self, consume: Any) -> None:
        self.consume, self.items = consume, []

    def extend(self, items: list) -> None:
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


def stream(path: str | Path, consume: Any) -> set[str]:
    """Unpickle the top-level list in `path` batch by batch: `consume(items)` gets each batch (a list) in order.

    Returns the tinygrad classes named. Raises StreamAbort when the file cannot be streamed (the caller then uses
    `load`), InputError (naming the file) for a refused global, as `load` does.
    """
    f, size = open_input(Path(path))
    with f:
        try:
            plan = _plan(f, size)
        except IndexError:  # an opcode cut off by the end of the file
            plan = None
        if plan is None:
            raise StreamAbort("not a streamable list")
        try:
            classes = _unpickle(path, f, size, plan, consume)
        except BaseException:
            plan.close()
            raise
        plan.finish()
        return classes


def _unpickle(path: str | Path, f: Any, size: int, plan: _Plan, consume: Any) -> set[str]:
    """Pass 2: the C unpickler on the frames, with the releases pass 1 planned fed in between."""
    sentinel = _Released()
    pids = {secrets.token_hex(16): _Sink(consume), secrets.token_hex(16): sentinel}
    sink_pid, sentinel_pid = list(pids)
    refs = [sys.getrefcount(sentinel)]  # + one per memo slot released so far

    def check(n: int) -> None:
        if sys.getrefcount(sentinel) != refs[0]:
            raise StreamAbort("a released memo entry was fetched again")
        refs[0] += n

    u = _StreamUnpickler(_Feed(f, plan, sink_pid, sentinel_pid, check), pids, size)
    try:
        if u.load() is not pids[sink_pid]:  # the list was inside another object (e.g. a rewrites tuple)
            raise StreamAbort("the pickle is not one list")
        pids[sink_pid].flush()
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except (StreamAbort, MemoryError):
        raise
    except Exception as e:  # let the full load report a corrupt file in its own words
        raise StreamAbort(f"{type(e).__name__}: {e}") from None
    check(0)
    return u.classes


class _Released:
    """What a released memo entry holds: nothing may ever reference it."""
