"""One replayed step → deterministic Graphviz DOT text.

One box per node with the text and fill the reader gives it (records.StepNodes); nodes the reader folds (constants)
become lines of their users' boxes, unless the step created them. Nodes the match created are drawn thick and carry
the SVG class "created"; other new nodes (users rebuilt around the replacement) are dashed, class "rebuilt"; the node
the match replaced appears as a grey dashed "replaced" box pointing at its replacement. Edges run from a source to its
user and are labelled with the source's position when the user has several. Graphs above `max_nodes` show the
neighbourhood of the change with a note saying so.

Node ids are "n<k>", k counting the drawn nodes in toposort order, so the same graph always gives the same text.
"""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..records import GraphStep, StepNodes
from ..walks import post_order

HIGHLIGHT = "#d6336c"
DARK_BELOW = 0.35  # fills darker than this (relative luminance) get white text
# layout effort bounded and straight edges: tinygrad's kernel graphs have long edges (ranges, buffers used all over),
# which with Graphviz's defaults take minutes to lay out. nslimit=0 skips the network simplex that straightens node
# x positions: it can take seconds on such graphs and changes little; mclimit bounds crossing minimisation; newrank
# (one global ranking pass) lays these cluster-free graphs out the same, a little faster.
HEADER = ('digraph step {\n'
          'graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.15, ranksep=0.3, splines=line, '
          'mclimit=0.02, nslimit=0, nslimit1=0.3, searchsize=10, remincross=false, newrank=true];\n'
          'node [shape=box, style="filled", fontname="Helvetica", fontsize=9, margin="0.06,0.03", '
          'height=0.3, penwidth=1];\n'
          'edge [fontname="Helvetica", fontsize=8, arrowsize=0.5, color="#606060", fontcolor="#1c7ed6", '
          'labeldistance=1.2, labelangle=30];\n')


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def quote(s: str) -> str:
    """A DOT double-quoted string; lines end in \\n (centred); control characters become '?'."""
    s = _CONTROL.sub("?", s)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass
class Drawn:
    """A step's DOT text and what it shows."""

    text: str
    nodes: int  # boxes drawn
    total: int  # nodes the (unfolded) graph has
    capped: bool
    ids: dict[int, str] = field(default_factory=dict)  # node → DOT/SVG id


def is_dark(fill: str) -> bool:
    r, g, b = (int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < DARK_BELOW


class Drawer:
    """Builds the DOT of steps of one replay session."""

    def __init__(self, nodes: StepNodes, max_nodes: int) -> None:
        self.nodes = nodes
        self.max_nodes = max_nodes
        self._plain: dict[int, str] = {}  # attributes of nodes drawn without any highlight
        self._ports: dict[int, list[tuple[int, str, str]]] = {}  # node → its in-edges' attributes (see _in_edges)

    def folds(self, n: int, root: int, keep: frozenset[int], new: frozenset[int]) -> bool:
        """Whether node n is folded into its users' labels (what the reader folds, e.g. constants). `new`: the step's
        new nodes (nodes built on created ones are new: an old node needs no look below it)."""
        if n == root or not self.nodes.foldable(n):
            return False
        # a constant the match created (or built on something it created) is drawn, to be highlighted
        return not keep or n not in new or keep.isdisjoint(self.toposort(n))

    def toposort(self, root: int) -> list[int]:
        return post_order(root, self.nodes.src.__getitem__)

    def visible(self, root: int, keep: frozenset[int], new: frozenset[int]) -> list[int]:
        """Drawn nodes, sources first: everything under root except folded nodes and what only they use."""
        order = self.toposort(root)
        src = self.nodes.src
        shown = {root}
        drawn = []
        for n in reversed(order):  # users before sources
            if n in shown:
                if self.folds(n, root, keep, new):
                    continue
                shown.update(src[n])
                drawn.append(n)
        drawn.reverse()
        return drawn

    def draw(self, step: GraphStep, focus_hint: int | None = None) -> Drawn:
        assert step.sink is not None
        root, keep = step.sink, step.created
        new = step.created | step.rebuilt
        order = self.visible(root, keep, new)
        total = len(order)
        capped = total > self.max_nodes
        hidden: dict[int, int] = {}
        if capped:
            order, hidden = self._neighbourhood(order, self._focus(step, order, focus_hint))
        ids = {n: f"n{i}" for i, n in enumerate(order)}
        out = [HEADER]
        if capped:
            note = (f"showing {len(order):,} of {total:,} nodes around the change (graph above --max-nodes "
                    f"{self.max_nodes})")
            out.append(f'label={quote(note)}; labelloc=t; fontcolor="#c92a2a";\n')
        for n in order:
            out.append(self._node(n, ids[n], step, root, keep, hidden.get(n, 0), new))
        out.extend(self._edges(order, ids, new))
        out.append(self._ghost(step, ids))
        out.append("}\n")
        return Drawn("".join(out), len(order), total, capped, ids)

    def _node(self, n: int, nid: str, step: GraphStep, root: int, keep: frozenset[int], hidden: int,
              new: frozenset[int]) -> str:
        if not hidden and n != root and n not in new:  # an old node: its sources are old too, none is in keep
            body = self._plain.get(n)
            if body is None:
                body = self._plain[n] = self._body(n, root, keep, 0, new)
            return f'{nid} [id="{nid}", {body}];\n'
        attrs = [f"id={quote(nid)}", self._body(n, root, keep, hidden, new)]
        if n in step.created:
            attrs += ['class="created"', f'color="{HIGHLIGHT}"', "penwidth=3"]
        elif n in step.rebuilt:
            attrs += ['class="rebuilt"', f'color="{HIGHLIGHT}"', 'style="filled,dashed"', "penwidth=1.5"]
        elif hidden:
            attrs.append('style="filled,dotted"')
        if n == root:
            attrs.append("peripheries=2")
        return f"{nid} [{', '.join(attrs)}];\n"

    def _body(self, n: int, root: int, keep: frozenset[int], hidden: int, new: frozenset[int]) -> str:
        """Label and fill of node n."""
        nodes = self.nodes
        label = nodes.label(n)
        folded = []
        for i, s in enumerate(nodes.src[n]):
            if self.folds(s, root, keep, new):
                op, text = nodes.folded(s)
                folded.append(f"{op}{i} {text}")
        if folded:
            label += "\n" + "\n".join(folded)
        if hidden:
            label += f"\n(+{hidden} not shown)"
        fill = nodes.fill(n)
        if is_dark(fill):
            return f'label={quote(label)}, fillcolor="{fill}", fontcolor="white"'
        return f'label={quote(label)}, fillcolor="{fill}"'

    def _edges(self, order: list[int], ids: dict[int, str], new: frozenset[int]) -> Iterable[str]:
        """An edge from each drawn source to its user, labelled with the source's positions if it has several."""
        for n in order:
            nid, lit = ids[n], n in new
            for s, plain, lit_attrs in self._in_edges(n):
                if s in ids:
                    yield f"{ids[s]} -> {nid}{lit_attrs if lit and s in new else plain}"

    def _in_edges(self, n: int) -> list[tuple[int, str, str]]:
        """(source, attributes, attributes when highlighted) of n's in-edges, one per distinct source (cached)."""
        hit = self._ports.get(n)
        if hit is None:
            src = self.nodes.src[n]
            ports: dict[int, list[str]] = {}
            for i, s in enumerate(src):
                ports.setdefault(s, []).append(str(i))
            hit = []
            for s, idx in ports.items():
                label = f'headlabel="{",".join(idx)}"' if len(src) > 1 else ""  # digits: nothing to quote
                lit = f'{label}, color="{HIGHLIGHT}"' if label else f'color="{HIGHLIGHT}"'
                hit.append((s, f" [{label}];\n" if label else ";\n", f" [{lit}];\n"))
            self._ports[n] = hit
        return hit

    def _ghost(self, step: GraphStep, ids: dict[int, str]) -> str:
        """The replaced node, drawn apart, pointing at its replacement (if the replacement is drawn and it is gone).

        The edge's text is a tail label: a plain edge label would make dot lay out every rank twice (a fifth more
        layout time on graphs that are mostly unchanged)."""
        u0, u1 = step.before, step.after
        if u0 is None or u1 is None or u0 in ids or u1 not in ids:
            return ""
        label = "replaced:\n" + self.nodes.op[u0]
        return (f'replaced [id="replaced", class="replaced", label={quote(label)}, style="dashed", '
                f'color="#909090", fontcolor="#606060", fillcolor="white"];\n'
                f'replaced -> {ids[u1]} [style=dashed, color="#909090", taillabel="replaced by"];\n')

    def _focus(self, step: GraphStep, order: list[int], hint: int | None) -> list[int]:
        """Where the change is: new nodes, else the replacement, else the hint (next match), else the root."""
        inside = set(order)
        focus = [n for n in order if n in step.created or n in step.rebuilt]
        for extra in (step.after, hint, step.sink):
            if focus:
                break
            if extra is not None and extra in inside:
                focus = [extra]
        return focus

    def _neighbourhood(self, order: list[int], focus: list[int]) -> tuple[list[int], dict[int, int]]:
        """Up to max_nodes nodes nearest the focus, breadth first: upwards along users (towards the root), and
        downwards along sources from there; a shared source (a range, a buffer) does not pull in its other users.
        Also returns how many neighbours each kept node has that are not shown."""
        src = self.nodes.src
        inside = set(order)
        users: dict[int, list[int]] = {n: [] for n in order}
        for n in order:
            for s in dict.fromkeys(src[n]):
                if s in inside:
                    users[s].append(n)
        keep = dict.fromkeys(focus[:self.max_nodes])
        queue = deque((n, True) for n in keep)
        while queue and len(keep) < self.max_nodes:
            n, up = queue.popleft()
            nxt = [(m, False) for m in dict.fromkeys(src[n])] + ([(m, True) for m in users[n]] if up else [])
            for m, m_up in nxt:
                if m in inside and m not in keep:
                    keep[m] = None
                    queue.append((m, m_up))
                    if len(keep) >= self.max_nodes:
                        break
        hidden = {}
        for n in keep:
            k = sum(1 for m in (*dict.fromkeys(src[n]), *users[n]) if m in inside and m not in keep)
            if k:
                hidden[n] = k
        return [n for n in order if n in keep], hidden
