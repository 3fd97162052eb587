"""The only place that unpickles. tinygrad classes become inert stand-ins; every other global is refused.

Nothing named by the pickle is ever imported or called, except the few stdlib constructors in SAFE_GLOBALS, and
those only with plain arguments of bounded size. Stand-ins keep what the pickle gave them: the BUILD state as
attributes, REDUCE arguments in `_args`; their classes cannot be changed by the pickle. A length field that asks
for more bytes than the file has left is refused before anything that size is made. Only regular files are read.
"""
from __future__ import annotations

import builtins
import io
import os
import pickle
import reprlib
import stat
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

from ..errors import InputError


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

    def __reduce__(self) -> tuple:  # to a forked process's parent (never from a file: find_class refuses vizexport)
        return _remade, (self._qualname,), self.__dict__


class EnumValue(int, metaclass=StandInType):
    """An enum member pickled by value (Ops, AxisType, ...): the integer, plus the enum's class name."""

    _enum = "?"

    def __repr__(self) -> str:
        return f"{self._enum}({int_text(self)})"

    def __reduce__(self) -> tuple:
        return _remade, (self._qualname, int(self))


class FloatStub(float, metaclass=StandInType):
    """A float subclass such as ConstFloat: NEWOBJ(cls, (value,)) plus slot state."""

    _qualname = "?"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            self.__dict__.update(state[1])

    def __reduce__(self) -> tuple:
        return _remade, (self._qualname, float(self)), (None, self.__dict__)


def _remade(qualname: str, *value: Any) -> Any:
    """A stand-in pickled by a forked process (its class is made anew in this one, or found)."""
    cls = stub_class(*qualname.rsplit(".", 1))
    return cls(*value) if value else object.__new__(cls)


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


INT_TEXT_BITS = 4096  # ints wider are shown by their size: Python writes at most 4,300 digits (14,284 bits)


def int_text(x: int) -> str:
    """An int as text; one too wide to write out (a pickle can hold any) as its size."""
    if x.bit_length() > INT_TEXT_BITS:
        return f"<{'-' if x < 0 else ''}int of {x.bit_length():,} bits>"
    return str(int(x))


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

    def repr_int(self, x: int, level: int) -> str:
        return super().repr_int(x, level) if x.bit_length() <= INT_TEXT_BITS else int_text(x)


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


def is_pickle(path: Path) -> bool:
    """Whether the file starts as a pickle tinygrad could have written (protocol 2+): what `open` converts first."""
    f, _ = open_input(path)
    with f:
        head = f.read(2)
    return head[:1] == pickle.PROTO and len(head) == 2 and head[1] >= 2


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
