"""A rewrite context, or one rewrite step by step, as text and JSON (`vizexport show`), as tinygrad's `viz.cli`
prints them: the context's rewrites indented by depth with where they ran and their match counts; for one rewrite,
its input graph, then for each match the pattern's location and the diff of the matched subgraph and its replacement
(graphs.diff), and the graph it leaves."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from ..records import Context, Rewrite, StepGraphs
from ..text import MESSAGE_CHARS, lines, shown
from .diff import match_diff, pretty
from .manifest import short_path

SHOWN_CHOICES = 8  # names listed when a pattern picks several
MAX_LINES = 1000  # lines of a printed graph (the SVG export's diffs keep 80: a terminal takes more)
RED, GREEN, DIM, BOLD, RESET = "\x1b[31m", "\x1b[32m", "\x1b[2m", "\x1b[1m", "\x1b[0m"


def pick(names: list[str], spec: str, what: str, where: str) -> int:
    """The index `spec` names: an index, or a regular expression (re.search) that exactly one name matches."""
    if re.fullmatch(r"-?\d+", spec):
        i = int(spec)
        if not -len(names) <= i < len(names):
            raise InputError(f"{where}: no {what} {i} (there are {len(names)})")
        return i % len(names)
    try:
        pattern = re.compile(spec)
    except re.error as e:
        raise InputError(f"{where}: bad {what} regular expression {spec!r}: {e}") from None
    hits = [i for i, n in enumerate(names) if pattern.search(n)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise InputError(f"{where}: no {what} matches {spec!r}")
    shown = ", ".join(f"{i} {names[i]}" for i in hits[:SHOWN_CHOICES]) + (", …" if len(hits) > SHOWN_CHOICES else "")
    raise InputError(f"{where}: {len(hits)} {what}s match {spec!r} ({shown}); give an index or a narrower pattern")


def _loc(loc: tuple[str, int] | None) -> str | None:
    return f"{short_path(loc[0])}:{loc[1]}" if loc else None


def _rewrite_row(ri: int, rw: Rewrite) -> dict[str, Any]:
    real = [m for m in rw.matches if m.after is not None]
    return {"index": ri, "name": rw.name, "depth": rw.depth, "loc": _loc(rw.loc), "matches": len(real),
            "seconds": sum(m.seconds or 0.0 for m in real), "bottom_up": rw.bottom_up}


def contexts_view(contexts: Sequence[Context]) -> dict[str, Any]:
    """Every context of a trace: index (what -s takes), name, rewrites and matches."""
    return {"contexts": [{"index": ci, "name": c.key.name, "rewrites": len(c.rewrites),
                          "matches": sum(m.after is not None for rw in c.rewrites for m in rw.matches)}
                         for ci, c in enumerate(contexts)]}


def contexts_text(view: dict[str, Any], color: bool = False) -> str:
    """As context_text, for the list of contexts."""
    bold, reset = (BOLD, RESET) if color else ("", "")
    rows = view["contexts"]
    out = [f"{bold}{len(rows)} contexts{reset} (vizexport show REWRITES -s INDEX shows one)"]
    out += [f"{r['index']:4d} {shown(r['name'])}  ({r['rewrites']} rewrites, {r['matches']} matches)" for r in rows]
    return lines("\n".join(out))


def context_view(graphs: StepGraphs, ctx: str) -> dict[str, Any]:
    """A context's rewrites: index, name, depth, where it ran, matches, seconds."""
    ci = pick([c.key.name for c in graphs.contexts], ctx, "context", graphs.path)
    c = graphs.contexts[ci]
    return {"context": ci, "name": c.key.name, "rewrites": [_rewrite_row(ri, rw) for ri, rw in enumerate(c.rewrites)]}


def rewrite_view(graphs: StepGraphs, ctx: str, rewrite: str) -> dict[str, Any]:
    """One rewrite replayed: its input graph, each match (pattern location, µs, the matched subgraph before and
    after, their diff, any replay error) and its final graph, as lines of graphs.diff.pretty."""
    view = context_view(graphs, ctx)
    c = graphs.contexts[view["context"]]
    ri = pick([rw.name for rw in c.rewrites], rewrite, "rewrite", f"{graphs.path}: context {view['context']}")
    rw = c.rewrites[ri]
    session = graphs.session()
    rep = session.replay(rw)
    nodes, printed = session.nodes, {}
    steps = []
    for s in rep.steps[1:]:
        m = rw.matches[s.match] if s.match is not None else None
        step: dict[str, Any] = {"step": s.index, "loc": _loc(m.loc) if m else None,
                                "seconds": m.seconds if m else None, "error": s.error or None}
        if s.before is not None and s.after is not None and s.sink is not None:
            diff = match_diff(nodes, s.before, s.after, printed, MAX_LINES)
            step.update(before=printed[s.before], after=printed[s.after], diff=diff)
        steps.append(step)
    first = rep.steps[0].sink if rep.steps else None
    return {"context": view["context"], "context_name": view["name"], **_rewrite_row(ri, rw),
            "input": pretty(nodes, first, MAX_LINES) if first is not None else None, "steps": steps,
            "final": pretty(nodes, rep.final, MAX_LINES) if rep.final is not None and len(rep.steps) > 1 else None}


def _graph(printed: list[str]) -> list[str]:
    """Lines of a printed graph (node labels hold the pickle's arguments) as shown text, each bounded."""
    return [shown(line, MESSAGE_CHARS) for line in printed]


def context_text(view: dict[str, Any], color: bool = False) -> str:
    """Names and locations from the pickle are shown text (text.shown); the whole is safe for a terminal or CI log."""
    bold, dim, reset = (BOLD, DIM, RESET) if color else ("", "", "")
    rows = view["rewrites"]
    out = [f"{bold}context {view['context']}: {shown(view['name'])}{reset}  ({len(rows)} rewrites, "
           f"{sum(r['matches'] for r in rows)} matches)"]
    for r in rows:
        count = f" - {r['matches']}" if r["matches"] else ""
        where = f"  {dim}{shown(r['loc'])}{reset}" if r["loc"] else ""
        out.append(f"{r['index']:4d} {' ' * r['depth']}{shown(r['name'])}{count}{where}")
    return lines("\n".join(out))


def rewrite_text(view: dict[str, Any], color: bool = False) -> str:
    """As context_text: the rewrite's graphs and diffs line by line, names and arguments as shown text."""
    bold, dim, red, green, reset = (BOLD, DIM, RED, GREEN, RESET) if color else ("", "", "", "", "")
    out = [f"{bold}context {view['context']}: {shown(view['context_name'])} · rewrite {view['index']}: "
           f"{shown(view['name'])}{reset}  ({view['matches']} matches{', bottom-up' if view['bottom_up'] else ''}"
           f"{', ran at ' + shown(view['loc']) if view['loc'] else ''})"]
    if view["input"] is not None:
        out += ["", f"{bold}input graph{reset}", *_graph(view["input"])]
    for s in view["steps"]:
        us = f"  {s['seconds'] * 1e6:.1f} µs" if s["seconds"] is not None else ""
        out += ["", f"{bold}match {s['step']}/{len(view['steps'])}{reset}  "
                    f"{shown(s['loc'] or 'no pattern location')}{dim}{us}{reset}"]
        if s["error"]:
            out.append(f"{red}replay error: {shown(s['error'], MESSAGE_CHARS)}{reset}")
        if "diff" in s and not s["diff"]:
            out.append(f"{dim}(no change within the first {MAX_LINES} lines of the matched subgraph){reset}")
        for d in _graph(s.get("diff", ())[2:]):  # the ---/+++ header names nothing the match line does not
            c = red if d.startswith("-") else green if d.startswith("+") else dim if d.startswith("@@") else ""
            out.append(f"{c}{d}{reset}" if c else d)
    if view["final"] is not None:
        out += ["", f"{bold}graph after {len(view['steps'])} matches{reset}", *_graph(view["final"])]
    return lines("\n".join(out))
