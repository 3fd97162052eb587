"""UOp arguments: hashable keys (equal where tinygrad's UOp cache finds them equal) and short label text.

Arguments are plain values or the inert stand-ins of vizexport.pickles (fields in `__dict__`, REDUCE arguments in
`_args`). Node labels and hash-consing (replay) both go through here.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import Any

from ..pickles import EnumValue, FloatStub, Stub, class_name, int_text
from .common import DTypeText, strip_ansi, text
from .releases import enum_table
from .standins import first, get_field, last, uop_op

DTYPES = {"DType", "PtrDType", "ImageDType"}
PLAIN = (type(None), bool, int, str, bytes)
WIDTH = 40  # characters per label line
LINES = 4  # label lines per argument
MAX_NESTING = 64  # arguments nested deeper are a corrupt or hostile trace
TEXT_CALLS = 4096  # nested values formatted for one label at most (shared structures would take forever)


def arg_key(x: Any, uop: Callable[[Any], int], memo: dict[int, Hashable] | None = None, depth: int = 0
            ) -> Hashable:
    """A hashable stand-in for `x` that compares like tinygrad compares the real argument.

    `uop` interns a UOp stand-in met inside an argument (0.10.x and 0.11 args hold UOps) and returns its node id.
    `memo` (by identity) keeps the work linear in the argument's size when it shares parts. Raises ValueError for
    an argument nested more than MAX_NESTING deep.
    """
    t = type(x)
    if t in PLAIN or t is float:
        return x
    if t is FloatStub or isinstance(x, FloatStub):  # ConstFloat: -0.0 != 0.0 and nan == nan (compared by bits)
        return ("ConstFloat", struct.pack("<d", float(x)))
    if isinstance(x, EnumValue):
        return (x._enum, int(x))
    memo = {} if memo is None else memo
    hit = memo.get(id(x))
    if hit is not None:
        return hit
    if depth > MAX_NESTING:
        raise ValueError(f"an argument nested more than {MAX_NESTING} deep")
    d = depth + 1
    if t in (tuple, list):
        key: Hashable = (t.__name__, *(arg_key(v, uop, memo, d) for v in x))
    elif t in (set, frozenset):
        key = frozenset(arg_key(v, uop, memo, d) for v in x)
    elif t is dict:
        key = ("dict", *((arg_key(k, uop, memo, d), arg_key(v, uop, memo, d)) for k, v in x.items()))
    elif isinstance(x, Stub):
        if class_name(x) == "UOp":
            return ("UOp", uop(x))
        fields = tuple((k, arg_key(v, uop, memo, d)) for k, v in x.__dict__.items() if k != "_args")
        key = (x._qualname, arg_key(x._args, uop, memo, d), fields)
    elif isinstance(x, (int, float, str, bytes)):  # other builtin subclasses
        return (t.__name__, x)
    else:
        return (t.__name__, id(x))  # unknown object: equal to itself only
    memo[id(x)] = key
    return key


def _clip(s: str, width: int = WIDTH) -> str:
    s = s.replace("\t", " ")
    return s if len(s) <= width else s[:width - 1] + "…"


def _float(x: float) -> str:
    return f"{x:g}"


class ArgText:
    """Short text of arguments for one release (enum values named from that release's tables)."""

    def __init__(self, release: str, op_name: Callable[[int], str]) -> None:
        self.release = release
        self.op_name = op_name  # name of a table UOp id (0.11/0.12 Kernel args point at their AST by id)
        self.dtype = DTypeText(release)
        self._calls = TEXT_CALLS  # left for the label being made
        self._nesting = 0

    def lines(self, x: Any) -> list[str]:
        """The argument as at most LINES label lines of at most WIDTH characters ([] for None)."""
        if x is None:
            return []
        if isinstance(x, str) and not isinstance(x, EnumValue):
            return self._text(x)
        text = self.short(x)
        out = [text[i:i + WIDTH] for i in range(0, min(len(text), WIDTH * LINES), WIDTH)]
        if len(text) > WIDTH * LINES:
            out[-1] = out[-1][:-1] + "…"
        return out

    def _text(self, s: str) -> list[str]:
        lines = strip_ansi(s)[0].splitlines() or [""]
        out = [_clip(line) for line in lines[:LINES]]
        if len(lines) > LINES:
            out[-1] = f"… ({len(lines)} lines)"
        return out

    def short(self, x: Any, depth: int = 0) -> str:
        """One-line text of any argument value (bounded: a value too large or deep to show ends in '…')."""
        if self._nesting == 0:  # a new text: a new budget
            self._calls = TEXT_CALLS
        self._calls -= 1
        if self._calls < 0 or self._nesting > MAX_NESTING:
            return "…"
        self._nesting += 1
        try:
            return self._short(x, depth)
        finally:
            self._nesting -= 1

    def _short(self, x: Any, depth: int) -> str:
        if isinstance(x, EnumValue):
            return self.enum(x)
        if isinstance(x, bool) or x is None:
            return str(x)
        if isinstance(x, float):
            return _float(x)
        if isinstance(x, int):
            return int_text(x)
        if isinstance(x, str):
            return repr(strip_ansi(x)[0]) if depth else strip_ansi(x)[0]
        if isinstance(x, (bytes, bytearray)):
            return f"<{len(x)} bytes>"
        if isinstance(x, (tuple, list)):
            return self._seq(x, depth)
        if isinstance(x, dict):
            return "{" + ", ".join(f"{self.short(k, 1)}: {self.short(v, 1)}" for k, v in list(x.items())[:8]) + "}"
        if isinstance(x, Stub):
            return self._stub(x, depth)
        return type(x).__name__

    def _seq(self, x: tuple | list, depth: int) -> str:
        if depth > 3:
            return "(…)"
        items = [self.short(v, depth + 1) for v in x[:16]] + (["…"] if len(x) > 16 else [])
        body = ", ".join(items)
        return f"({body},)" if isinstance(x, tuple) and len(x) == 1 else f"({body})"

    def enum(self, x: EnumValue) -> str:
        name = enum_table(self.release, x._enum).get(int(x))
        return f"{x._enum}.{name}" if name else repr(x)

    def _stub(self, x: Stub, depth: int) -> str:
        cls = class_name(x)
        d = x.__dict__
        fmt = _STUBS.get(cls)
        if fmt is not None:
            return fmt(self, x, d)
        if cls in DTYPES:
            return self.dtype(x)
        shown = [f"{k}={self.short(v, depth + 1)}" for k, v in d.items() if k != "_args" and v not in (None, (), False)]
        shown += [self.short(v, depth + 1) for v in x._args]
        return f"{cls}({', '.join(shown[:4])}{', …' if len(shown) > 4 else ''})"

    def uop(self, u: Stub) -> str:
        code, arg = uop_op(u), get_field(u, "arg", cls="UOp")
        op = self.enum(code).split(".")[-1] if isinstance(code, EnumValue) else "UOp"
        return op if arg is None or isinstance(arg, Stub) else f"{op} {self.short(arg, 1)}"


def _param(t: ArgText, x: Stub, d: dict) -> str:
    parts = [f"#{d.get('slot')}"] if d.get("slot") is not None else []
    if d.get("name"):
        parts.append(text(d["name"]))
    if d.get("device") is not None:
        parts.append(t.short(d["device"], 1).strip("'"))
    if d.get("vmin_vmax") is not None:
        parts.append(t.short(d["vmin_vmax"], 1))
    return " ".join(parts) or "ParamArg"


def _named(t: ArgText, x: Stub, d: dict) -> str:
    name = strip_ansi(text(d.get("name") or ""))[0]
    opts = d.get("applied_opts") or ()
    return f"{name} ({len(opts)} opts)" if opts else name or class_name(x)


def _program(t: ArgText, x: Stub, d: dict) -> str:
    name = strip_ansi(text(d.get("name") or ""))[0]
    gs, ls = d.get("global_size"), d.get("local_size")
    return f"{name} g{t.short(gs, 1)} l{t.short(ls, 1)}" if gs is not None else name


def _shapetracker(t: ArgText, x: Stub, d: dict) -> str:
    views = d.get("views") or ()
    shape = views[-1].__dict__.get("shape") if views and isinstance(views[-1], Stub) else None
    return f"shape {t.short(shape, 1)}" if shape is not None else "ShapeTracker"


def _kernel(t: ArgText, x: Stub, d: dict) -> str:
    ast = d.get("ast", first(x))
    if isinstance(ast, int) and not isinstance(ast, EnumValue):
        return f"Kernel {t.op_name(ast)}"
    return f"Kernel {t.uop(ast)}" if isinstance(ast, Stub) else "Kernel"


def _block(t: ArgText, x: Stub, d: dict) -> str:
    lst = d.get("lst", last(x, ()))
    return f"{class_name(x)}({len(lst) if isinstance(lst, (tuple, list)) else '?'} uops)"


def _bufferize(t: ArgText, x: Stub, d: dict) -> str:
    return " ".join(t.short(d[k], 1).strip("'") for k in ("device", "addrspace") if d.get(k) is not None) or "opts"


def _call(t: ArgText, x: Stub, d: dict) -> str:
    shown = [t.short(v, 1) for v in (*x._args, *(v for k, v in d.items() if k != "_args")) if v not in (None, False)]
    return f"call {' '.join(shown[:3])}".strip()


_STUBS: dict[str, Callable[[ArgText, Stub, dict], str]] = {
    "ParamArg": _param, "KernelInfo": _named, "ProgramInfo": _program, "ShapeTracker": _shapetracker,
    "Kernel": _kernel, "BasicBlock": _block, "BasicBlock2": _block, "BufferizeOpts": _bufferize, "CallInfo": _call,
    "InvalidType": lambda t, x, d: "Invalid", "UOp": lambda t, x, d: t.uop(x),
    "View": lambda t, x, d: f"view {t.short(d.get('shape'), 1)}",
    "Target": lambda t, x, d: text(d.get("device") or "target"),
}
