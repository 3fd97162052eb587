"""The one walk over graphs of sources that every part shares: UOp tables, step-graph nodes, drawn graphs."""
from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class CycleError(ValueError):
    """A node is its own ancestor (a graph of sources must be acyclic). `node` names it."""

    def __init__(self, node: Any) -> None:
        super().__init__("a node is its own ancestor")  # callers name it: a repr could be huge
        self.node = node


class BudgetError(ValueError):
    """A walk met more source references than it may (unpickled graphs can share huge source lists)."""


def post_order(root: T, sources: Callable[[T], Sequence[T]], done: Container[Hashable] = (),
               key: Callable[[T], Hashable] | None = None, budget: int | None = None) -> list[T]:
    """The nodes under `root` (itself included) that are not in `done`, each once, sources before their users and
    the first source first (tinygrad's toposort order). Iterative: graphs are tens of thousands deep. Raises
    CycleError when a node is its own ancestor, however the graph was made, and BudgetError when the new nodes
    hold more than `budget` source references in all. `key` identifies a node (default: the node itself; `id` for
    objects)."""
    ident = key or _same
    out: list[T] = []
    finished: set[Hashable] = set()
    on_path: set[Hashable] = set()  # expanded, not finished: meeting one of these again is a cycle
    stack: list[tuple[T, bool]] = [(root, False)]
    while stack:
        n, expanded = stack.pop()
        k = ident(n)
        if expanded:
            on_path.discard(k)
            finished.add(k)
            out.append(n)
        elif k not in finished and k not in done:
            if k in on_path:
                raise CycleError(n)
            on_path.add(k)
            stack.append((n, True))
            srcs = sources(n)
            if budget is not None:
                budget -= len(srcs)
                if budget < 0:
                    raise BudgetError("a graph walk met more source references than its budget")
            stack.extend((s, False) for s in reversed(srcs) if ident(s) not in finished)
    return out


def _same(x: T) -> T:
    return x
