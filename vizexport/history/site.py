"""`history site`: one static page of a store's runs (works from file://, a CI artifact): the latest run's verdicts
against the runs before it, per kernel and device its trend over the runs with change points marked, and every run
with a page of its own."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import jinja2
import numpy as np

from .._version import __version__
from ..analysis.changepoints import change_points
from ..output import atomic_folder
from ..report import environment
from . import sections
from .check import Check, check_run
from .records import Key, RunRecord
from .store import Store
from .trends import Point, svg

LAST = 20  # earlier runs the latest is checked against (as `history check` by default)
MAX_TRENDS = 200  # kernels plotted, longest total in the latest run first (the rest are listed)


def write_site(store: Store, outdir: Path, branch: str | None = None, last: int | None = None) -> Path:
    """The site of the runs of `branch` (default: the latest run's) in `outdir` (replaced whole); its index.html."""
    metas = store.runs(branch, last) if branch is not None else []
    if branch is None:
        every = store.runs()
        branch = every[-1].branch if every else None
        metas = store.runs(branch, last) if branch is not None else []
    runs = store.load(metas)
    check = check_run(runs[-1], runs[-1 - LAST:-1]) if runs else None
    env = environment(jinja2.PackageLoader("vizexport.history", "templates"))
    env.filters["median"] = lambda d: float(np.median(d))
    static = resources.files("vizexport.site").joinpath("static")
    common = {"css": static.joinpath("site.css").read_text(), "js": static.joinpath("site.js").read_text(),
              "version": __version__, "store": store.where, "branch": branch}
    with atomic_folder(outdir) as tmp:
        (tmp / "runs").mkdir()
        page = env.get_template("history.html").render(
            runs=[r.meta for r in reversed(runs)], check=check, trends=_trends(runs), **_verdicts(check), **common)
        (tmp / "index.html").write_text(page)
        for r in runs:
            (tmp / "runs" / f"{r.meta.id}.html").write_text(env.get_template("run.html").render(run=r, **common))
    return outdir / "index.html"


def _verdicts(check: Check | None) -> dict:
    if check is None:
        return {"headline": "no runs", "sections": []}
    return {"headline": sections.headline(check), "sections": sections.sections(check)[:3]}


def _trends(runs: list[RunRecord]) -> list[dict]:
    """Per kernel (name and device) of the runs: its anchor, title and SVG trend with change points."""
    series: dict[Key, list[Point]] = {}
    for i, r in enumerate(runs):
        for k in r.kernels:
            d = k.durations
            series.setdefault(k.key, []).append(Point(i, r.meta.id or 0, r.meta.commit, float(np.median(d)),
                                                      float(d.min()), float(d.max())))
    latest = {k.key: k.total_ns for k in runs[-1].kernels} if runs else {}
    order = sorted(series, key=lambda key: (-latest.get(key, -1), key))
    out = []
    for n, key in enumerate(order[:MAX_TRENDS]):
        points = series[key]
        steps = change_points(np.log([p.median_ns for p in points]))
        title = f"{key[1]} on {key[0]}"
        out.append({"id": f"k{n}", "title": title, "steps": len(steps), "svg": svg(title, points, len(runs), steps)})
    return out
