"""Replay a tracked graph rewrite from the UOp table and its match list, with tinygrad's semantics, without tinygrad.

What tinygrad's viewer does (tinygrad-formats.md §1.2 "Rewrite graph stepping"): rebuild the input sink; for each
match (u0 → u1) add `replaces[u0] = u1` and substitute *all* replacements so far into the sink; top-down rewrites
advance the sink after each match, bottom-up ones always substitute into the original. `UOp.substitute` is a
bottom-up graph_rewrite whose pattern looks nodes up in `replaces` (to a fixed point, then into the result's sources;
parents whose sources changed are rebuilt and looked up again), or a single-pass walk with `walk=True`; CALL/FUNCTION
bodies are left alone unless `enter_calls`. UOps are hash-consed: equal (op, dtype, src, arg, tag) are one node.

The release decides the details (see `semantics`). A failed substitution (a replacement cycle) becomes a
REWRITE_ERROR node and ends the replay of that rewrite, as in tinygrad; a match naming a missing or cyclic UOp is a
per-step error and is left out.
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
from .releases import enum_table

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


@dataclass(frozen=True)
class Semantics:
    """How one tinygrad release's viewer replays matches."""

    walk_flag: bool  # honour TrackedGraphRewrite.walk (0.14+); else always the fixed-point substitute
    always_walk: bool  # 0.10.0's viewer: one lookup per node, no descent into replacements
    call_bodies: str  # "enter": substitute everywhere; "skip": CALL/FUNCTION bodies untouched; "opaque": 0.14 rule
    rebuild_dtype: bool  # 0.14+: a rebuilt node re-derives its dtype when a source's dtype changed
    advance: str = "flag"  # "flag": top-down rewrites advance the sink, bottom-up ones do not; "always"; "never"
    tags: bool = True  # UOps have a tag (0.11+; a 0.10.x UOp's fifth field is metadata or a buffer, not a tag)


def semantics(release: str) -> Semantics:
    """The replay rules of `release`'s own viewer (serve.py get_details/get_full_rewrite + UOp.substitute)."""
    if release == "0.10.0":
        return Semantics(False, True, "enter", False, "always", tags=False)
    if release == "0.10.1":  # its viewer substitutes every step into the input graph
        return Semantics(False, False, "enter", False, "never", tags=False)
    if release in ("0.10.2", "0.10.3"):
        return Semantics(False, False, "enter", False, tags=False)
    if release in ("0.11.0", "0.12.0"):
        return Semantics(False, False, "enter", False)
    if release == "0.13.0":
        return Semantics(False, False, "skip", False)
    return Semantics(True, False, "opaque", True)  # 0.14.0, master, and anything newer


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
        self._tags = semantics(self.release).tags
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
        """Intern a UOp stand-in found inside an argument (its _args: op, dtype, src, arg[, tag])."""
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
            a = x._args
            if not a or not isinstance(a[0], int):
                raise ReplayError(f"a UOp inside an argument has no op: {brief(x)}")
            op = self._ops.get(int(a[0]), f"Ops({int_text(a[0])})")
            n = self.make(op, self.text_of.dtype(a[1]) if len(a) > 1 else "void",
                          tuple(done[id(s)][1] for s in _stub_src(x)),
                          a[3] if len(a) > 3 else None, a[4] if len(a) > 4 and self._tags else None)
            done[id(x)] = (x, n)
        return done[id(u)][1]

    def toposort(self, root: int) -> list[int]:
        """Nodes under `root` (included), sources before users, first source first (as UOp.toposort)."""
        return post_order(root, self.src.__getitem__)


def _stub_src(u: Stub) -> tuple:
    if not isinstance(u, Stub) or (len(u._args) > 2 and type(u._args[2]) is not tuple):
        raise ReplayError(f"a UOp inside an argument has a source that is not a UOp: {brief(u)}")
    return u._args[2] if len(u._args) > 2 else ()


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
    clean: Callable[[int], bool] | None  # None only with memo (that pass looks every node up)
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


def substitute_fixed(sub: Sub, root: int) -> int:
    """tinygrad's bottom-up graph_rewrite with the substitute pattern (RewriteContext.unified_rewrite, bpm only)."""
    if sub.memo is not None:
        return _substitute_memo(sub, root)
    nodes, dvars, skip, clean = sub.nodes, sub.dvars, sub.skip, sub.clean
    assert clean is not None  # only the memo pass goes without
    src = nodes.src
    replace: dict[int, int] = {}
    waiting: dict[int, list[tuple[int, int, int]]] = {}
    on_stack = {root}
    stack = [(root, 0, root)]
    looked = replace.get

    def done(n: int, v: int) -> None:
        replace[n] = v
        if n in waiting:
            stack.extend(waiting.pop(n))

    def settled(s: int) -> bool:
        """Whether source s is clean, and then done (it is its own result: nothing to visit)."""
        if not clean(s):
            return False
        done(s, s)
        return True

    while stack:
        n, stage, cur = stack.pop()
        if n in replace:
            continue
        if stage == 0:  # look the node up (to a fixed point), then visit the result's sources
            if clean(n):
                done(n, n)
                continue
            if n in dvars:
                cur = _fixed_point(n, dvars)
            if skip is not None and skip(cur):
                replace[src[cur][0]] = src[cur][0]
            # sources to visit, in push order (popping one already done would do nothing); clean ones are done
            # here, without a stack round trip (a wide node has hundreds): all of them when no call body is
            # skipped (then the order of visits cannot change a result), else the first ones popped (nothing else
            # would happen before they are done)
            push = list(dict.fromkeys(s for s in reversed(src[cur]) if s not in replace and s not in on_stack))
            if skip is None:
                push = [s for s in push if not settled(s)]
            else:
                while push and push[-1] not in waiting and settled(push[-1]):
                    push.pop()
            on_stack.update(push)
            if push or any(s not in replace for s in src[cur]):
                stack.append((n, 1, cur))
                stack.extend([(s, 0, s) for s in push])
                continue
        if stage <= 1:  # all sources done: keep, or rebuild and look the rebuilt node up again
            old = src[cur]
            new = tuple(map(looked, old))
            if None in new:
                waiting.setdefault(old[new.index(None)], []).append((n, 1, cur))
            elif new == old:
                done(n, cur)
            else:
                rebuilt = nodes.rebuild(cur, new, sub.rederive)
                if rebuilt in replace:  # what popping (rebuilt, 0) and then (n, 2) would do
                    done(n, replace[rebuilt])
                elif (rebuilt not in dvars and rebuilt not in waiting and (skip is None or not skip(rebuilt))
                      and tuple(map(looked, new)) == new):
                    # the usual case: its sources are done and are their own results, so is it (as its visit
                    # would find, with nothing else happening in between)
                    done(rebuilt, rebuilt)
                    done(n, rebuilt)
                else:
                    stack.append((n, 2, rebuilt))
                    stack.append((rebuilt, 0, rebuilt))
        elif (r := replace.get(cur)) is None:  # stage 2: link n to its rebuilt node's result
            waiting.setdefault(cur, []).append((n, 2, cur))
        else:
            done(n, r)
    if root not in replace:
        raise ReplayError(_UNFINISHED)
    return replace[root]


def _substitute_memo(sub: Sub, root: int) -> int:
    """substitute_fixed when no call body is skipped, so the order of visits cannot change a result: a plain
    depth-first pass over the nodes without a result yet (after a step, the ancestors of its key). A node's result
    is its fixed point's, or, if that node's sources changed, the result of the node rebuilt on their results.
    Needing a node's result while computing it is a replacement cycle."""
    nodes, dvars, rev, rederive = sub.nodes, sub.dvars, sub.rev, sub.rederive
    replace: dict[int, int] = sub.memo  # type: ignore[assignment]
    assert rev is not None
    src, rebuild, looked = nodes.src, nodes.rebuild, replace.get
    active: dict[int, int] = {}  # nodes being computed → their fixed point
    linked: dict[int, int] = {}  # nodes waiting for the result of their rebuilt node
    stack = [root]

    def finish(n: int, v: int, deps: tuple[int, ...]) -> None:
        replace[n] = v
        _depend(rev, deps, n)
        del active[n]
        stack.pop()

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
                _chain_deps(n, dvars, rev)
            active[n] = cur
        elif (r := linked.pop(n, None)) is not None:  # back from its rebuilt node
            finish(n, replace[r], (r,))
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
            finish(n, cur, old)
            continue
        rebuilt = rebuild(cur, new, rederive)
        _depend(rev, old, n)
        if rebuilt in replace:
            finish(n, replace[rebuilt], (rebuilt,))
        elif rebuilt not in dvars and rebuilt not in active and tuple(map(looked, new)) == new:
            replace[rebuilt] = rebuilt  # the usual case: built on settled nodes, it is its own result
            _depend(rev, new, rebuilt)
            finish(n, rebuilt, (rebuilt,))
        elif rebuilt in active:
            raise ReplayError(_UNFINISHED)
        else:
            linked[n] = rebuilt
            stack.append(rebuilt)
    return replace[root]


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


class Replayer:
    """Replays rewrites of one log into one Nodes session (share it within a context: chained rewrites share nodes)."""

    def __init__(self, nodes: Nodes) -> None:
        self.nodes = nodes
        self.rules = semantics(nodes.release)

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
        rules, self.nodes, self.changes = r.rules, r.nodes, changes
        walk = rules.always_walk or (rules.walk_flag and rw.walk)
        self.sub = substitute_walk if walk else substitute_fixed
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
        self.cleaner = None if self.advance else Cleaner(self.base, self.dirty0, self.dvars, self.nodes.src)
        # results persist across steps unless a call body could be skipped (tinygrad's order-dependent rule)
        calls = self._has_calls(live.ref)
        self.memo: dict[int, int] | None = None if walk or calls else {}
        self.rev: defaultdict[int, set[int]] = defaultdict(set)
        self.walk = walk
        self.fast = self.advance and not calls  # see _fast

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
                new = self.sub(self._sub(u0), self.base.root)
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
        return Sub(self.nodes, self.dvars, skip, self._clean(), rederive)

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



def session(log: RewriteLog, budget: int | None = None) -> Replayer:
    """A new replay session over the log's UOp table (`budget`: see work_budget)."""
    return Replayer(Nodes(log, budget))


def step_graphs(log: RewriteLog) -> StepGraphs:
    """The step graphs of a rewrites trace (records.StepGraphs), replayed on demand with its release's semantics."""
    return StepGraphs(log.path, log.release, log.contexts, partial(session, log, work_budget(log)))
