"""Values of tinygrad's symbolic expressions (UOp stand-ins over a kernel's variables) for one launch's variable
values: what sym_infer does, with a small interpreter over the release's Ops names (no tinygrad needed). Bounded in
depth, memoized by identity (shared subexpressions) and refusing absurd magnitudes: a trace can be crafted."""
from __future__ import annotations

import operator
from typing import Any

from ..pickles import class_name
from .standins import uop_view

_BINARY = {"ADD": operator.add, "SUB": operator.sub, "MUL": operator.mul, "MAX": max, "XOR": operator.xor,
           "AND": operator.and_, "OR": operator.or_, "SHL": operator.lshift, "SHR": operator.rshift,
           "CMPLT": operator.lt, "CMPNE": operator.ne, "CMPEQ": operator.eq, "FDIV": operator.truediv}


MAX_SHIFT = 64
MAX_VALUE = 1 << 128  # FLOP and byte counts of real kernels are far below; larger ones come from a corrupt trace


def _idiv(a: int, b: int) -> int:  # tinygrad's IDIV/MOD truncate toward zero, like C
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def sym_eval(x: Any, var_vals: dict[str, int], ops: dict[int, str], memo: dict[int, Any] | None = None,
             depth: int = 0, special: int | None = None) -> float | int | None:
    """Value of an int, float or UOp stand-in expression; None if it uses something unknown. `memo` (by identity)
    keeps the work linear in the expression's size when it shares parts. `special`: the value of a SPECIAL (a
    thread index) where the release's counting substitutes one (0.11/0.12 loop counts use 0)."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return x
    if class_name(x) != "UOp" or depth > 200:
        return None
    memo = {} if memo is None else memo
    if id(x) in memo:
        return memo[id(x)]
    memo[id(x)] = v = _eval(x, var_vals, ops, memo, depth, special)
    return v


def _eval(x: Any, var_vals: dict[str, int], ops: dict[int, str], memo: dict[int, Any], depth: int,
          special: int | None) -> float | int | None:
    u = uop_view(x)
    if u is None or not isinstance(u.op, int) or type(u.src) is not tuple:
        return None
    op, src, arg = ops.get(int(u.op)), u.src, u.arg
    if op == "CONST":
        return arg if isinstance(arg, (int, float)) else None
    if op == "SPECIAL" and special is not None:
        return special
    if op in ("DEFINE_VAR", "PARAM"):
        name = arg[0] if isinstance(arg, tuple) and arg else getattr(arg, "__dict__", {}).get("name")
        return var_vals.get(name) if isinstance(name, str) else None
    vals = [sym_eval(s, var_vals, ops, memo, depth + 1, special) for s in src]
    if any(v is None for v in vals) or not vals:
        return None
    if op in ("SHL", "SHR") and not 0 <= vals[1] <= MAX_SHIFT:  # 1 << 10**12 would be a terabit number
        return None
    try:
        v = _apply(op, vals)
    except (ArithmeticError, ValueError, TypeError, IndexError):
        return None
    return v if v is None or abs(v) < MAX_VALUE else None


def _apply(op: str | None, vals: list) -> float | int | None:
    if op in ("BIND", "CAST"):
        return vals[-1] if op == "BIND" else vals[0]
    if op == "NEG":
        return -vals[0]
    if op == "WHERE":
        return vals[1] if vals[0] else vals[2]
    if op == "IDIV":
        return _idiv(int(vals[0]), int(vals[1]))
    if op == "MOD":
        return int(vals[0]) - _idiv(int(vals[0]), int(vals[1])) * int(vals[1])
    return _BINARY[op](*vals) if op in _BINARY and len(vals) == 2 else None
