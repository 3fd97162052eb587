"""The kernel table as text (laid out like tinygrad's `viz.cli -t`: device, name padded to 38 columns, total time,
launches, share), JSON and CSV."""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict

from ..devices import natural
from ..text import lines, shown
from .top import KernelStats, KernelTable

NAME_WIDTH = 38  # tinygrad's `viz.cli -t` pads "<device[:7]> <name>" to this many columns
DEVICE_WIDTH = 7  # at least: tinygrad's `-t` cuts device names there; ours are shown whole
RATE_DIGITS = 10
BOLD, DIM, CYAN, RESET = "\x1b[1m", "\x1b[2m", "\x1b[36m", "\x1b[0m"
FIELDS = ("device", "name", "program", "category", "launches", "total_ns", "mean_ns", "median_ns", "p90_ns",
          "min_ns", "max_ns", "share", "gflops", "gbs")


def time_text(ns: float | None, width: int = 9) -> str:
    """A duration as tinygrad's time_to_str writes one: seconds above 10 s, ms above 10 ms, else µs ("us")."""
    if ns is None:
        return " " * (width + 2) if width else "-"
    t = ns * 1e-9
    for scale, unit in ((1, "s "), (1e3, "ms")):
        if t > 10 / scale:
            return f"{t * scale:{width}.2f}{unit}"
    return f"{t * 1e6:{width}.2f}us"


def _rate(x: float | None) -> str:
    if x is None:
        return f"{'-':>9}"
    return f"{x:9.1f}" if x >= RATE_DIGITS else f"{x:9.3g}"  # three significant digits for slow (NULL) kernels


def as_text(table: KernelTable, n: int | None = None, color: bool = False) -> str:
    """Rows of the `n` longest kernels (and one for the rest); `color`: ANSI codes, for a terminal. Names are shown
    text (text.shown) before they are padded and coloured."""
    bold, dim, cyan, reset = (BOLD, DIM, CYAN, RESET) if color else ("", "", "", "")
    rows, other = table.top(n)
    dw = max([DEVICE_WIDTH, *(len(shown(k.device)) for k in rows)])
    head = (f"{'device':{dw}} {'kernel':{NAME_WIDTH - DEVICE_WIDTH - 1}} {'total':>11} {'launches':>8} "
            f"{'share':>7} {'mean':>11} {'median':>11} {'p90':>11} {'min':>11} {'max':>11} {'GFLOPS':>9} {'GB/s':>9}"
            "  category")
    out = [_title(table), bold + head + reset]
    for k in rows + ([other] if other is not None else []):
        label = shown(k.label)
        name = f"{dim}{shown(k.device):{dw}}{reset} {label}"
        pad = " " * max(0, NAME_WIDTH - DEVICE_WIDTH - 1 - len(label))
        out.append(f"{name}{pad} {time_text(k.total_ns)} {k.launches:8d} {k.share:6.2f}% {time_text(k.mean_ns)} "
                   f"{time_text(k.median_ns)} {time_text(k.p90_ns)} {time_text(k.min_ns)} {time_text(k.max_ns)} "
                   f"{_rate(k.gflops)} {_rate(k.gbs)}  {cyan + k.category + reset if k.category else ''}".rstrip())
    for dev, ns in sorted(table.device_ns.items(), key=lambda x: natural(x[0])):
        out.append(f"{dim}{shown(dev)}: {time_text(ns, 0).strip()} busy{reset}")
    return lines("\n".join(out))


def _title(table: KernelTable) -> str:
    n = sum(k.launches for k in table.kernels)
    where = ""
    if table.markers is not None and table.window is not None:
        a, b = table.markers
        where = f" starting between markers {a!r} and {b!r} ({time_text(table.window[1] - table.window[0], 0)})"
    return f"{len(table.kernels)} kernels, {n} launches{where}"


def _row(k: KernelStats) -> dict:
    d = asdict(k)
    d["share"] = round(d["share"], 6)
    return {f: d[f] for f in FIELDS}


def as_json(table: KernelTable, n: int | None = None) -> str:
    rows, other = table.top(n)
    out = {"between": None if table.markers is None else {"start": table.markers[0], "end": table.markers[1],
                                                          "start_ns": table.window[0], "end_ns": table.window[1]},
           "device_ns": table.device_ns, "kernels": [_row(k) for k in rows],
           "other": None if other is None else {"launches": other.launches, "total_ns": other.total_ns,
                                                "kernels": len(table.kernels) - len(rows)}}
    return json.dumps(out, indent=1, allow_nan=False)


def as_csv(table: KernelTable, n: int | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    for k in table.top(n)[0]:
        w.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in _row(k).values()])
    return buf.getvalue()
