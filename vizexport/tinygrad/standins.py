"""The fields of the tinygrad stand-ins that pickle by REDUCE, by name: the one module that knows their positions
in `Stub._args` (tinygrad-formats.md §2.3, §2.6). Readers ask `get_field(x, "src")` or take a UOp's `uop_view`,
never `_args[k]`.

UOp(op, dtype, src, arg[, tag]) (0.10.x: the fifth is metadata or a buffer, not a tag); DType(priority, itemsize or
bits, name, fmt, count[, scalar]); a PtrDType adds (base, local or addrspace, v[, size]); an ImageDType adds its shape;
a 0.10.x UPat keeps its source location eighth; a 0.10.x Kernel its AST first; a BasicBlock its UOp list last.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..pickles import Stub, class_name

_DTYPE = ("priority", "size", "name", "fmt", "count", "scalar")
_PTR = (*_DTYPE, "base", "where", "v", "ptr_size")
LAYOUTS: dict[str, tuple[str, ...]] = {
    "UOp": ("op", "dtype", "src", "arg", "tag"),
    "DType": _DTYPE,
    "PtrDType": _PTR,
    "ImageDType": (*_PTR, "shape"),
    "UPat": ("op", "dtype", "src", "arg", "name", "allow_any_len", "custom_early_reject", "location"),
    "Kernel": ("ast", "metadata"),
}
_INDEX = {cls: {name: i for i, name in enumerate(names)} for cls, names in LAYOUTS.items()}
_UOP = _INDEX["UOp"]
ANY_DTYPE = "ImageDType"  # read any dtype by this layout: a DType's fields begin a PtrDType's, which begin this
LAST = -1  # a BasicBlock's UOp list: its last argument, however many come before


def get_field(x: Any, name: str, default: Any = None, cls: str | None = None) -> Any:
    """The REDUCE argument `name` of stand-in `x` (laid out as `cls`, default its own class), or `default` where the
    pickle gave fewer arguments (or `x` is no stand-in)."""
    i = _INDEX[cls or class_name(x)][name]
    a = getattr(x, "_args", ())
    return a[i] if len(a) > i else default


def has(x: Any, name: str, cls: str | None = None) -> bool:
    """Whether the pickle gave `x` its argument `name`."""
    return len(getattr(x, "_args", ())) > _INDEX[cls or class_name(x)][name]


def last(x: Stub, default: Any = None) -> Any:
    """The last REDUCE argument (a BasicBlock's UOp list)."""
    return x._args[LAST] if x._args else default


def first(x: Stub, default: Any = None) -> Any:
    """The first REDUCE argument (a 0.11/0.12 Kernel's AST id)."""
    return x._args[0] if x._args else default


class UOpView(NamedTuple):
    """A UOp stand-in's arguments by name (tag None where the pickle gave none)."""

    op: Any
    dtype: Any
    src: Any
    arg: Any
    tag: Any = None


UOP_FIELDS = len(LAYOUTS["UOp"]) - 1  # a UOp has at least op, dtype, src, arg


def uop_view(u: Any) -> UOpView | None:
    """`u`'s fields by name, or None unless it has at least op, dtype, src and arg."""
    a = getattr(u, "_args", ())
    return UOpView(*a[:UOP_FIELDS + 1]) if len(a) >= UOP_FIELDS else None


def uop_op(u: Stub) -> Any:
    """A UOp's op (an Ops value), None if it has no arguments."""
    return u._args[_UOP["op"]] if u._args else None


def uop_src(u: Stub) -> Any:
    """A UOp's sources as pickled (() where it has fewer than three arguments)."""
    return u._args[_UOP["src"]] if len(u._args) > _UOP["src"] else ()


def uop_field(u: Stub, name: str) -> Any:
    """A UOp's field `name`; IndexError where the pickle gave it none (a reader that needs it then gives up)."""
    return u._args[_UOP[name]]


def n_fields(x: Any) -> int:
    """How many REDUCE arguments the pickle gave `x`."""
    return len(getattr(x, "_args", ()))
