"""A kernel's trend over the runs as a small SVG (drawn here: the page needs no script or library, and works from
file://): per run its median launch time (a dot, linking to the run's page, with a tooltip) and the range of its
launches, on a log scale; each level between change points as a line, and the change points marked with their
change."""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from itertools import pairwise

from ..analysis.changepoints import Step
from ..units import duration_text

WIDTH, HEIGHT = 760, 170
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 24, 22
COLORS = {"dot": "#2f6fde", "range": "#9db7ea", "level": "#1d2330", "step": "#c92a2a", "grid": "#dde1e8"}


@dataclass
class Point:
    run: int  # position among the page's runs (x)
    run_id: int
    commit: str
    median_ns: float
    low_ns: float
    high_ns: float


def svg(title: str, points: list[Point], runs: int, steps: list[Step]) -> str:
    """The trend of one kernel over `runs` runs."""
    lo = min(p.low_ns for p in points)
    hi = max(p.high_ns for p in points)
    lo, hi = math.log10(max(lo, 1)), math.log10(max(hi, 1))
    if hi - lo < 0.1:
        lo, hi = lo - 0.05, hi + 0.05

    def x(i: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (i + 0.5) / max(runs, 1)

    def y(ns: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (hi - math.log10(max(ns, 1))) / (hi - lo)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
           f'height="{HEIGHT}" role="img" font-family="system-ui, sans-serif" font-size="11">',
           f'<text x="{LEFT}" y="14" font-size="12" font-weight="600">{escape(title)}</text>']
    out += _axis(lo, hi, y)
    for p in points:
        out.append(f'<line x1="{x(p.run):.1f}" x2="{x(p.run):.1f}" y1="{y(p.low_ns):.1f}" y2="{y(p.high_ns):.1f}" '
                   f'stroke="{COLORS["range"]}" stroke-width="3"/>')
    out += _levels(points, steps, x, y)
    for p in points:
        tip = f"{p.commit[:10]} (run {p.run_id}): median {duration_text(p.median_ns)}, launches " \
              f"{duration_text(p.low_ns)} … {duration_text(p.high_ns)}"
        out.append(f'<a href="runs/{p.run_id}.html"><circle cx="{x(p.run):.1f}" cy="{y(p.median_ns):.1f}" r="3.5" '
                   f'fill="{COLORS["dot"]}"><title>{escape(tip)}</title></circle></a>')
    out.append(f'<text x="{LEFT}" y="{HEIGHT - 6}" fill="#6b7385">runs, oldest first ({runs})</text>')
    out.append("</svg>")
    return "\n".join(out)


def _axis(lo: float, hi: float, y: callable) -> list[str]:  # type: ignore[valid-type]
    out = []
    for k in range(math.floor(lo), math.ceil(hi) + 1):
        for m in (1, 2, 5):
            v = math.log10(m) + k
            if lo <= v <= hi:
                ns = 10 ** v
                out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(ns):.1f}" y2="{y(ns):.1f}" '
                           f'stroke="{COLORS["grid"]}"/>')
                out.append(f'<text x="{LEFT - 4}" y="{y(ns) + 4:.1f}" text-anchor="end">{duration_text(ns)}</text>')
    return out


def _levels(points: list[Point], steps: list[Step], x: callable, y: callable) -> list[str]:  # type: ignore
    """Each segment's level (geometric mean of its medians) as a line; each change point as a dashed line."""
    out, cuts = [], [0, *(s.at for s in steps), len(points)]
    for a, b in pairwise(cuts):
        seg = points[a:b]
        level = math.exp(sum(math.log(max(p.median_ns, 1)) for p in seg) / len(seg))
        out.append(f'<line x1="{x(seg[0].run - 0.4):.1f}" x2="{x(seg[-1].run + 0.4):.1f}" y1="{y(level):.1f}" '
                   f'y2="{y(level):.1f}" stroke="{COLORS["level"]}" stroke-width="1.5"/>')
    for s in steps:
        at = (points[s.at - 1].run + points[s.at].run) / 2
        out.append(f'<line class="change-point" x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                   f'stroke="{COLORS["step"]}" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(at) + 3:.1f}" y="{TOP + 10}" fill="{COLORS["step"]}">{(s.ratio - 1) * 100:+.0f}% at '
                   f'{escape(points[s.at].commit[:10])}</text>')
    return out
