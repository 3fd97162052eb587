"""A small graph pretty-printer and the unified diff of a match (the matched subgraph vs its replacement).

Each line is one node (StepNodes.text: `OP dtype arg`), indented under its user; a node printed before is shown as
`^<k>` (a back reference to the line that printed it), so shared subgraphs print once. Output is capped in lines.
"""
from __future__ import annotations

import difflib

from ..records import StepNodes

MAX_LINES = 80


def pretty(nodes: StepNodes, root: int, max_lines: int = MAX_LINES) -> list[str]:
    """Lines describing the graph under `root`, sources indented below their user."""
    lines: list[str] = []
    printed: dict[int, int] = {}
    stack = [(root, 0, "")]
    while stack:
        n, depth, port = stack.pop()
        pad = "  " * depth + port
        if n in printed:
            lines.append(f"{pad}^{printed[n]}")
            continue
        if len(lines) >= max_lines:
            lines.append(f"{pad}… (more not shown)")
            break
        printed[n] = len(lines)
        lines.append(f"{pad}{nodes.text(n)}")
        srcs = nodes.src[n]
        stack.extend((s, depth + 1, f"{i}: " if len(srcs) > 1 else "") for i, s in reversed(list(enumerate(srcs))))
    return lines


def match_diff(nodes: StepNodes, before: int, after: int, cache: dict[int, list[str]] | None = None,
               max_lines: int = MAX_LINES) -> list[str]:
    """Unified diff of the matched node's subgraph and its replacement's (without trailing newlines). `cache`:
    printed subgraphs by node, kept by the caller across the matches of one replay session (and one max_lines)."""
    cache = {} if cache is None else cache
    for n in (before, after):
        if n not in cache:
            cache[n] = pretty(nodes, n, max_lines)
    return list(difflib.unified_diff(cache[before], cache[after], "before", "after", lineterm=""))
