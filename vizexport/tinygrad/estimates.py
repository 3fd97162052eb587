"""Compile-time kernel estimates (FLOPs, bytes) from a rewrites trace, evaluated with a launch's variable values.

tinygrad keeps them on the KernelInfo of the kernel's PROGRAM (0.13+). They may be symbolic: UOp expressions over the
kernel's variables, evaluated here with a small interpreter over the release's Ops names (no tinygrad needed).
"""
from __future__ import annotations

import operator
from typing import Any

from ..pickles import class_name
from ..records import RewriteLog
from ..timeline import ARG_GBS_LDS, ARG_GBS_MEM, ARG_GFLOPS
from .releases import enum_table

_BINARY = {"ADD": operator.add, "SUB": operator.sub, "MUL": operator.mul, "MAX": max, "XOR": operator.xor,
           "AND": operator.and_, "OR": operator.or_, "SHL": operator.lshift, "SHR": operator.rshift,
           "CMPLT": operator.lt, "CMPNE": operator.ne, "CMPEQ": operator.eq, "FDIV": operator.truediv}


MAX_SHIFT = 64
MAX_VALUE = 1 << 128  # FLOP and byte counts of real kernels are far below; larger ones come from a corrupt trace


def _idiv(a: int, b: int) -> int:  # tinygrad's IDIV/MOD truncate toward zero, like C
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def sym_eval(x: Any, var_vals: dict[str, int], ops: dict[int, str], memo: dict[int, Any] | None = None,
             depth: int = 0) -> float | int | None:
    """Value of an int, float or UOp stand-in expression; None if it uses something unknown. `memo` (by identity)
    keeps the work linear in the expression's size when it shares parts."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return x
    if class_name(x) != "UOp" or depth > 200:
        return None
    memo = {} if memo is None else memo
    if id(x) in memo:
        return memo[id(x)]
    memo[id(x)] = v = _eval(x, var_vals, ops, memo, depth)
    return v


def _eval(x: Any, var_vals: dict[str, int], ops: dict[int, str], memo: dict[int, Any], depth: int
          ) -> float | int | None:
    a = x._args
    if len(a) < 4 or not isinstance(a[0], int) or type(a[2]) is not tuple:
        return None
    op, src, arg = ops.get(int(a[0])), a[2], a[3]
    if op == "CONST":
        return arg if isinstance(arg, (int, float)) else None
    if op in ("DEFINE_VAR", "PARAM"):
        name = arg[0] if isinstance(arg, tuple) and arg else getattr(arg, "__dict__", {}).get("name")
        return var_vals.get(name) if isinstance(name, str) else None
    vals = [sym_eval(s, var_vals, ops, memo, depth + 1) for s in src]
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


class Estimates:
    """Kernel → (ops, lds, mem) expressions, found by profile_key (0.14+) or by kernel name (older)."""

    def __init__(self, log: RewriteLog) -> None:
        self.ops = enum_table(log.release.name)
        self.by_key: dict[Any, tuple[str, Any]] = {}
        for c in log.contexts:
            est = self._estimates(c, log)
            for k in c.key.keys:
                if isinstance(k, (bytes, str)) and k not in self.by_key:
                    self.by_key[k] = (c.key.name, est)
            self.by_key.setdefault(c.key.name, (c.key.name, est))

    def _estimates(self, ctx: Any, log: RewriteLog) -> Any:
        for r in ctx.rewrites:
            prog = log.uops.get(r.sink)
            if r.name == "View Program" and prog is not None and prog.src and prog.src[0] in log.uops:
                info = log.uops[prog.src[0]].arg
                return getattr(info, "__dict__", {}).get("estimates")
        return None

    def lookup(self, profile_key: bytes | None, name: str) -> tuple[str, Any] | None:
        return self.by_key.get(profile_key) if profile_key is not None and profile_key in self.by_key else \
            self.by_key.get(name)

    def rates(self, est: Any, var_vals: dict, seconds: float) -> dict[str, float]:
        """GFLOPS and GB/s for one launch (only the figures that evaluate)."""
        if est is None or seconds <= 0:
            return {}
        d = est.__dict__
        out = {}
        for field, label, scale in (("ops", ARG_GFLOPS, 1e-9), ("mem", ARG_GBS_MEM, 1e-9), ("lds", ARG_GBS_LDS, 1e-9)):
            v = sym_eval(d.get(field), var_vals, self.ops)
            if v is not None:
                out[label] = round(v / seconds * scale, 3)
        return out
