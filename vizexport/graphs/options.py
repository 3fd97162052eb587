"""The SVG export's options (what the command line and the Run name), apart from the export: naming them loads no
Graphviz."""
from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("default", "ends", "all")


@dataclass(frozen=True)
class StepOptions:
    """Which rewrite steps are drawn and how: `ctx` / `rewrite` select contexts and rewrites by name (re.search;
    `vizexport show` also takes an index), `steps` is one of POLICIES, graphs above `max_nodes` show the neighbourhood
    of the change (the site's step viewer too), `jobs` processes (None: the CPUs), `timeout` seconds Graphviz may spend
    on one graph."""

    ctx: str | None = None
    rewrite: str | None = None
    steps: str = "default"
    max_nodes: int = 400
    jobs: int | None = None
    timeout: float = 30.0
