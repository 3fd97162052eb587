"""Replay a tracked graph rewrite from the UOp table and its match list, with tinygrad's semantics, without tinygrad.

What tinygrad's viewer does (tinygrad-formats.md §1.2 "Rewrite graph stepping"): rebuild the input sink; for each
match (u0 → u1) add `replaces[u0] = u1` and substitute *all* replacements so far into the sink; top-down rewrites
advance the sink after each match, bottom-up ones always substitute into the original. `UOp.substitute` is a
bottom-up graph_rewrite whose pattern looks nodes up in `replaces` (to a fixed point, then into the result's sources;
parents whose sources changed are rebuilt and looked up again), or a single-pass walk with `walk=True`; CALL/FUNCTION
bodies are left alone unless `enter_calls`. UOps are hash-consed: equal (op, dtype, src, arg, tag) are one node.

The release decides the details (its traits' `replay`: releases.Replay). A failed substitution (a replacement
cycle) becomes a REWRITE_ERROR node and ends the replay of that rewrite, as in tinygrad; a match naming a missing or
cyclic UOp is a per-step error and is left out.
"""
from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import Any

from ..pickles import Stub, brief, int_text
from ..records import GraphStep, Match, Rewrite, RewriteLog, RewriteSteps, StepGraphs, UOpRec
from ..walks import BudgetError, CycleError, post_order
from .args import ArgText, arg_key
from .look import ERROR_OP, NodeLook
from .releases import enum_table, traits
from .standins import get_field, has, uop_op, uop_src

UOP = "UOp"  # the layout of a UOp stand-in's arguments (standins.LAYOUTS)
CALLS = frozenset({"CALL", "FUNCTION"})
OPAQUE_BODIES = frozenset({"SINK", "PROGRAM", "LINEAR", "COPY", "CUSTOM_FUNCTION"})  # 0.14: UOp._OPAQUE_CALL_BODIES
PASS_DTYPE = frozenset({"LOAD", "UNSHARD", "REDUCE", "AFTER", "RANGE", "CONTIGUOUS", "CONTIGUOUS_BACKWARD", "COPY",
                        "STAGE", "DETACH", "MSTACK", "MSELECT", "ALLREDUCE", "SPECIAL", "EXP2", "LOG2", "SIN", "SQRT",
                        "RECIPROCAL", "NEG", "TRUNC", "RESHAPE", "EXPAND", "PERMUTE", "PAD", "SHRINK", "FLIP"})
WORK_PER_EDGE, WORK_BASE = 64, 4_000_000  # source references a session may create, per one of the UOp table's


def work_budget(log: RewriteLog) -> int:
    """Source references one replay session may create: real sessions stay near 10 per reference of the table; a
    crafted trace (a huge sink rebuilt at each of many matches) would otherwise take hours and gigabytes."""
    return WORK_PER_EDGE * sum(len(u.src) for u in log.uops.values()) + WORK_BASE


SAME_DTYPE = frozenset({"ADD", "MUL", "CDIV", "MAX", "CMOD", "SUB", "FDIV", "FLOORDIV", "FLOORMOD", "IDIV", "MOD",
                        "XOR", "OR", "AND", "POW", "MULACC", "THREEFRY"})


class ReplayError(Exception):
    """A step that cannot be replayed (missing UOp, cycle, failed substitution)."""


class Nodes(NodeLook):
    """Hash-consed UOp nodes (ints) of one replay session: equal (op, dtype, src, arg, tag) are one node. With
    NodeLook, the records.StepNodes that writers draw."""

    def __init__(self, log: RewriteLog, budget: int | None = None) -> None:
        self.table: dict[int, UOpRec] = log.uops
        self.work = work_budget(log) if budget is None else budget  # source references this session may still make
        self.release = log.release.name
        self.op: list[str] = []
        self.dtype: list[str] = []
        self.src: list[tuple[int, ...]] = []
        # what a node is besides its sources, shared by the nodes that differ only there (a rebuild's copies):
        # shape id per node; per shape (op, dtype, arg, tag, key of arg, key of tag)
        self.shape: list[int] = []
        self._shapes: list[tuple[str, str, Any, Any, Hashable, Hashable]] = []
        self._shape_ids: dict[tuple, int] = {}  # (op, dtype, arg key, tag key) → shape
        self._index: dict[tuple[int, tuple[int, ...]], int] = {}  # (shape, sources) → node
        self.calls = False  # whether any node is a CALL/FUNCTION (else no call rule can apply)
        self._loaded: dict[int, int] = {}  # table id → node
        self._keys: dict[int, tuple[Any, Hashable]] = {}  # id(argument object) → (object, key)
        self._embedded: dict[int, tuple[Stub, int]] = {}  # id(UOp stand-in inside an argument) → (it, node)
        self._arg_memo: dict[int, Hashable] = {}  # id(part of an argument) → its key
        self._origin: dict[int, int] = {}  # rebuilt node → the node it copies (StepNodes.origin)
        self._ops = enum_table(self.release)
        self._tags = traits(self.release).replay.tags
        # 0.11/0.12 Kernel args point at their AST by table id
        self.text_of = ArgText(self.release, lambda t: log.uops[t].op_name if t in log.uops else "?")
        self._look_init()

    def __len__(self) -> int:
        return len(self.op)

    def make(self, op: str, dtype: str, src: tuple[int, ...], arg: Any = None, tag: Any = None) -> int:
        sh = self._shape(op, dtype, arg, tag, self.key(arg), self.key(tag))
        n = self._index.get((sh, src))
        return self._add(sh, src) if n is None else n

    def _shape(self, op: str, dtype: str, arg: Any, tag: Any, akey: Hashable, tkey: Hashable) -> int:
        """The shape of (op, dtype, arg, tag), made on first use."""
        sh = self._shape_ids.get((op, dtype, akey, tkey))
        if sh is None:
            sh = self._shape_ids[(op, dtype, akey, tkey)] = len(self._shapes)
            self._shapes.append((op, dtype, arg, tag, akey, tkey))
            if op in CALLS:
                self.calls = True
        return sh

    def _add(self, sh: int, src: tuple[int, ...]) -> int:
        if src:
            self.work -= len(src)
            if self.work < 0:
                raise ReplayError("the replay exceeded its work budget (a corrupt or crafted trace)")
        n = self._index[(sh, src)] = len(self.op)
        op, dtype = self._shapes[sh][:2]
        self.op.append(op)
        self.dtype.append(dtype)
        self.src.append(src)
        self.shape.append(sh)
        return n

    def look_key(self, n: int) -> Hashable:
        return self.shape[n]

    def arg_of(self, n: int) -> Any:
        return self._shapes[self.shape[n]][2]

    def tag_of(self, n: int) -> Any:
        return self._shapes[self.shape[n]][3]

    def rebuild(self, n: int, src: tuple[int, ...], rederive: bool = False) -> int:
        """Node `n` with new sources (tinygrad: UOp(n.op, dtype, new_src, n.arg, n.tag))."""
        sh = self.shape[n]
        if rederive:
            dtype = self._rederived(n, src)
            if dtype != self.dtype[n]:
                op, _, arg, tag, akey, tkey = self._shapes[sh]
                sh = self._shape(op, dtype, arg, tag, akey, tkey)
        m = self._index.get((sh, src))  # the hot path of a replay
        if m is None:
            m = self._add(sh, src)
            if sh == self.shape[n]:  # the same look: n's copy with other sources
                self._origin[m] = n
        return m

    def origins(self) -> dict[int, int]:
        return self._origin

    def _rederived(self, n: int, src: tuple[int, ...]) -> str:
        """0.14's _rebuild_dtype for the common ops: unchanged unless a source's dtype changed."""
        old, dtypes = self.src[n], self.dtype
        if len(old) != len(src) or _same_dtypes(old, src, dtypes):
            return dtypes[n]
        op = self.op[n]
        if op in PASS_DTYPE and src:
            return self.dtype[src[0]]
        if op in SAME_DTYPE and src and len({self.dtype[s] for s in src}) == 1:
            return self.dtype[src[0]]
        return self.dtype[n]

    def error(self, text: str) -> int:
        return self.make(ERROR_OP, "void", (), text)

    def key(self, x: Any) -> Hashable:
        if x is None or type(x) in (int, str, bool, float):
            return x
        hit = self._keys.get(id(x))
        if hit is None:
            hit = self._keys[id(x)] = (x, self._arg_key(x))
        return hit[1]

    def _arg_key(self, x: Any) -> Hashable:
        memo = self._arg_memo
        try:
            # 0.11/0.12: a KERNEL's arg names its AST by table id; tinygrad rebuilds that AST: compare the AST nodes
            if isinstance(x, Stub) and isinstance(ast := x.__dict__.get("ast"), int) and ast in self.table:
                return (x._qualname, self.load(ast), arg_key(x.__dict__.get("metadata"), self.embedded, memo))
            return arg_key(x, self.embedded, memo)
        except ValueError as e:  # nested too deeply
            raise ReplayError(str(e)) from None

    def load(self, tid: int) -> int:
        """The node of UOp `tid` of the table (and of everything below it)."""
        n = self._loaded.get(tid)
        if n is not None:
            return n
        try:
            order = post_order(tid, self._table_src, self._loaded)
        except CycleError as e:
            raise ReplayError(f"UOp {e.node} is its own ancestor (a cycle in the UOp table)") from None
        loaded, make, tags = self._loaded, self.make, self._tags
        for t in order:
            rec = self.table[t]
            loaded[t] = make(rec.op_name, rec.dtype, tuple(loaded[s] for s in rec.src), rec.arg,
                             rec.tag if tags else None)
        return loaded[tid]

    def _table_src(self, t: int) -> tuple[int, ...]:
        rec = self.table.get(t)
        if rec is None:
            raise ReplayError(f"UOp {t} is not in the trace's UOp table")
        return rec.src

    def embedded(self, u: Stub) -> int:
        """Intern a UOp stand-in found inside an argument (op, dtype, src, arg[, tag]; dtype, src and arg optional)."""
        done = self._embedded
        hit = done.get(id(u))
        if hit is not None:
            return hit[1]
        try:
            order = post_order(u, _stub_src, done, key=id, budget=max(self.work, 0))
        except CycleError:
            raise ReplayError("a UOp inside an argument is its own ancestor") from None
        except BudgetError:
            raise ReplayError("the UOps inside an argument exceed the replay's work budget") from None
        for x in order:
            if not isinstance(code := uop_op(x), int):
                raise ReplayError(f"a UOp inside an argument has no op: {brief(x)}")
            op = self._ops.get(int(code), f"Ops({int_text(code)})")
            n = self.make(op, self.text_of.dtype(get_field(x, "dtype", cls=UOP)) if has(x, "dtype", UOP) else "void",
                          tuple(done[id(s)][1] for s in _stub_src(x)),
                          get_field(x, "arg", cls=UOP), get_field(x, "tag", cls=UOP) if self._tags else None)
            done[id(x)] = (x, n)
        return done[id(u)][1]

    def toposort(self, root: int) -> list[int]:
        """Nodes under `root` (included), sources before users, first source first (as UOp.toposort)."""
        return post_order(root, self.src.__getitem__)


def _stub_src(u: Stub) -> tuple:
    if not isinstance(u, Stub) or type(src := uop_src(u)) is not tuple:
        raise ReplayError(f"a UOp inside an argument has a source that is not a UOp: {brief(u)}")
    return src


# ---- substitution ----

def _call_rule(nodes: Nodes, mode: str) -> Callable[[int], bool] | None:
    """Whether a node is a call whose body (src[0]) substitution leaves alone (None: never)."""
    op, src = nodes.op, nodes.src
    if mode == "enter":
        return None
    if mode == "skip":
        return lambda n: op[n] in CALLS and bool(src[n])
    return lambda n: bool(src[n]) and (op[n] == "FUNCTION" or (op[n] == "CALL" and op[src[n][0]] in OPAQUE_BODIES))


def _fixed_point(n: int, dvars: dict[int, int]) -> int:
    seen = {n}
    while (nxt := dvars.get(n)) is not None:
        if nxt in seen:
            raise ReplayError("infinite loop in fixed_point_rewrite (the replacements form a cycle)")
        seen.add(nxt)
        n = nxt
    return n


@dataclass
class Sub:
    """One substitution: the replacements, the call rule, and which nodes may change (`clean` ones cannot: no
    replacement key below them, so tinygrad's rewrite returns them as they are; skipping them changes nothing).

    With `memo` (only where no call body can be skipped, so without `skip` or `clean`), results persist across the
    steps of a replay (they depend only on the node and the replacements): `rev` records which results were computed
    from which nodes, and `invalidate` drops those a new key affects.
    """

    nodes: Nodes
    dvars: dict[int, int]
    skip: Callable[[int], bool] | None  # None: no call bodies to skip
    clean: Callable[[int], bool] | None  # None: every node is looked up (the memo pass, the reference)
    rederive: bool
    memo: dict[int, int] | None = None
    rev: defaultdict[int, set[int]] | None = None


def invalidate(memo: dict[int, int], rev: defaultdict[int, set[int]], key: int) -> None:
    """Drop the remembered results that a new replacement key affects (those computed from it, and so on up)."""
    stack = [key]
    while stack:  # a node's users are popped with it: each is reached at most once per edge
        x = stack.pop()
        memo.pop(x, None)
        users = rev.pop(x, None)
        if users:
            stack.extend(users)


_UNFINISHED = "substitution did not finish (a replacement contains the node it replaces)"


def substitute_reference(sub: Sub, root: int) -> int:
    """The spec of a substitution: tinygrad's bottom-up graph_rewrite with the substitute pattern
    (RewriteContext.unified_rewrite, bpm only) transcribed step by step. Stage 0 looks a node up to a fixed point
    and visits the result's sources; stage 1 keeps it or rebuilds it on its sources' results (and visits the rebuilt
    node); stage 2 links a node to its rebuilt node's result. A node needing a result not there yet waits for it.
    The faster engines (`Engine`) must give what this gives: tests/test_replay_engines.py holds them to it."""
    nodes, dvars, skip, src = sub.nodes, sub.dvars, sub.skip, sub.nodes.src
    replace: dict[int, int] = {}
    waiting: dict[int, list[tuple[int, int, int]]] = {}
    stack, on_stack = [(root, 0, root)], {root}
    while stack:
        n, stage, cur = stack.pop()
        if n in replace:
            continue
        if stage == 0:
            cur = _fixed_point(n, dvars) if n in dvars else n
            if skip is not None and skip(cur):  # a call whose body substitution leaves alone
                replace[src[cur][0]] = src[cur][0]
            stack.append((n, 1, cur))
            for s in reversed(src[cur]):
                if s not in on_stack:
                    stack.append((s, 0, s))
                    on_stack.add(s)
        elif stage == 1:
            if (missing := next((s for s in src[cur] if s not in replace), None)) is not None:
                waiting.setdefault(missing, []).append((n, 1, cur))
                continue
            new = tuple(replace[s] for s in src[cur])
            if new == src[cur]:
                replace[n] = cur
            else:
                rebuilt = nodes.rebuild(cur, new, sub.rederive)
                stack.extend(((n, 2, rebuilt), (rebuilt, 0, rebuilt)))
        elif cur in replace:
            replace[n] = replace[cur]
        else:
            waiting.setdefault(cur, []).append((n, 2, cur))
        if n in replace and n in waiting:
            stack.extend(waiting.pop(n))
    if root not in replace:
        raise ReplayError(_UNFINISHED)
    return replace[root]


def substitute_fixed(sub: Sub, root: int) -> int:
    """substitute_reference, skipping the nodes that cannot change (`clean`) and linking a rebuilt node built on
    settled sources at once."""
    return _FixedPass(sub, root).run(root)


class _FixedPass:
    """One substitute_fixed: results so far, the nodes waiting for a result, the stack of (node, stage, current)."""

    def __init__(self, sub: Sub, root: int) -> None:
        assert sub.clean is not None  # only the memo pass goes without
        self.sub, self.src, self.clean = sub, sub.nodes.src, sub.clean
        self.replace: dict[int, int] = {}
        self.waiting: dict[int, list[tuple[int, int, int]]] = {}
        self.on_stack = {root}
        self.stack = [(root, 0, root)]

    def done(self, n: int, v: int) -> None:
        self.replace[n] = v
        if n in self.waiting:
            self.stack.extend(self.waiting.pop(n))

    def settled(self, s: int) -> bool:
        """Whether source s is clean, and then done (it is its own result: nothing to visit)."""
        if not self.clean(s):
            return False
        self.done(s, s)
        return True

    def run(self, root: int) -> int:
        replace, stack = self.replace, self.stack
        while stack:
            n, stage, cur = stack.pop()
            if n in replace:
                continue
            if stage == 0 and (cur := self.visit(n)) < 0:
                continue
            if stage <= 1:
                self.rebuild(n, cur)
            elif (r := replace.get(cur)) is None:  # stage 2: link n to its rebuilt node's result
                self.waiting.setdefault(cur, []).append((n, 2, cur))
            else:
                self.done(n, r)
        if root not in replace:
            raise ReplayError(_UNFINISHED)
        return replace[root]

    def visit(self, n: int) -> int:
        """Stage 0: look n up (to a fixed point) and push the result's sources; the result, or -1 when n is done or
        its sources were pushed (n comes back in stage 1)."""
        replace, src, skip, dvars = self.replace, self.src, self.sub.skip, self.sub.dvars
        if self.clean(n):
            self.done(n, n)
            return -1
        cur = _fixed_point(n, dvars) if n in dvars else n
        if skip is not None and skip(cur):
            replace[src[cur][0]] = src[cur][0]
        # sources to visit, in push order (popping one already done would do nothing); clean ones are done here,
        # without a stack round trip (a wide node has hundreds): all of them when no call body is skipped (then the
        # order of visits cannot change a result), else the first ones popped (nothing else would happen before)
        push = list(dict.fromkeys(s for s in reversed(src[cur]) if s not in replace and s not in self.on_stack))
        if skip is None:
            push = [s for s in push if not self.settled(s)]
        else:
            while push and push[-1] not in self.waiting and self.settled(push[-1]):
                push.pop()
        self.on_stack.update(push)
        if push or any(s not in replace for s in src[cur]):
            self.stack.append((n, 1, cur))
            self.stack.extend([(s, 0, s) for s in push])
            return -1
        return cur

    def rebuild(self, n: int, cur: int) -> None:
        """Stage 1, all sources done: keep cur, or rebuild it and look the rebuilt node up again."""
        replace, dvars, skip, waiting = self.replace, self.sub.dvars, self.sub.skip, self.waiting
        old = self.src[cur]
        new = tuple(map(replace.get, old))
        if None in new:
            waiting.setdefault(old[new.index(None)], []).append((n, 1, cur))
        elif new == old:
            self.done(n, cur)
        else:
            rebuilt = self.sub.nodes.rebuild(cur, new, self.sub.rederive)
            if rebuilt in replace:  # what popping (rebuilt, 0) and then (n, 2) would do
                self.done(n, replace[rebuilt])
            elif (rebuilt not in dvars and rebuilt not in waiting and (skip is None or not skip(rebuilt))
                  and tuple(map(replace.get, new)) == new):
                # the usual case: its sources are done and are their own results, so is it (as its visit would
                # find, with nothing else happening in between)
                self.done(rebuilt, rebuilt)
                self.done(n, rebuilt)
            else:
                self.stack.append((n, 2, rebuilt))
                self.stack.append((rebuilt, 0, rebuilt))


def _substitute_memo(sub: Sub, root: int) -> int:
    """substitute_reference when no call body is skipped, so the order of visits cannot change a result: a plain
    depth-first pass over the nodes without a result yet (after a step, the ancestors of its key). A node's result
    is its fixed point's, or, if that node's sources changed, the result of the node rebuilt on their results.
    Needing a node's result while computing it is a replacement cycle."""
    return _MemoPass(sub).run(root)


class _MemoPass:
    """One memo substitution: the remembered results (`Sub.memo`, kept across steps, with `Sub.rev` recording what
    each was computed from), the nodes being computed and the nodes waiting for their rebuilt node's result."""

    def __init__(self, sub: Sub) -> None:
        assert sub.memo is not None and sub.rev is not None
        self.nodes, self.dvars, self.rev, self.rederive = sub.nodes, sub.dvars, sub.rev, sub.rederive
        self.replace = sub.memo
        self.active: dict[int, int] = {}  # nodes being computed → their fixed point
        self.linked: dict[int, int] = {}  # nodes waiting for the result of their rebuilt node
        self.stack: list[int] = []

    def finish(self, n: int, v: int, deps: tuple[int, ...]) -> None:
        self.replace[n] = v
        _depend(self.rev, deps, n)
        del self.active[n]
        self.stack.pop()

    def run(self, root: int) -> int:
        replace, active, linked, dvars, src = self.replace, self.active, self.linked, self.dvars, self.nodes.src
        stack, looked = self.stack, replace.get
        stack.append(root)
        while stack:
            n = stack[-1]
            cur = active.get(n)
            if cur is None:  # first visit
                if n in replace:
                    stack.pop()
                    continue
                cur = n
                if n in dvars:
                    cur = _fixed_point(n, dvars)
                    _chain_deps(n, dvars, self.rev)
                active[n] = cur
            elif (r := linked.pop(n, None)) is not None:  # back from its rebuilt node
                self.finish(n, replace[r], (r,))
                continue
            old = src[cur]
            pending = [s for s in old if s not in replace]
            if pending:
                if any(s in active for s in pending):
                    raise ReplayError(_UNFINISHED)
                stack.extend(reversed(pending))
                continue
            new = tuple(map(looked, old))
            if new == old:
                self.finish(n, cur, old)
            else:
                self.rebuilt(n, cur, old, new)
        return replace[root]

    def rebuilt(self, n: int, cur: int, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        """n's sources have results other than themselves: its result is that of the node rebuilt on them."""
        replace, active = self.replace, self.active
        rebuilt = self.nodes.rebuild(cur, new, self.rederive)
        _depend(self.rev, old, n)
        if rebuilt in replace:
            self.finish(n, replace[rebuilt], (rebuilt,))
        elif rebuilt not in self.dvars and rebuilt not in active and tuple(map(replace.get, new)) == new:
            replace[rebuilt] = rebuilt  # the usual case: built on settled nodes, it is its own result
            _depend(self.rev, new, rebuilt)
            self.finish(n, rebuilt, (rebuilt,))
        elif rebuilt in active:
            raise ReplayError(_UNFINISHED)
        else:
            self.linked[n] = rebuilt
            self.stack.append(rebuilt)


def _same_dtypes(old: tuple[int, ...], new: tuple[int, ...], dtypes: list[str]) -> bool:
    """Whether each changed source has its old source's dtype (a plain loop: this runs at every rebuild)."""
    for a, b in zip(old, new, strict=True):  # noqa: SIM110 - all() with a generator is twice as slow here
        if a != b and dtypes[a] != dtypes[b]:
            return False
    return True


def _depend(rev: defaultdict[int, set[int]], deps: tuple[int, ...], n: int) -> None:
    """rev[d].add(n) for each d; in C for many (a sink has hundreds of sources, and is rebuilt at every step)."""
    if len(deps) > 16:
        deque(map(set.add, map(rev.__getitem__, deps), repeat(n)), 0)
    else:
        for d in deps:
            rev[d].add(n)


def _chain_deps(n: int, dvars: dict[int, int], rev: defaultdict[int, set[int]]) -> None:
    """n's result depends on the lookups along its replacement chain."""
    x = dvars[n]
    seen = {n}
    while x not in seen:
        seen.add(x)
        rev[x].add(n)
        x = dvars.get(x, x)


def substitute_walk(sub: Sub, root: int) -> int:
    """Single-pass walk (RewriteContext.walk_rewrite with a bottom-up lookup; also 0.10.0's _replace_uop)."""
    nodes, dvars = sub.nodes, sub.dvars
    skip, clean = sub.skip or _never, sub.clean or _never
    src = nodes.src
    replace: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        n, visited = stack.pop()
        if n in replace:
            continue
        if not visited:
            if (r := dvars.get(n)) is not None:
                replace[n] = r
                continue
            if clean(n):
                replace[n] = n
                continue
            stack.append((n, True))
            if skip(n):
                replace[src[n][0]] = src[n][0]
            stack.extend((s, False) for s in reversed(src[n]) if s not in replace)
        else:
            new = tuple(replace.get(s, s) for s in src[n])
            replace[n] = nodes.rebuild(n, new, sub.rederive) if new != src[n] else n
    return replace.get(root, root)


class LiveGraph:
    """The node set of one graph, kept up to date as its root changes: reference counts and users per node, so
    that a step costs in proportion to what it changes, not to the graph."""

    def __init__(self, nodes: Nodes, root: int) -> None:
        self.src = nodes.src
        self.ref: dict[int, int] = {}
        self.users: dict[int, set[int]] | None = None  # built when first needed, then kept up to date
        self.root = root
        self.added = self._add(root)
        self.ref[root] += 1

    def __contains__(self, n: int) -> bool:
        return n in self.ref

    def __len__(self) -> int:
        return len(self.ref)

    def _add(self, root: int) -> list[int]:
        """Register every node under `root` not yet present; return them (users before sources)."""
        ref, users, src = self.ref, self.users, self.src
        if root in ref:
            return []
        ref[root] = 0
        added = [root]
        stack = [root]
        if users is not None:
            users[root] = set()
        while stack:  # each new node once: count its uses of its sources (and record them), visit the new ones
            n = stack.pop()
            for s in src[n]:
                if s in ref:
                    ref[s] += 1
                else:
                    ref[s] = 1
                    added.append(s)
                    stack.append(s)
                    if users is not None:
                        users[s] = set()
                if users is not None:
                    users[s].add(n)
        return added

    def _drop(self, n: int) -> list[int]:
        ref, users, src = self.ref, self.users, self.src
        ref[n] -= 1
        removed: list[int] = []
        stack = [n] if ref[n] == 0 else []
        while stack:
            x = stack.pop()
            del ref[x]
            removed.append(x)
            if users is not None:
                del users[x]
                for s in src[x]:
                    users[s].discard(x)
            for s in src[x]:
                ref[s] -= 1
                if ref[s] == 0:
                    stack.append(s)
        return removed

    def set_root(self, root: int) -> tuple[list[int], list[int]]:
        """Make `root` the graph's root; return (added, removed) nodes."""
        if root == self.root:
            return [], []
        added = self._add(root)
        self.ref[root] += 1
        old, self.root = self.root, root
        return added, self._drop(old)

    def ancestors(self, seeds: Iterable[int], into: set[int]) -> list[int]:
        """Add to `into` the seeds present in the graph and every node above them; return those it did not hold."""
        users = self.users
        if users is None:
            users = self.users = {n: set() for n in self.ref}
            for n in self.ref:
                for s in self.src[n]:
                    users[s].add(n)
        stack = [s for s in seeds if s in self.ref and s not in into]
        into.update(stack)
        added = list(stack)
        while stack:
            for u in users[stack.pop()]:
                if u not in into:
                    into.add(u)
                    stack.append(u)
                    added.append(u)
        return added


def _never(n: int) -> bool:
    return False


class Cleaner:
    """clean(n): no replacement key at or below n. Exact for nodes of `base` (`dirty` holds every node of base with a
    key below it); computed and remembered for nodes outside it. A bottom-up rewrite keeps one cleaner for all its
    steps (its base is the input graph; replacements pile up outside it): `dirtied` forgets what a new key changes."""

    def __init__(self, base: LiveGraph, dirty: set[int], dvars: dict[int, int], src: list[tuple[int, ...]]) -> None:
        self.in_base, self.dirty, self.dvars, self.src = base.ref, dirty, dvars, src
        self.memo: dict[int, bool] = {}
        self.users: defaultdict[int, list[int]] = defaultdict(list)  # source → the outside nodes remembered over it

    def __call__(self, n: int) -> bool:
        in_base, dirty, memo = self.in_base, self.dirty, self.memo
        if n in in_base:
            return n not in dirty
        if (hit := memo.get(n)) is not None:
            return hit
        src, dvars, users = self.src, self.dvars, self.users
        stack = [n]
        while stack:  # iterative: replacement subgraphs can be deep
            x = stack[-1]
            if x in dvars:
                memo[x] = False
                stack.pop()
                continue
            pending = [s for s in src[x] if s not in in_base and s not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            memo[x] = all((s not in dirty) if s in in_base else memo[s] for s in src[x])
            if memo[x]:  # only a clean result can change (a key only ever adds dirt)
                for s in src[x]:
                    users[s].append(x)
        return memo[n]

    def dirtied(self, nodes: Iterable[int]) -> None:
        """Forget the clean results at or above `nodes` (a new key, and the nodes of base it made dirty)."""
        memo, users = self.memo, self.users
        stack = [n for n in nodes if memo.pop(n, True)]
        while stack:
            for u in users.pop(stack.pop(), ()):
                if memo.pop(u, False):  # a dirty result stays, and so do its users'
                    stack.append(u)


# ---- steps ----

def real_matches(rw: Rewrite) -> list[tuple[int, Match]]:
    """(index, match) of the matches that replaced something (0.10.0 also records visits without a match)."""
    return [(i, m) for i, m in enumerate(rw.matches) if m.after is not None]


@dataclass(frozen=True)
class Engine:
    """The speed-ups a replay takes on top of the reference (substitute_reference or substitute_walk, every step
    substituted into the whole graph). Each pays on benchmarks/bench_replay.py; tests/test_replay_engines.py holds
    them to the reference on every fixture and corpus set."""

    fast_path: bool = True  # _Run._fast: a top-down step that only swaps u0 for u1 rebuilds u0's users
    memo: bool = True  # results kept across steps where no call body can be skipped (_substitute_memo)
    clean: bool = True  # nodes with no replacement key below them skipped (Cleaner, substitute_fixed)


FAST = Engine()
REFERENCE = Engine(fast_path=False, memo=False, clean=False)


class Replayer:
    """Replays rewrites of one log into one Nodes session (share it within a context: chained rewrites share nodes)."""

    def __init__(self, nodes: Nodes, engine: Engine = FAST) -> None:
        self.nodes, self.engine = nodes, engine
        self.rules = traits(nodes.release).replay

    def replay(self, rw: Rewrite, changes: bool = True) -> RewriteSteps:
        """The steps of `rw`; without `changes`, a step's created and rebuilt nodes are left empty."""
        out = RewriteSteps(rw)
        matches = real_matches(rw)
        try:
            sink = self.nodes.load(rw.sink)
        except ReplayError as e:
            err = f"input graph: {e}"
            out.steps = [GraphStep(0, error=err)] + [GraphStep(k, i, error=err) for k, (i, _) in enumerate(matches, 1)]
            return out
        live = LiveGraph(self.nodes, sink)
        out.steps.append(GraphStep(0, sink=sink, size=len(live)))
        if matches:
            _Run(self, out.rewrite, live, changes).steps(out.steps, matches)
        return out


class _Run:
    """The match loop of one rewrite (tinygrad: get_full_rewrite)."""

    def __init__(self, r: Replayer, rw: Rewrite, live: LiveGraph, changes: bool = True) -> None:
        rules, self.nodes, self.changes, self.engine = r.rules, r.nodes, changes, r.engine
        walk = rules.always_walk or (rules.walk_flag and rw.walk)
        self.sub = substitute_walk if walk else substitute_fixed if self.engine.clean else substitute_reference
        mode = "enter" if rules.call_bodies == "opaque" and rw.enter_calls else rules.call_bodies
        self.skip = _call_rule(self.nodes, mode)
        self.rederive = rules.rebuild_dtype  # becomes needed when a replacement changes a dtype (see apply)
        self.retyped = False
        self.advance = {"always": True, "never": False}.get(rules.advance, not rw.bottom_up)
        self.live = live  # the graph of the latest step
        self.base = live if self.advance else LiveGraph(self.nodes, live.root)  # what each substitution starts from
        self.dvars: dict[int, int] = {}
        self.keys_in_base: set[int] = set()  # advancing: replacement keys present in the current graph
        self.dirty0: set[int] = set()  # bottom-up: nodes of the original graph with a key below them
        # bottom-up: one cleaner for all steps; advancing: one per step, over that step's base (_clean)
        self.cleaner = None if self.advance or not self.engine.clean else \
            Cleaner(self.base, self.dirty0, self.dvars, self.nodes.src)
        # results persist across steps unless a call body could be skipped (tinygrad's order-dependent rule)
        calls = self._has_calls(live.ref)
        self.memo: dict[int, int] | None = None if walk or calls or not self.engine.memo else {}
        self.rev: defaultdict[int, set[int]] = defaultdict(set)
        self.walk = walk
        self.fast = self.advance and not calls and self.engine.fast_path  # see _fast

    def _has_calls(self, nodes: Iterable[int]) -> bool:  # no CALL/FUNCTION in the session: none among `nodes`
        return self.skip is not None and self.nodes.calls and any(self.skip(n) for n in nodes)

    def steps(self, out: list[GraphStep], matches: list[tuple[int, Match]]) -> None:
        failed = None
        for k, (i, m) in enumerate(matches, 1):
            if failed is not None:
                out.append(GraphStep(k, i, error=f"not replayed: step {failed} failed"))
                continue
            try:
                u0, u1 = self.nodes.load(m.before), self.nodes.load(m.after)  # type: ignore[arg-type]
            except ReplayError as e:
                out.append(GraphStep(k, i, self.live.root, size=len(self.live), error=f"match left out: {e}"))
                continue
            step = self.apply(k, i, u0, u1)
            failed = k if step.error else None
            out.append(step)

    def apply(self, k: int, i: int, u0: int, u1: int) -> GraphStep:
        # while every replacement keeps its key's dtype, no rebuilt node's sources change dtype: none re-derives
        retyped = u0 != u1 and self.nodes.dtype[u0] != self.nodes.dtype[u1]
        self.retyped = self.retyped or retyped
        if u0 != u1:
            self.dvars[u0] = u1
        error = None
        try:
            new = self._fast(u0, u1, retyped)
            if new is None:
                sub = self._sub(u0)
                new = (self.sub if sub.memo is None else _substitute_memo)(sub, self.base.root)
        except ReplayError as e:
            new, error = self.nodes.error(str(e)), f"substitution failed: {e}"
        added, removed = self.live.set_root(new)
        fresh = set(added)
        if self.advance:
            self.keys_in_base |= self.dvars.keys() & fresh
            self.keys_in_base.difference_update(removed)
        if (self.memo is not None or self.fast) and self._has_calls(added):
            self.memo, self.fast = None, False
        if not self.changes:
            return GraphStep(k, i, new, u0, u1, size=len(self.live), error=error)
        created = self._created(u1, fresh)
        return GraphStep(k, i, new, u0, u1, created, frozenset(fresh - created), len(self.live), error)

    def _fast(self, u0: int, u1: int, retyped: bool) -> int | None:
        """The new root when a top-down step only swaps u0 for u1 — the current graph holds no earlier replacement
        key nor a call whose body is skipped, u1 holds none of u0 and its users, and (unless the substitution is a
        single-pass walk, which never looks into a replacement or a rebuilt node) u1 adds no key and no rebuilt
        user of u0 is a key — which is what the full substitution would give: u0's users rebuilt, sources first
        (node ids grow with creation, so sorting them is a topological order). None when any condition fails: the
        general substitution then runs."""
        live, dvars, nodes, walk = self.live, self.dvars, self.nodes, self.walk
        if not self.fast or self.keys_in_base or u0 == u1 or (u1 in dvars and not walk) or u0 not in live:
            return None
        src, rebuild, rederive = nodes.src, nodes.rebuild, self.rederive
        above: set[int] = set()  # u0 and its users, which the swap rebuilds
        live.ancestors([u0], above)
        stack, seen = [u1], {u1}
        while stack:  # the replacement's new part: none of `above` in it, nor (looked into) a key
            x = stack.pop()
            if x in above or (x in dvars and not walk):
                return None
            for s in src[x]:
                if s not in seen and (s not in live or s in above):
                    seen.add(s)
                    stack.append(s)
        new = {u0: u1}
        get = new.get
        above.discard(u0)
        rederive = rederive and retyped  # the graph holds no other key: only u1 can change a dtype
        for x in sorted(above):
            rebuilt = rebuild(x, tuple(map(get, src[x], src[x])), rederive)
            if rebuilt in dvars and not walk:
                return None
            new[x] = rebuilt
        if self.memo is not None:
            invalidate(self.memo, self.rev, u0)
        return new.get(live.root, live.root)

    def _sub(self, u0: int) -> Sub:
        # bookkeeping of where the keys are, in both modes (the memo is dropped when a skippable call shows up)
        if self.advance:
            if u0 in self.base:
                self.keys_in_base.add(u0)
        elif self.cleaner is not None:
            self.cleaner.dirtied([u0, *self.base.ancestors([u0], self.dirty0)])
        rederive = self.rederive and self.retyped
        if self.memo is not None:
            invalidate(self.memo, self.rev, u0)
            return Sub(self.nodes, self.dvars, None, None, rederive, self.memo, self.rev)
        skip = self.skip if self.nodes.calls else None  # no call body anywhere: none to skip
        return Sub(self.nodes, self.dvars, skip, self._clean() if self.engine.clean else None, rederive)

    def _clean(self) -> Cleaner:
        """Bottom-up, the rewrite's own cleaner; advancing, one for this step's base (the latest graph)."""
        if self.cleaner is not None:
            return self.cleaner
        dirty: set[int] = set()
        self.base.ancestors(self.keys_in_base, dirty)
        return Cleaner(self.base, dirty, self.dvars, self.nodes.src)

    def _created(self, u1: int, fresh: set[int]) -> frozenset[int]:
        """The new nodes of this graph that belong to the replacement (u1 and its new sources)."""
        if not fresh:
            return frozenset()
        src, live = self.nodes.src, self.live
        out: set[int] = set()
        seen = {u1}
        stack = [u1]
        while stack:
            x = stack.pop()
            if x in fresh:
                out.add(x)
            elif x in live:
                continue  # an old node: nothing new below it
            for s in src[x]:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return frozenset(out)



def session(log: RewriteLog, budget: int | None = None, engine: Engine = FAST) -> Replayer:
    """A new replay session over the log's UOp table (`budget`: see work_budget)."""
    return Replayer(Nodes(log, budget), engine)


def step_graphs(log: RewriteLog) -> StepGraphs:
    """The step graphs of a rewrites trace (records.StepGraphs), replayed on demand with its release's semantics."""
    return StepGraphs(log.path, log.release, log.contexts, partial(session, log, work_budget(log)))
