"""A report or a diff as sections of tables: what the text, Markdown and HTML writers show (JSON is the records)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..text import shown
from ..units import duration_text

# (device, label as analysis.launches.KernelId.label gives it; device None: a name on any device): the site links it
KernelRef = tuple[str | None, str]
# (text, sort value: a number for numeric columns, else None), and for kernels' names the kernels they name
Cell = tuple[str, Any] | tuple[str, Any, list[KernelRef]]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[Cell]]
    limit: int | None = None  # rows a terminal or a PR comment shows (HTML shows all)
    # groups of columns (by index) a terminal drops, in this order, where the table is too wide for it
    optional: tuple[tuple[int, ...], ...] = ()

    def numeric(self, col: int) -> bool:
        return any(isinstance(r[col][1], (int, float)) for r in self.rows)

    def kinds(self) -> list[bool]:
        """Which columns are numeric (right-aligned, sorted by value)."""
        return [self.numeric(i) for i in range(len(self.headers))]


@dataclass
class Section:
    key: str  # id in HTML, plot names
    title: str
    note: str = ""
    tables: list[Table] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)  # names of plots (report/plots.py) shown with it
    collapsed: bool = False  # a long detail: folded in Markdown


def text(s: str) -> Cell:
    """A text cell: a name from a pickle shown as one bounded line (text.shown); each writer escapes it further."""
    return (shown(s), None)


def kernel(label: str, device: str) -> Cell:
    """A kernel's name as a text cell that the site's pages link to its page (a file alone shows the text)."""
    return (shown(label), None, [(device, label)])


def kernels(names: list[str]) -> Cell:
    """Kernels' names (of any device), comma-separated; on the site each links to its page."""
    return (shown(", ".join(names)), None, [(None, n) for n in names])


def ns(x: float | None) -> Cell:
    return ("" if x is None else duration_text(x), x)


def num(x: float | None, fmt: str = "{:,}") -> Cell:
    return ("" if x is None else fmt.format(x), x)


def pct(x: float | None, digits: int = 1) -> Cell:
    return ("" if x is None else f"{x:.{digits}f}%", x)


def ratio(x: float | None) -> Cell:
    """after/before as a signed percentage: 2.0 → +100.0%."""
    return ("" if x is None or x != x else f"{(x - 1) * 100:+.1f}%", x)


def delta_ns(before: float, after: float) -> Cell:
    d = after - before
    return (("+" if d > 0 else "−" if d < 0 else "±") + duration_text(abs(d)), d)


def rate(x: float | None) -> Cell:
    return ("" if x is None else f"{x:.3g}", x)
