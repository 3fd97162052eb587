"""The UOp list of a codegen context's final program, as tinygrad's viewer prints it ("View UOp List", print_uops):
one line per linearized UOp — position, op, dtype, sources (positions, constants by value), argument.

0.13+ keep the list as the sources of the LINEAR source of the PROGRAM node the context's rewrites produced; 0.11/0.12
pickle it as the `uops` of the ProgramSpec in the context's TracingKey.ret. The ranges column of print_uops is left
out (it needs tinygrad's range analysis).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..pickles import EnumValue, Stub, class_name, int_text
from ..records import Rewrite, UOpRec
from .args import DTYPES, ArgText
from .standins import uop_view

LINEARIZE = "linearize/render"  # the rewrite that makes the program (later ones may hold other kernels' programs)
MAX_LINES = 100_000  # a program longer than this is listed up to here
MAX_DEPTH, MAX_ITEMS = 6, 64  # an argument nested or long beyond these is cut ("…")


def uop_list(key: Any, rewrites: list[Rewrite], uops: dict[int, UOpRec], release: str) -> list[str] | None:
    """The final program's UOp list, or None for contexts that are not codegen or made none."""
    ret = key.__dict__.get("ret") if class_name(key) == "TracingKey" else None
    if class_name(ret) == "ProgramSpec" and isinstance(ret.__dict__.get("uops"), list):
        return _spec_list(ret.__dict__["uops"], release, uops)
    if class_name(key) != "TracingKey" or len(key.__dict__.get("keys") or ()) < 2:
        return None  # schedule contexts have one key, codegen ones (name, ast[, program key])
    program = find_node([r for r in rewrites if r.name == LINEARIZE] or rewrites, uops, "PROGRAM")
    linear = program and next((uops[s] for s in program.src if s in uops and uops[s].op_name == "LINEAR"), None)
    if linear is None:
        return None
    text = ArgText(release, lambda i: uops[i].op_name if i in uops else "?")
    rows = [uops[i] for i in linear.src[:MAX_LINES] if i in uops]
    ids = {id(u): n for n, u in enumerate(rows)}
    return _lines(rows, lambda u: u.op_name, lambda u: u.dtype, lambda u: [uops.get(s) for s in u.src],
                  lambda u: u.arg, ids, text)


def find_node(rewrites: list[Rewrite], uops: dict[int, UOpRec], op_name: str) -> UOpRec | None:
    """The first node named `op_name` under the context's rewrites (their sinks and what their matches made)."""
    todo = [r.sink for r in rewrites] + [m.after for r in rewrites for m in r.matches if m.after is not None]
    seen: set[int] = set()
    while todo:
        i = todo.pop()
        if i in seen or i not in uops:
            continue
        seen.add(i)
        u = uops[i]
        if u.op_name == op_name:
            return u
        todo.extend(u.src)
    return None


def _spec_list(spec_uops: list, release: str, uops: dict[int, UOpRec]) -> list[str]:
    text = ArgText(release, lambda i: uops[i].op_name if i in uops else "?")
    views = {id(u): v for u in spec_uops[:MAX_LINES] if class_name(u) == "UOp" and (v := uop_view(u)) is not None}
    rows = [u for u in spec_uops[:MAX_LINES] if id(u) in views]
    ids = {id(u): n for n, u in enumerate(rows)}

    def op(u: Any) -> str:
        code = views[id(u)].op
        return text.enum(code).split(".")[-1] if isinstance(code, EnumValue) else "?"

    return _lines(rows, op, lambda u: text.dtype(views[id(u)].dtype), lambda u: list(views[id(u)].src or ()),
                  lambda u: views[id(u)].arg, ids, text)


def _lines(rows: list, op: Callable[[Any], str], dtype: Callable[[Any], str], src: Callable[[Any], Iterable],
           arg: Callable[[Any], Any], ids: dict[int, int], text: ArgText) -> list[str]:
    """print_uops' columns (its text of each; a constant source is shown by value, one outside the list as --)."""
    out = []
    for n, u in enumerate(rows):
        srcs = [repr("--") if s is None or id(s) not in ids else
                repr(_value(arg(s), text)) if op(s) == "CONST" else str(ids[id(s)]) for s in src(u)]
        a = arg(u)
        out.append(f"{n:4d} {'Ops.' + op(u):20s} {'dtypes.' + dtype(u):40s} {'[' + ', '.join(srcs) + ']':32s} "
                   f"{_value(a, text)}")
    return out


def _value(x: Any, text: ArgText) -> str:
    """str() of a value as tinygrad prints it (stand-ins as their dataclass repr), bounded in depth and length."""
    return x if isinstance(x, str) and not isinstance(x, EnumValue) else _repr(x, text, 0)


def _repr(x: Any, text: ArgText, depth: int) -> str:
    if depth > MAX_DEPTH:
        return "…"
    if isinstance(x, float):
        return float.__repr__(x)
    if isinstance(x, EnumValue):
        return text.enum(x)
    if isinstance(x, int) and not isinstance(x, bool):
        return int_text(x)
    if x is None or isinstance(x, (bool, str, bytes)):
        return repr(x)
    if class_name(x) in DTYPES:
        return "dtypes." + text.dtype(x)
    if isinstance(x, (tuple, list)):
        items = [_repr(v, text, depth + 1) for v in x[:MAX_ITEMS]] + (["…"] if len(x) > MAX_ITEMS else [])
        body = ", ".join(items) + ("," if isinstance(x, tuple) and len(x) == 1 else "")
        return f"({body})" if isinstance(x, tuple) else f"[{body}]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{_repr(k, text, depth + 1)}: {_repr(v, text, depth + 1)}"
                               for k, v in list(x.items())[:MAX_ITEMS]) + "}"
    if not isinstance(x, Stub):  # a set, or a stand-in of Python's (itertools.repeat)
        return type(x).__name__
    shown = list(vars(x).items())[:MAX_ITEMS]
    if class_name(x) == "ParamArg":  # its own repr: slot and dtype, then the fields that differ from their default
        args = [_repr(v, text, depth + 1) for _, v in shown[:2]]
        args += [f"{k}={_repr(v, text, depth + 1)}" for k, v in shown[2:] if not _is_default(v, text)]
        return f"ParamArg({', '.join(args)})"
    fields = [f"{k}={_repr(v, text, depth + 1)}" for k, v in shown if k != "_args"]
    args = [_repr(v, text, depth + 1) for v in getattr(x, "_args", ())[:MAX_ITEMS]]
    return f"{class_name(x) or type(x).__name__}({', '.join(args + fields)})"


def _is_default(x: Any, text: ArgText) -> bool:
    return x is None or x is False or (isinstance(x, EnumValue) and text.enum(x) == "AddrSpace.GLOBAL")
