"""Kernel estimates (FLOPs, bytes) of tinygrad 0.11 and 0.12, recomputed from the pickled ProgramSpec.

Those releases never pickled the estimates: their viewer computed `ProgramSpec.estimates` (a cached property) from
`ProgramSpec.uops` when it drew a kernel. The codegen context's `TracingKey.ret` in rewrites.pkl is that ProgramSpec
(a stand-in: `uops` = the linearized UOp stand-ins, `ast` = the kernel AST), so the same counting runs here:

  ops  every ALU UOp not used for indexing: loop trip count × dtype.count (MULACC ×2); WMMA 2·N·M·K/threads
  lds  every LOAD/STORE not on registers: value bytes × loop trip count
  mem  0.11: per AST buffer and access kind, the largest pointer size in bytes (consecutive groups only);
       0.12: pointer bytes of every DEFINE_GLOBAL that is loaded or stored (each buffer and kind once)

(0.11.0: tinygrad/renderer/__init__.py:23-50 from_uops, 87-97 mem_estimate/estimates; 0.12.0: the same file,
23-59 and 79-81.) The viewers link a profile range to its ProgramSpec by kernel name (`program_specs`); 0.11 shows
figures only when all three are ints (viz/serve.py:134-141), 0.12 evaluates them with the var_vals of the latest
`exec` point event on the range's device whose arg["name"] is the ProgramSpec's name (viz/serve.py:159-175).
A loop bound or launch size that is a variable makes a figure symbolic: a `Sym`, evaluated with a launch's var_vals.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from ..pickles import class_name
from ..walks import post_order
from .common import dtype_bits
from .releases import SpecCounting, enum_table, traits
from .standins import ANY_DTYPE, get_field, has, uop_field, uop_op, uop_view
from .symbolic import sym_eval

# GroupOp.ALU (0.11.0 uop/__init__.py:86-90, 0.12.0 the same but RECIP is called RECIPROCAL)
ALU = frozenset({"EXP2", "LOG2", "SIN", "SQRT", "RECIP", "RECIPROCAL", "NEG", "TRUNC",
                 "ADD", "MUL", "IDIV", "MAX", "MOD", "CMPLT", "CMPNE", "CMPEQ", "XOR", "SHL", "SHR", "OR", "AND",
                 "THREEFRY", "SUB", "FDIV", "POW", "WHERE", "MULACC"})
MOVEMENT = frozenset({"RESHAPE", "EXPAND", "PERMUTE", "PAD", "SHRINK", "FLIP"})  # UOp.base looks through these
MEMORY = ("LOAD", "STORE")
PTR_TYPES = ("PtrDType", "ImageDType")
REG = "REG"  # AddrSpace of registers: not memory traffic
# WMMA arg = (name, dims (N, M, K), dtype_in, dtype_out, device, threads, ...)
WMMA_DIMS, WMMA_THREADS = 1, 5
MAX_CHAIN = 10_000  # steps down a chain of first sources (a buffer's views): more is a corrupt or crafted trace
WALK_BUDGET = 1 << 22  # source references one estimate may walk


# ---- symbolic counts ----

@dataclass(frozen=True)
class Sym:
    """Σ coef × Π factors: each factor a UOp stand-in (a loop bound or launch size over the kernel's variables)."""

    terms: tuple[tuple[int, tuple[Any, ...]], ...]
    ops: dict[int, str] = field(repr=False, compare=False)  # the release's Ops names, to read the factors

    def __call__(self, var_vals: dict[str, int]) -> int | None:
        total = 0
        for coef, factors in self.terms:
            for f in factors:  # SPECIAL (a thread index) is 0, as from_uops substitutes it in loop counts
                v = sym_eval(f, var_vals, self.ops, special=0)
                if not isinstance(v, int):
                    return None
                coef *= v
            total += coef
        return total


Count = int | Sym


def value(x: Count, var_vals: dict[str, int]) -> int | None:
    return x if isinstance(x, int) else x(var_vals)


class _Sum:
    """A count being built: coefficient per tuple of symbolic factors (the empty tuple holds the constant part)."""

    def __init__(self) -> None:
        self.terms: dict[tuple, int] = {}

    def add(self, mults: tuple[int, tuple], times: int) -> None:
        coef, factors = mults
        self.terms[factors] = self.terms.get(factors, 0) + coef * times

    def result(self, ops: dict[int, str]) -> Count:
        const = self.terms.get((), 0)
        rest = tuple((c, f) for f, c in self.terms.items() if f)
        return Sym(((const, ()), *rest), ops) if rest else const


# ---- the counting rules ----

@dataclass(frozen=True)
class Estimates:
    """What `ProgramSpec.estimates` is in that release: FLOPs, bytes loaded+stored, bytes of memory touched."""

    ops: Count
    lds: Count
    mem: Count
    ints_only: bool  # SpecCounting.ints_only

    def values(self, var_vals: dict[str, int] | None = None) -> tuple[int, int, int] | None:
        """(ops, lds, mem) of one launch, or None where the release's viewer shows no figures."""
        counts = (self.ops, self.lds, self.mem)
        if self.ints_only and not all(isinstance(x, int) for x in counts):
            return None  # 0.11 draws figures only when all three are ints (its profile has no var_vals)
        ops, lds, mem = (value(x, var_vals or {}) for x in counts)
        return None if ops is None or lds is None or mem is None else (ops, lds, mem)


class _Reader:
    """Op names, dtype sizes and graph walks over one release's UOp stand-ins."""

    def __init__(self, release: str, rules: SpecCounting) -> None:
        self.rules, self.ops = rules, enum_table(release)
        self.space = enum_table(release, "AddrSpace")
        self.bitsize = traits(release).dtype_bits

    def op(self, u: Any) -> str | None:
        return self.ops.get(int(uop_op(u))) if class_name(u) == "UOp" else None

    def itemsize(self, dt: Any) -> int:
        return (dtype_bits(dt, self.bitsize) + 7) // 8  # DType.itemsize; a vector dtype's covers all its lanes

    def not_reg(self, dt: Any) -> bool:
        """`not isinstance(dt, PtrDType) or dt.addrspace != AddrSpace.REG`"""
        if class_name(dt) not in PTR_TYPES or not has(dt, "where", ANY_DTYPE):
            return True
        return self.space.get(int(get_field(dt, "where", cls=ANY_DTYPE))) != REG

    def toposort(self, root: Any, stop: str | None = None, done: dict[int, Any] | None = None) -> dict[int, Any]:
        """UOp.toposort by identity (a cycle raises walks.CycleError); `stop`: an op neither kept nor walked into;
        `done`: nodes to leave out (walked before)."""
        if stop is not None and self.op(root) == stop:
            return {}
        srcs = (lambda u: tuple(s for s in _src(u) if self.op(s) != stop)) if stop else _src
        return {id(u): u for u in post_order(root, srcs, done or {}, key=id, budget=WALK_BUDGET)}


def _src(u: Any) -> Any:
    return uop_field(u, "src")


def _dtype(u: Any) -> Any:
    return uop_field(u, "dtype")


def _bound(x: Any, r: _Reader) -> int | Any:
    """A loop bound or launch size: an int when ssimplify gives a constant, else the UOp stand-in (symbolic)."""
    return uop_field(x, "arg") if r.op(x) == "CONST" and isinstance(uop_field(x, "arg"), int) else x


def _times(mults: tuple[int, tuple], x: int | Any) -> tuple[int, tuple]:
    return (mults[0] * x, mults[1]) if isinstance(x, int) else (mults[0], (*mults[1], x))


def _indexing(uops: list, r: _Reader) -> set[int]:
    """ids of the UOps that compute addresses and gates: their ALU ops are not counted (ignore_indexing=True)."""
    skip: dict[int, Any] = {}  # every node met
    whole: dict[int, Any] = {}  # nodes whose whole graph was walked (a walk stopped at RANGEs may meet them again)
    for u in uops:
        op, src = r.op(u), _src(u)
        if op in MEMORY and (not r.rules.whole_index or r.not_reg(_dtype(src[0]))):
            idx = src[0]
            if r.rules.whole_index:
                whole |= r.toposort(idx, done=whole)
            else:  # 0.12: the INDEX's offsets (not the buffer, which may be an AFTER), not walking into a RANGE
                roots = _src(idx)[1:] if r.op(idx) == "INDEX" else (idx,)
                for s in roots:
                    skip |= r.toposort(s, stop="RANGE", done=skip)
            if len(src) > 2:
                whole |= r.toposort(src[2], done=whole)
        elif op == "IF":
            whole |= r.toposort(src[0], done=whole)
    return set(skip) | set(whole)


def _from_uops(uops: list, r: _Reader) -> tuple[Count, Count, Count]:
    """Estimates.from_uops(uops, ignore_indexing=True): (ops, lds, 0.12's mem)."""
    skip = _indexing(uops, r)
    flops, lds, mem = _Sum(), _Sum(), {}
    mults: tuple[int, tuple] = (1, ())
    stack: list[tuple[int, tuple]] = []
    loop_end = r.rules.loop_end
    for u in uops:
        op, (_, dt, src, arg, _) = r.op(u), uop_view(u)
        if op in MEMORY and not r.rules.mem_from_ast:
            buf = u
            for _ in range(MAX_CHAIN):
                if not _src(buf):
                    break
                buf = _src(buf)[0]
            if r.op(buf) == "DEFINE_GLOBAL":  # all of a global buffer counts as accessed, once per LOAD/STORE kind
                mem[(id(buf), op)] = get_field(_dtype(buf), "ptr_size", cls=ANY_DTYPE) * r.itemsize(_dtype(buf))
        if op == "RANGE":
            stack.append(mults)
            mults = _times(mults, _bound(src[0], r))
        elif op == loop_end:
            mults = stack.pop()
        elif op == "SPECIAL":  # a launch dimension: 0.11 keeps its size in arg[1], 0.12 in src[0]
            mults = _times(mults, _bound(arg[1] if r.rules.special_size_in_arg else src[0], r))
        elif op == "LOAD" and r.not_reg(_dtype(src[0])):
            lds.add(mults, r.itemsize(dt))
        elif op == "STORE" and r.not_reg(_dtype(src[0])):
            lds.add(mults, r.itemsize(_dtype(src[1])))
        elif op in ALU and id(u) not in skip:
            flops.add(mults, (2 if op == "MULACC" else 1) * get_field(dt, "count", cls=ANY_DTYPE))
        elif op == "WMMA" and id(u) not in skip:
            flops.add(mults, 2 * math.prod(arg[WMMA_DIMS]) // arg[WMMA_THREADS])
    return flops.result(r.ops), lds.result(r.ops), sum(mem.values())


def _base(u: Any, r: _Reader) -> Any:
    """UOp.base in 0.11: through VIEWs with a source, movement ops and MULTI."""
    for _ in range(MAX_CHAIN):
        if not ((r.op(u) == "VIEW" and _src(u)) or r.op(u) in MOVEMENT or r.op(u) == "MULTI"):
            break
        u = _src(u)[0]
    return u


def _nbytes(dt: Any, r: _Reader) -> int | None:
    """PtrDType.nbytes in 0.11 (size -1 counts 0); None where tinygrad raises (not a pointer)."""
    if class_name(dt) not in PTR_TYPES:
        return None
    size = get_field(dt, "ptr_size", cls=ANY_DTYPE)
    return 0 if size == -1 else size * r.itemsize(dt)


def _mem_from_ast(ast: Any, r: _Reader) -> int | None:
    """ProgramSpec.mem_estimate (0.11): groupby over the AST's toposort groups only *consecutive* accesses."""
    access = [x for x in r.toposort(ast).values()
              if r.op(x) in MEMORY and r.op(_base(_src(x)[0], r)) == "DEFINE_GLOBAL"]
    total = 0
    for _, group in itertools.groupby(access, key=lambda x: (r.op(x), uop_field(_base(_src(x)[0], r), "arg"))):
        sizes = [_nbytes(_dtype(_src(x)[0]), r) for x in group]
        if None in sizes:
            return None
        total += max(sizes)
    return total


def program_estimates(spec: Any, release: str) -> Estimates | None:
    """The estimates `ProgramSpec.estimates` gives in `release` (0.11.0 or 0.12.0) for a ProgramSpec stand-in (the
    `ret` of a codegen context's TracingKey in rewrites.pkl). None: another release, or not a readable ProgramSpec."""
    rules = traits(release).spec_counting
    if rules is None or class_name(spec) != "ProgramSpec":
        return None
    d = spec.__dict__
    uops, r = d.get("uops"), _Reader(release, rules)
    try:
        ops, lds, mem = _from_uops(uops, r) if uops is not None else (0, 0, 0)
        if rules.mem_from_ast:
            mem = _mem_from_ast(d.get("ast"), r)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):  # a stand-in not shaped as expected, a
        return None  # cycle or a walk over its budget (walks' errors are ValueErrors)
    return None if mem is None else Estimates(ops, lds, mem, rules.ints_only)


def program_specs(keys: list) -> dict[str, Any]:
    """kernel name → ProgramSpec stand-in, as the 0.11/0.12 viewers link a profile range to its codegen context:
    every str in a context's TracingKey.keys (keys[0] is the kernel's function name, the range event's name); a
    later context wins (serve.py ref_map)."""
    out: dict[str, Any] = {}
    for k in keys:
        d = getattr(k, "__dict__", {})
        spec = d.get("ret")
        for name in d.get("keys") or ():
            if isinstance(name, str):
                out[name] = spec
    return {n: s for n, s in out.items() if class_name(s) == "ProgramSpec"}
