"""`vizexport top`'s tables as text, JSON and CSV. Text is at most WIDTH columns (the device's and kernel's columns
are what gives: a long name is cut in its middle, keeping its program key), unless `wide`: then every statistic and
whole names. Durations are written as everywhere else (units.duration_text: one style, the scale adapting to each
value); rates with three significant digits below 10, so a slow kernel's never reads 0."""
from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ..devices import natural
from ..text import NAME_CHARS, lines, shown
from ..units import duration_text
from .top import BY_NAME, KernelStats, KernelTable

WIDTH = 120  # columns of a text table unless wide
NAME_MIN = 16  # the kernel column is never narrower
DEVICE_MAX = 24  # nor the device column wider, unless wide
TIME_WIDTH = 10  # "999.999 ms"
RATE_WIDTH = 8
RATE_DIGITS = 10  # below this, three significant digits
KEY_TAIL = 11  # " [ff2977df]": the end of a cut name that is kept
BOLD, DIM, CYAN, RESET = "\x1b[1m", "\x1b[2m", "\x1b[36m", "\x1b[0m"
FIELDS = ("device", "name", "program", "category", "launches", "total_ns", "mean_ns", "median_ns", "p90_ns",
          "min_ns", "max_ns", "share", "gflops", "gbs", "gbs_lds")


@dataclass(frozen=True)
class Column:
    header: str
    width: int
    cell: Callable[[KernelStats], str]


def _time(ns: float | None) -> str:
    return "-" if ns is None else duration_text(ns)


def _rate(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if x >= RATE_DIGITS else f"{x:.3g}"  # three significant digits for slow (NULL, CPU) kernels


def columns(wide: bool = False, rates: bool = True, count: str = "launches") -> list[Column]:
    """The numeric columns of a table: total, count, share and mean; with `wide` the median, p90, min and max; with
    `rates` GFLOPS, GB/s of memory and of local memory (LDS)."""
    out = [Column("total", TIME_WIDTH, lambda k: _time(k.total_ns)),
           Column(count, len(count), lambda k: str(k.launches)),
           Column("share", 7, lambda k: f"{k.share:.2f}%"),
           Column("mean", TIME_WIDTH, lambda k: _time(k.mean_ns))]
    if wide:
        out += [Column("median", TIME_WIDTH, lambda k: _time(k.median_ns)),
                Column("p90", TIME_WIDTH, lambda k: _time(k.p90_ns)),
                Column("min", TIME_WIDTH, lambda k: _time(k.min_ns)),
                Column("max", TIME_WIDTH, lambda k: _time(k.max_ns))]
    if rates:
        out += [Column("GFLOPS", RATE_WIDTH, lambda k: _rate(k.gflops)),
                Column("GB/s", RATE_WIDTH, lambda k: _rate(k.gbs)),
                Column("GB/s lds", RATE_WIDTH, lambda k: _rate(k.gbs_lds))]
    return out


def fit(name: str, width: int) -> str:
    """`name` in at most `width` characters: cut in the middle with an ellipsis, its end (a program key) kept."""
    if len(name) <= width:
        return name
    tail = min(KEY_TAIL, width // 3)
    return name[:width - 1 - tail] + "…" + name[len(name) - tail:]


@dataclass(frozen=True)
class Layout:
    """What a text table is called and how its rows look."""

    first: str  # header of the device column
    second: str  # of the name column
    cols: list[Column]
    category: bool = True
    wide: bool = False
    color: bool = False


def table_text(rows: list[KernelStats], layout: Layout) -> list[str]:
    """The header and one line per row, at most WIDTH columns unless the layout is wide."""
    bold, dim, cyan, reset = (BOLD, DIM, CYAN, RESET) if layout.color else ("", "", "", "")
    devs = [shown(k.device) for k in rows]
    dw = max([len(layout.first), *map(len, devs)])
    dw = dw if layout.wide else min(dw, DEVICE_MAX)
    cats = [k.category for k in rows] if layout.category else []
    fixed = sum(c.width + 1 for c in layout.cols) + (2 + max(map(len, [*cats, "category"])) if cats else 0)
    # whole (fit cuts them, keeping a program key) unless wide: then at most text.NAME_CHARS of a name
    labels = [shown(k.label, NAME_CHARS if layout.wide else None) for k in rows]
    longest = max([len(layout.second), *map(len, labels)])
    nw = longest if layout.wide else max(NAME_MIN, min(longest, WIDTH - dw - 1 - fixed))
    head = f"{layout.first:{dw}} {layout.second:{nw}}" + "".join(f" {c.header:>{c.width}}" for c in layout.cols)
    out = [bold + (head + ("  category" if cats else "")).rstrip() + reset]
    for k, dev, label in zip(rows, devs, labels, strict=True):
        cells = "".join(f" {c.cell(k):>{c.width}}" for c in layout.cols)
        line = f"{dim}{fit(dev, dw):{dw}}{reset} {fit(label, nw):{nw}}{cells}"
        out.append((line + (f"  {cyan}{k.category}{reset}" if cats and k.category else "")).rstrip())
    return out


def as_text(table: KernelTable, n: int | None = None, color: bool = False, wide: bool = False) -> str:
    """Rows of the `n` longest kernels (and one for the rest), then the JIT graph batches; `color`: ANSI codes, for
    a terminal; `wide`: every statistic and whole names, however wide. Names are shown text (text.shown) before they
    are laid out and coloured."""
    dim, reset = (DIM, RESET) if color else ("", "")
    rows, other = table.top(n)
    if table.host:
        layout = Layout("track", "span", columns(wide, False, "spans"), False, wide, color)
    else:
        layout = Layout("device", "kernel", columns(wide), True, wide, color)
    out = [*prose(_title(table), wide), *table_text(rows + ([other] if other is not None else []), layout)]
    what = "summed" if table.host else "busy"
    out += [f"{dim}{shown(d)}: {duration_text(ns)} {what}{reset}" for d, ns in _by_device(table.device_ns)]
    if table.batches:
        runs = sum(k.launches for k in table.batches)
        out += ["", *prose(f"JIT graph batches: {_count(runs, 'run')} (each entry is a launch of its device above too: "
                           "not counted again)", wide)]
        out += table_text(table.batches, Layout("graph", "batch", columns(wide, False, "runs"), False, wide, color))
    return lines("\n".join(out))


def prose(text: str, wide: bool = False) -> list[str]:
    """A sentence as lines of at most WIDTH columns (one line if wide), later ones indented."""
    return [text] if wide else textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _by_device(ns: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(ns.items(), key=lambda x: natural(x[0]))


def _title(table: KernelTable) -> str:
    n = sum(k.launches for k in table.kernels)
    where = ""
    if table.markers is not None and table.window is not None:
        a, b = table.markers
        where = f" starting between markers {a!r} and {b!r} ({duration_text(table.window[1] - table.window[0])})"
    if table.host:
        return (f"{_count(len(table.kernels), 'host span name')}, {_count(n, 'span')}{where} (nested spans count "
                "whole: shares are of each track's summed time)")
    by = " (by name)" if table.by == BY_NAME else ""
    return f"{_count(len(table.kernels), 'kernel')}{by}, {n} launch{'' if n == 1 else 'es'}{where}"


def _row(k: KernelStats) -> dict:
    d = asdict(k)
    d["share"] = round(d["share"], 6)
    return {f: d[f] for f in FIELDS}


def as_json(table: KernelTable, n: int | None = None, note: str | None = None) -> str:
    """The table as JSON; `note`: why launches are missing (top.launches_note), or None."""
    rows, other = table.top(n)
    out = {"between": None if table.markers is None else {"start": table.markers[0], "end": table.markers[1],
                                                          "start_ns": table.window[0], "end_ns": table.window[1]},
           "by": table.by, "host": table.host, "device_ns": table.device_ns, "kernels": [_row(k) for k in rows],
           "other": None if other is None else {"launches": other.launches, "total_ns": other.total_ns,
                                                "kernels": len(table.kernels) - len(rows)},
           "batches": [_row(k) for k in table.batches], "batch_ns": table.batch_ns, "note": note}
    return json.dumps(out, indent=1, allow_nan=False)


def as_csv(table: KernelTable, n: int | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    for k in table.top(n)[0] + table.batches:  # batches last, their category tells them apart
        w.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in _row(k).values()])
    return buf.getvalue()
