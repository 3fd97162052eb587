"""Drive a site's step viewer in headless Chromium (check_steps.cjs) and compute what it must show with vizexport's
own Python drawer: the tests and benchmarks/bench_site.py share these."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from vizexport.graphs.diff import match_diff
from vizexport.graphs.dot import Drawer
from vizexport.records import StepGraphs

HERE = Path(__file__).resolve().parent
NODE_MODULES = Path(os.environ.get("PERFETTO_CHECK_HOME", Path.home() / ".cache" / "perfetto-check")) / "node_modules"
CHROMIUM = Path("/usr/bin/chromium")


def have_browser() -> bool:
    return bool(shutil.which("node")) and (NODE_MODULES / "playwright-core").exists() and CHROMIUM.exists()


def drive(page: Path, spec: dict, timeout: float = 900) -> dict:
    """Run check_steps.cjs on a context page (file://, with an optional #r<rewrite>s<step>) with `spec`."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        r = subprocess.run(["node", str(HERE / "check_steps.cjs"), page.resolve().as_uri(), f.name],
                           capture_output=True, text=True, timeout=timeout, check=False,
                           env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout)


def python_steps(graphs: StepGraphs, ctx: int, pairs: list[tuple[int, int]], max_nodes: int = 400
                 ) -> list[tuple[str | None, list[str] | None]]:
    """(DOT text, diff lines) of steps of one context, as the SVG export draws them (graphs/export.py)."""
    session = graphs.session()
    rewrites = graphs.contexts[ctx].rewrites
    replays = {r: session.replay(rewrites[r]).steps for r in {r for r, _ in pairs}}
    drawer, out = Drawer(session.nodes, max_nodes), []
    for r, s in pairs:
        steps = replays[r]
        step = steps[s]
        hint = steps[1].before if s == 0 and len(steps) > 1 else None
        dot = drawer.draw(step, hint).text if step.sink is not None else None
        diff = (match_diff(session.nodes, step.before, step.after, {})
                if step.before is not None and step.after is not None else None)
        out.append((dot, diff))
    return out
