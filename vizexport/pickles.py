"""The only place that unpickles. tinygrad classes become inert stand-ins; every other global is refused.

Nothing named by the pickle is ever imported or called, except the few stdlib constructors in SAFE_GLOBALS.
Stand-ins keep what the pickle gave them: the BUILD state as attributes, REDUCE arguments in `_args`.
"""
from __future__ import annotations

import builtins
import gc
import io
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class InputError(Exception):
    """A problem with an input file, reported to the user as one line (no traceback)."""


class Stub:
    """Base of all stand-ins, made per qualified name by `stub_class`.

    No __new__ or __setstate__ of our own: NEWOBJ and BUILD (dict state, or (dict, slots)) then run in C, which is
    what makes loading millions of events as fast as with tinygrad's own dataclasses.
    """

    _qualname = "?"
    _args: tuple = ()

    def __init__(self, *args: Any) -> None:  # REDUCE: cls(*args); NEWOBJ with () skips __init__
        self._args = args

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "_args")
        args = ", ".join(map(repr, self._args))
        return f"<{self._qualname}({args}{'; ' if args and fields else ''}{fields})>"


class EnumValue(int):
    """An enum member pickled by value (Ops, AxisType, ...): the integer, plus the enum's class name."""

    _enum = "?"

    def __repr__(self) -> str:
        return f"{self._enum}({int(self)})"


class FloatStub(float):
    """A float subclass such as ConstFloat: NEWOBJ(cls, (value,)) plus slot state."""

    _qualname = "?"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            self.__dict__.update(state[1])


ENUMS = {"Ops", "UOps", "AxisType", "AddrSpace", "OptOps", "BinaryOps", "UnaryOps", "TernaryOps", "ReduceOps",
         "MetaOps", "BufferOps", "LoadOps"}
FLOATS = {"ConstFloat"}

SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    # tinygrad pickles every timestamp as Decimal(text): keep the exact text (readers parse it), which loads 30 %
    # faster and takes half the memory of Decimal objects
    ("decimal", "Decimal"): str,
    ("_pydecimal", "Decimal"): str,
    **{("builtins", n): getattr(builtins, n) for n in ("set", "frozenset", "slice", "complex", "bytearray", "bytes",
                                                         "tuple", "list", "dict", "int", "float", "str", "bool")},
}
# harmless stdlib objects seen inside old pickles (0.10.0-0.10.2 UPat state holds itertools.repeat): kept as stand-ins
INERT_GLOBALS = {("itertools", "repeat")}

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
        cls = _classes[qual] = type(name, (base,), attrs)
    return cls


class SafeUnpickler(pickle.Unpickler):
    """Resolves globals to stand-ins or SAFE_GLOBALS; records the tinygrad classes named (a schema fingerprint)."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.classes: set[str] = set()

    def find_class(self, module: str, name: str) -> Any:
        if module == "tinygrad" or module.startswith("tinygrad.") or (module, name) in INERT_GLOBALS:
            self.classes.add(f"{module}.{name}")
            return stub_class(module, name)
        fn = SAFE_GLOBALS.get((module, name))
        if fn is None:
            raise InputError(f"refused global {module}.{name} (vizexport only loads tinygrad data)")
        return fn

    def persistent_load(self, pid: Any) -> Any:
        raise InputError("refused persistent id in pickle")


def qualname(obj: Any) -> str:
    """Qualified tinygrad class name of a stand-in ('' for anything else)."""
    return getattr(type(obj), "_qualname", "")


def class_name(obj: Any) -> str:
    return qualname(obj).rsplit(".", 1)[-1]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of acyclic objects are made: its full collections, triggered by the
    allocation count alone, otherwise take most of the load time (4x slower for a 1M-event profile)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load(path: str | Path) -> tuple[Any, set[str]]:
    """Unpickle `path` safely; return the object and the tinygrad classes it named.

    Raises InputError (one line, naming the file) for anything wrong with the file.
    """
    path = Path(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror or e}") from None
    with f:
        head = f.read(2)
        if not head:
            raise InputError(f"{path}: empty file")
        if head[0] != 0x80 or head[1] < 2:
            raise InputError(f"{path}: not a pickle (no protocol 2+ header; tinygrad writes protocol 4 or 5)")
        f.seek(0)
        try:
            u = SafeUnpickler(io.BufferedReader(f, 1 << 20))
            return u.load(), u.classes
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
        except EOFError:
            raise InputError(f"{path}: truncated pickle (ends before its STOP opcode)") from None
        except RecursionError:
            raise InputError(f"{path}: pickle nests too deeply") from None
        except MemoryError:
            raise InputError(f"{path}: pickle asks for more memory than available (corrupt?)") from None
        except Exception as e:  # any other opcode-level failure means a corrupt stream
            raise InputError(f"{path}: corrupt pickle ({type(e).__name__}: {e})") from None
