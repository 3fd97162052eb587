"""rewrites.pkl (any release 0.10.0 … master) → records.RewriteLog with one UOp table.

0.11+ pickles already store UOps as a table (`uop_fields`: id → (op, dtype, src ids, arg, tag[, metadata])); 0.10.x
pickles hold UOp objects, which are numbered here by identity (the pickle memo keeps shared nodes shared).
"""
from __future__ import annotations

import math
import os
import warnings
from itertools import chain
from pathlib import Path
from typing import Any

from .. import pickles
from ..gcpause import gc_paused
from ..limits import capped
from ..pickles import InputError, Stub, brief, class_name
from ..records import INT64, Context, Key, Match, Release, Rewrite, RewriteLog, UOpRec
from ..walks import BudgetError, CycleError, post_order
from .common import DTypeText, as_key, sequence, text
from .estimates import context_cost
from .profile import is_rewrites
from .program import LINEARIZE, find_node, uop_list
from .releases import enum_table, rewrites_release, uop_leaf, with_override
from .standins import get_field, has, uop_view


def load_rewrites(path: str | Path, tinygrad_version: str | None = None) -> RewriteLog:
    """Read a tinygrad rewrites.pkl safely (nothing in it is executed) into version-neutral records."""
    with gc_paused():
        return rewrites_from(*pickles.load(path), str(path), tinygrad_version)


def rewrites_from(obj: Any, classes: set[str], path: str, tinygrad_version: str | None = None) -> RewriteLog:
    """The rewrite records of an already (safely) unpickled object."""
    if isinstance(obj, list) and not is_rewrites(obj):
        raise InputError(f"{path}: not a tinygrad rewrites trace (a list of events: a profile.pkl?)")
    try:
        keys, ctxs, fields = _layout(obj)
        keys, ctxs = _once(keys, ctxs, path)
        if sum(len(sequence(r.__dict__.get("matches"))) for c in ctxs for r in c) > edge_budget(path):
            raise InputError("holds more rewrite matches than the file has bytes (shared match lists: corrupt or "
                             "hostile)")
        first = next((r for c in ctxs for r in c), None)
        rw_fields = tuple(first.__dict__) if first is not None and class_name(first) else ()
        table = _UOpTable(fields, edge_budget(path))
        for c in ctxs:  # 0.10.x: number every UOp reachable from the rewrites
            for r in c:
                table.add_rewrite(r)
        release = with_override(rewrites_release(obj, classes, rw_fields, table.const_leaves()), tinygrad_version)
        table.name_ops(release)
        contexts = [_context(k, c, table, release.name) for k, c in zip(keys, ctxs, strict=False)]
        return RewriteLog(path, release, contexts, table.uops)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except CycleError:
        raise InputError(f"{path}: a UOp is its own ancestor (a cycle in the rewrites trace's graph)") from None
    except BudgetError:
        raise InputError(f"{path}: its UOp graph holds more source references than the file has bytes (shared "
                         "source lists: corrupt or hostile)") from None
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as e:
        raise InputError(f"{path}: unexpected rewrites layout ({type(e).__name__}: {e}); unknown tinygrad release?"
                         ) from None


def _layout(obj: Any) -> tuple[list, list, dict | None]:
    """(context keys, per-context rewrite lists as pickled, uop_fields or None) for every known top-level layout."""
    if isinstance(obj, list):  # 0.10.0: [(key, [TrackedRewriteContext])]
        if obj and not all(isinstance(x, tuple) and len(x) == 2 for x in obj):
            raise InputError("not a tinygrad rewrites trace (a list, but not of (key, contexts) pairs: a profile?)")
        keys, lists, fields = [k for k, _ in obj], [c for _, c in obj], None
    elif isinstance(obj, tuple) and len(obj) in (2, 3) and all(isinstance(x, list) for x in obj[:2]):
        keys, lists, fields = obj[0], obj[1], (obj[2] if len(obj) == 3 else None)
    elif class_name(obj) == "RewriteTrace":
        d = obj.__dict__
        keys, lists, fields = sequence(d.get("keys")), sequence(d.get("rewrites")), d.get("uop_fields") or {}
    else:
        raise InputError(f"not a tinygrad rewrites trace ({class_name(obj) or type(obj).__name__} at top level)")
    if fields is not None and type(fields) is not dict:
        raise InputError(f"its uop_fields are {brief(fields)}, not a table of UOps")
    return list(keys), [_rewrites(c, k) for k, c in enumerate(lists)], fields


def _rewrites(c: Any, k: int) -> list | tuple:
    """Context k's rewrites: tinygrad records (TrackedGraphRewrite, or 0.10.0's TrackedRewriteContext)."""
    if type(c) not in (list, tuple):
        raise InputError(f"the rewrites of context {k} are {brief(c)}, not a list")
    bad = next((i for i, r in enumerate(c) if not isinstance(r, Stub)), None)
    if bad is not None:
        raise InputError(f"rewrite {bad} of context {k} is {brief(c[bad])}, not a tinygrad rewrite")
    return c  # the object itself: _once tells a context listed again by it


def _once(keys: list, ctxs: list, path: str) -> tuple[list, list[list]]:
    """The contexts and their rewrites, each object once. tinygrad makes a new object for every context and rewrite;
    a pickle's memo can list one many times for a few bytes each, and each listing would be replayed and drawn
    again: work and output out of proportion to the file. A context listed again (the same key and rewrite list) and
    a rewrite listed again (the same object) are left out, with a warning."""
    seen_ctx: set[tuple[int, int]] = set()
    seen_rw: set[int] = set()
    out_keys, out_ctxs, dropped = [], [], [0, 0]
    for i, c in enumerate(ctxs):
        k = keys[i] if i < len(keys) else None
        if (id(k), id(c)) in seen_ctx:
            dropped[0] += 1
            continue
        seen_ctx.add((id(k), id(c)))
        rws = list(c)
        out_ctxs.append(list({id(r): r for r in rws if id(r) not in seen_rw}.values()))
        seen_rw.update(map(id, rws))
        dropped[1] += len(rws) - len(out_ctxs[-1])
        if i < len(keys):
            out_keys.append(k)
    if any(dropped):
        what = " and ".join(f"{n:,} {kind}" for n, kind in zip(dropped, ("rewrite contexts", "rewrites"), strict=True)
                            if n)
        warnings.warn(f"{path}: {what} listed more than once (the same object) shown once", stacklevel=1)
    return out_keys + keys[len(ctxs):], out_ctxs


EDGE_BUDGET_MIN = 1 << 20
MAX_OP = 1 << 16  # Ops are numbered from 1 (about 100 of them): past this, not an Ops value
MAX_DEPTH = 1 << 16  # rewrites nest a few deep: past this, not a depth


def edge_budget(path: str) -> int:
    """How many source references a UOp graph from this file may hold: one per byte of the file. A tinygrad
    pickle spends at least a byte on each (an id, or a memo reference); only a shared source list, which no
    tinygrad release writes, holds more, and walking it would cost as much as the references it stands for."""
    try:
        return max(os.stat(path).st_size, EDGE_BUDGET_MIN)
    except OSError:
        return EDGE_BUDGET_MIN


class _UOpTable:
    """Numbers UOps: ids from uop_fields as they are, 0.10.x UOp objects by identity."""

    def __init__(self, fields: dict | None, budget: int) -> None:
        self.fields = fields
        self.budget = budget  # source references left (edge_budget)
        self.ids: dict[int, int] = {}  # id(UOp stand-in) → table id (0.10.x)
        self.raw: dict[int, tuple] = dict(fields) if fields else {}
        bad = next((i for i, f in self.raw.items() if not _uop_fields(f)), None)
        if bad is not None:
            raise InputError(f"uop_fields[{brief(bad)}] is {brief(self.raw[bad])}, not (op, dtype, sources, arg, …)")
        self.uops: dict[int, UOpRec] = {}

    def add_rewrite(self, r: Any) -> None:
        if self.fields is not None:
            return
        self.ref(r.__dict__.get("sink"))
        for m in map(_match_tuple, sequence(r.__dict__.get("matches"))):
            self.ref(m[0])
            if len(m) > 1:
                self.ref(m[1])

    def ref(self, u: Any) -> int | None:
        """Table id of a UOp (an int id already, or a 0.10.x UOp object numbered here)."""
        if u is None or isinstance(u, int):
            return u
        if (i := self.ids.get(id(u))) is not None:
            return i
        for x in post_order(u, _uop_src, self.ids, key=id, budget=self.budget):  # ids are stable: objects stay alive
            i = self.ids[id(x)] = len(self.ids)
            v = uop_view(x)  # _uop_src checked it is one
            self.budget -= len(v.src)
            self.raw[i] = (v.op, v.dtype, tuple(self.ids[id(s)] for s in v.src), v.arg, v.tag)
        return self.ids[id(u)]

    def const_leaves(self) -> list[tuple[int, bool]]:
        return [leaf for f in self.raw.values() if (leaf := uop_leaf(*f[:4])) is not None]

    def name_ops(self, release: Release) -> None:
        ops, dtype_text, raw = enum_table(release.name), DTypeText(release.name), self.raw
        if sum(map(len, (f[2] for f in raw.values()))) > self.budget:
            raise BudgetError("the UOp table holds more source references than its budget")
        ids = list(chain(raw, chain.from_iterable(f[2] for f in raw.values())))
        if not {int}.issuperset(map(type, ids)) or (ids and not -INT64 <= min(ids) <= max(ids) < INT64):
            bad = next(i for i, f in raw.items() if not all(map(_uop_id, (i, *f[2]))))
            raise InputError(f"UOp {brief(bad)} has an id or source that is not an int64 id")
        if not all(isinstance(f[0], int) and 0 <= f[0] < MAX_OP for f in raw.values()):
            bad = next(i for i, f in raw.items() if not (isinstance(f[0], int) and 0 <= f[0] < MAX_OP))
            raise InputError(f"UOp {bad}: its op is {brief(raw[bad][0])}, not an Ops number")
        names = {op: ops.get(op, f"Ops({op})") for op in {int(f[0]) for f in raw.values()}}
        self.uops.update((i, UOpRec(op := int(f[0]), names[op], dtype_text(f[1]), tuple(f[2]), f[3],
                                    f[4] if len(f) > 4 else None)) for i, f in raw.items())


def _uop_id(x: Any) -> bool:
    return type(x) is int and -INT64 <= x < INT64


def _rewrite_name(name: Any, loc: tuple[str, int] | None) -> str:
    """A rewrite's name; an unnamed one (0.11 records None, which its viewer shows as such) is named by where it ran."""
    if name is not None:
        return capped(text(name))
    return f"graph_rewrite {loc[0].replace(chr(92), '/').rsplit('/', 1)[-1]}:{loc[1]}" if loc else "graph_rewrite"


def _uop_fields(f: Any) -> bool:
    """A UOp table entry: (op, dtype, source ids, arg[, tag[, metadata]])."""
    return type(f) in (tuple, list) and len(f) >= 4 and type(f[2]) in (tuple, list)


def _uop_src(u: Any) -> tuple:
    """A 0.10.x UOp's sources (its REDUCE arguments: op, dtype, sources, arg[, tag])."""
    v = uop_view(u) if class_name(u) == "UOp" else None
    if v is None or type(v.src) is not tuple:
        raise InputError(f"a UOp of the trace is {brief(u)}, not a UOp (op, dtype, sources, arg)")
    return v.src


def _loc(x: Any) -> tuple[str, int] | None:
    if type(x) is tuple and len(x) == 2 and type(x[1]) is int:
        return (text(x[0]), x[1])
    return None


def _pattern_loc(p: Any) -> tuple[str, int] | None:
    """Source location of a match: a (file, line) tuple (0.11+), or a UPat stand-in (0.10.x)."""
    if class_name(p) == "UPat":
        return _loc(p.__dict__.get("location")) or (_loc(get_field(p, "location")) if has(p, "location") else None)
    return _loc(p)


def _match_tuple(m: Any) -> tuple | list:
    if type(m) not in (tuple, list) or not m:
        raise InputError(f"a match is {brief(m)}, not (before, after, pattern, seconds)")
    return m


def _match(m: Any, table: _UOpTable) -> Match:
    m = _match_tuple(m)
    return Match(table.ref(m[0]), table.ref(m[1]) if len(m) > 1 else None, _pattern_loc(m[2]) if len(m) > 2 else None,
                 _seconds(m[3]) if len(m) > 3 else None)


def _depth(x: Any) -> int:
    """A rewrite's nesting depth (0 for anything but a small non-negative int)."""
    return x if type(x) is int and 0 <= x < MAX_DEPTH else 0


def _seconds(x: Any) -> float | None:
    """The time a match took, or None (unknown) for anything but a finite, non-negative float: an infinite or NaN
    time would reach JSON (manifest, `show --json`) as a value JSON has not."""
    return float(x) if isinstance(x, float) and 0 <= x < math.inf else None


def _context(key: Any, rewrites: list, table: _UOpTable, release: str) -> Context:
    out = []
    for r in rewrites:
        d = r.__dict__
        loc = _loc(d.get("loc"))
        out.append(Rewrite(_rewrite_name(d.get("name"), loc), loc, table.ref(d.get("sink")),
                           [_match(m, table) for m in sequence(d.get("matches"))], _depth(d.get("depth")),
                           bool(d.get("bottom_up")), bool(d.get("walk")), bool(d.get("enter_calls"))))
    ret = key.__dict__.get("ret") if class_name(key) == "TracingKey" else None
    return Context(_context_key(key), out, _source(key, out, table.uops), context_cost(ret, out, table.uops, release),
                   uop_list(key, out, table.uops, release))


def _source(key: Any, rewrites: list[Rewrite], uops: dict[int, UOpRec]) -> str | None:
    """Generated source of a codegen context: the SOURCE node its rewrites produced (0.13+), or the ProgramSpec
    carried as the context's TracingKey.ret (0.11/0.12)."""
    d = key.__dict__ if class_name(key) == "TracingKey" else {}
    ret = d.get("ret")
    if class_name(ret) == "ProgramSpec" and isinstance(ret.__dict__.get("src"), str):
        return ret.__dict__["src"]
    if len(d.get("keys") or ()) < 2:  # schedule contexts have one key; codegen ones (name, ast[, program key])
        return None
    # the render's own program: later rewrites (precompile kernels) can reach other kernels' sources
    node = find_node([r for r in rewrites if r.name == LINEARIZE] or rewrites, uops, "SOURCE")
    return node.arg if node is not None and isinstance(node.arg, str) else None


def _context_key(key: Any) -> Key:
    """TracingKey (0.11+), a plain name, or a codegen Kernel object (0.10.x, which carries its name)."""
    if class_name(key) == "Kernel":
        return as_key(text(key.__dict__.get("name") or "kernel"))
    return as_key(key)
