"""The report's and the diff's plots as static SVG text, drawn with matplotlib when the output is built (no script,
no CDN: they show from file:// and in any viewer). Each plot reads only the analysis records."""
from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter, FuncFormatter, LogFormatter, NullFormatter

from ..analysis.diff import Diff
from ..analysis.report import Report
from ..analysis.stats import FASTER, SLOWER
from ..launchtable import CATEGORIES
from ..text import PLOT_STYLE, plot_label

WIDTH = 7.5  # inches
ROW = 0.28  # inches per bar of a horizontal bar plot
MAX_ROWS = 25  # bars or kernels in one plot
MAX_PANELS = 6  # devices shown side by side
LABEL = 48  # characters of a label (a name from the pickle: text.plot_label)
COLORS = dict(zip(CATEGORIES, ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#8c8c8c"), strict=True))
VERDICT_COLORS = {SLOWER: "#c44e52", FASTER: "#55a868"}
STYLE = {"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
         "axes.titlesize": 10, "legend.fontsize": 8, "legend.frameon": False, **PLOT_STYLE}  # no mathtext
RATIO_TICKS = (0.1, 0.2, 0.5, 0.8, 1, 1.25, 2, 5, 10)  # after/before: −90% … +900%
TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns"))


def tick_duration(x: float, _pos: object = None) -> str:
    """A duration as an axis tick: three significant digits at most (500 ms, 1.5 s, 20 µs)."""
    if x == 0:
        return "0"
    scale, unit = next(((s, u) for s, u in TIME_UNITS if abs(x) >= s), TIME_UNITS[-1])
    return f"{x / scale:.3g} {unit}"


DURATION = FuncFormatter(tick_duration)
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
PLAIN_DECADES = range(-3, 5)  # 0.001 … 10000 as they are; beyond, 10⁻⁴, 10⁵


def tick_decade(x: float, _pos: object = None) -> str:
    """A log axis's major tick (a power of ten) as plain text: 0.01, 100, 10⁻⁴, 10⁶."""
    k = round(np.log10(x)) if x > 0 else 0
    return f"{x:g}" if k in PLAIN_DECADES or x <= 0 else "10" + str(k).translate(SUPERSCRIPT)


DECADE = FuncFormatter(tick_decade)
MINOR_ALL, MINOR_SOME = 0.4, 1.0  # decades an axis may span for all its minor ticks, or 2× and 5×, to be labelled


class MinorDurations(Formatter):
    """Minor ticks of a log duration axis as durations, labelled only where its few decades leave too few major
    ticks to read it (as matplotlib's log formatter does, whose labels would be 8×10³ ns and cost a mathtext
    parse each)."""

    def __call__(self, x: float, pos: object = None) -> str:
        lo, hi = sorted(self.axis.get_view_interval()) if self.axis else (0, 0)
        if x <= 0 or lo <= 0:
            return ""
        decades = np.log10(hi / lo)
        coeff = round(x / 10 ** np.floor(np.log10(x) + 1e-9))
        shown = decades <= MINOR_ALL or (decades <= MINOR_SOME and coeff in (2, 5))
        return tick_duration(x) if shown else ""


def _log_durations(ax: Axes) -> None:
    """A log x axis of durations."""
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(DURATION)
    ax.xaxis.set_minor_formatter(MinorDurations())


def _svg(fig: Figure, name: str) -> str:
    """The figure as inline SVG: no XML prologue, ids salted by the plot's name so plots on one page never share
    one, no date (the same input gives the same bytes)."""
    buf = io.StringIO()
    with rc_context({**STYLE, "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    s = buf.getvalue()
    return s[s.index("<svg"):]


def _figure(height: float, panels: int = 1) -> tuple[Figure, list[Axes]]:
    with rc_context(STYLE):
        fig = Figure(figsize=(WIDTH, height), layout="constrained")
        axes = fig.subplots(1, panels, squeeze=False)[0].tolist()
    return fig, axes


def _label(s: str) -> str:
    return plot_label(s, LABEL)


def report_plots(r: Report) -> dict[str, str]:
    """Plot name → SVG, for the plots the report's sections name (run_sections)."""
    makers: dict[str, Callable[[Report], Figure | None]] = {
        "busy": _busy, "categories": _categories, "spread": _spread, "histograms": _histograms,
        "latency": _latency, "batches": _batches,
        "call-sites": lambda r: _sites(r.call_sites, "Device time by call site"),
        "tensor-calls": lambda r: _sites(r.tensor_calls, "Device time by Tensor call"), "roofline": _roofline}
    with rc_context(STYLE):
        figs = {name: make(r) for name, make in makers.items()}
    return {name: _svg(fig, name) for name, fig in figs.items() if fig is not None}


def _busy(r: Report) -> Figure | None:
    if not r.devices:
        return None
    fig, (ax,) = _figure(2.6)
    for d in r.devices[:MAX_PANELS]:
        x = np.linspace(0, r.span_ns, len(d.busy_over_time) + 1)
        ax.stairs(np.array(d.busy_over_time) * 100, x, label=_label(d.device))
    ax.xaxis.set_major_formatter(DURATION)
    ax.set(xlabel="time since the start of the run", ylabel="busy %", title="Busy share over the run", ylim=(0, None))
    ax.legend(loc="upper right")
    return fig


def _categories(r: Report) -> Figure | None:
    devices = list(dict.fromkeys(c.device for c in r.categories))
    if not devices:
        return None
    fig, (ax,) = _figure(0.8 + ROW * len(devices))
    left = np.zeros(len(devices))
    names = [_label(d) for d in devices]
    for cat in CATEGORIES:
        share = np.array([sum(c.pct for c in r.categories if c.device == d and c.category == cat) for d in devices])
        if share.any():
            ax.barh(names, share, left=left, color=COLORS[cat], label=cat)
            left += share
    ax.invert_yaxis()
    ax.set(xlabel="% of the device's launch time", xlim=(0, 100))
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(CATEGORIES))
    return fig


def _spread(r: Report) -> Figure | None:
    ks = r.kernels[:MAX_ROWS]
    if not ks:
        return None
    fig, (ax,) = _figure(0.9 + ROW * len(ks))
    y = np.arange(len(ks))
    colors = [COLORS[k.category] for k in ks]
    ax.hlines(y, [k.min_ns for k in ks], [k.max_ns for k in ks], colors=colors, linewidth=1)
    ax.hlines(y, [k.p10_ns for k in ks], [k.p90_ns for k in ks], colors=colors, linewidth=6, alpha=0.6)
    ax.scatter([k.median_ns for k in ks], y, marker="|", s=120, color="black", zorder=3)
    _kernel_rows(ax, y, ks)
    _log_durations(ax)
    ax.set(title="Launch durations of the top kernels: min–max, p10–p90, median")
    return fig


def _kernel_rows(ax: Axes, y: np.ndarray, ks: list) -> None:
    """One row per kernel, the first on top, over a log x axis."""
    ax.set_yticks(y, [_label(f"{k.label} · {k.device}") for k in ks])
    ax.invert_yaxis()
    ax.set_xscale("log")


def _histograms(r: Report) -> Figure | None:
    hs = r.histograms[:MAX_PANELS]
    if not hs:
        return None
    fig, axes = _figure(2.6, len(hs))
    for ax, h in zip(axes, hs, strict=True):
        edges, bottom = np.array(h.edges_ns), np.zeros(len(h.edges_ns) - 1)
        for cat, counts in h.counts.items():
            ax.bar(edges[:-1], counts, width=np.diff(edges), bottom=bottom, align="edge", color=COLORS[cat], label=cat)
            bottom += counts
        _log_durations(ax)
        ax.tick_params(axis="x", which="both", labelrotation=30)
        ax.set(title=_label(h.device), xlabel="launch duration")
    axes[0].set_ylabel("launches")
    axes[-1].legend(loc="upper right")
    return fig


def _latency(r: Report) -> Figure | None:
    if not r.latency:
        return None
    fig, (ax,) = _figure(2.6)
    samples = [np.array(x.samples) for x in r.latency[:MAX_PANELS]]
    lo, hi = min(s.min() for s in samples), max(s.max() for s in samples)
    log = lo > 0 and hi > lo
    bins = np.geomspace(lo, hi, 31) if log else 30
    for x, s in zip(r.latency, samples, strict=False):
        ax.hist(s, bins=bins, histtype="step", linewidth=1.5, label=_label(x.device))
    if log:
        _log_durations(ax)
    else:
        ax.xaxis.set_major_formatter(DURATION)
    ax.set(title="Launch latency: device start − host exec", xlabel="latency", ylabel="launches")
    ax.legend(loc="upper right")
    return fig


def _batches(r: Report) -> Figure | None:
    if not r.batches:
        return None
    fig, (ax,) = _figure(2.6)
    for b in r.batches[:MAX_PANELS]:
        ax.plot(np.arange(1, len(b.durations) + 1), b.durations, marker="o", markersize=3, label=_label(b.label))
    ax.yaxis.set_major_formatter(DURATION)
    ax.set(title="JIT batch time, call after call", xlabel="call", ylabel="duration", ylim=(0, None))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper right")
    return fig


def _sites(sites: list, title: str) -> Figure | None:
    rows = sites[:MAX_ROWS]
    if not rows:
        return None
    fig, (ax,) = _figure(0.8 + ROW * len(rows))
    ax.barh([_label(s.site) for s in rows], [s.device_ns for s in rows], color="#4c72b0")
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(DURATION)
    ax.set(title=title)
    return fig


def _roofline(r: Report) -> Figure | None:
    pts = [a for a in r.achieved if a.intensity and a.gflops > 0]
    if not pts:
        return None
    fig, (ax,) = _figure(3.2)
    size = np.array([a.total_ns for a in pts], float)
    ax.scatter([a.intensity for a in pts], [a.gflops for a in pts], s=20 + 200 * size / size.max(), alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):  # plain text: the default 10^x labels cost a mathtext parse each
        axis.set_major_formatter(DECADE)
        axis.set_minor_formatter(LogFormatter(10, labelOnlyBase=False))
    x = np.geomspace(*ax.get_xlim(), 50)
    if r.peaks.gbs:
        roof = x * r.peaks.gbs if not r.peaks.gflops else np.minimum(x * r.peaks.gbs, r.peaks.gflops)
        ax.plot(x, roof, color="#c44e52", label="peak")
    elif r.peaks.gflops:
        ax.axhline(r.peaks.gflops, color="#c44e52", label="peak")
    ax.set(title="Achieved rate against arithmetic intensity (dot size: time)", xlabel="FLOP per byte",
           ylabel="GFLOPS")
    if r.peaks.gflops or r.peaks.gbs:
        ax.legend(loc="lower right")
    return fig


def diff_plots(d: Diff) -> dict[str, str]:
    with rc_context(STYLE):
        figs = {"ratios": _ratios(d), "totals": _totals(d)}
    return {name: _svg(fig, name) for name, fig in figs.items() if fig is not None}


def _ratios(d: Diff) -> Figure | None:
    ks = sorted((k for k in d.kernels if k.ratio is not None), key=lambda k: -max(k.total_before_ns,
                                                                                 k.total_after_ns))[:MAX_ROWS]
    if not ks:
        return None
    fig, (ax,) = _figure(1.0 + ROW * len(ks))
    y = np.arange(len(ks))
    ax.axvspan(1 - d.min_effect, 1 + d.min_effect, color="#eeeeee", label=f"±{d.min_effect:.0%}")
    ax.axvline(1, color="#888888", linewidth=0.8)
    for i, k in enumerate(ks):
        color = VERDICT_COLORS.get(k.verdict, "#4c72b0")
        if k.low is not None and k.high is not None:
            ax.hlines(i, k.low, k.high, color=color, linewidth=2, alpha=0.5)
        ax.scatter([k.ratio], [i], color=color, zorder=3, s=18)
    _kernel_rows(ax, y, ks)
    lo, hi = ax.get_xlim()
    ax.set_xticks([t for t in RATIO_TICKS if lo <= t <= hi], minor=False)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{(x - 1) * 100:+.0f}%"))
    ax.set(title="Median launch time, pull request vs base (bar: 95% bootstrap interval)")
    ax.legend(loc="lower right")
    return fig


def _totals(d: Diff) -> Figure | None:
    ts = d.devices[:MAX_ROWS]
    if not ts:
        return None
    fig, (ax,) = _figure(0.9 + 2 * ROW * len(ts))
    y = np.arange(len(ts))
    ax.barh(y - 0.2, [t.busy_before_ns or 0 for t in ts], height=0.4, color="#8c8c8c", label="base")
    ax.barh(y + 0.2, [t.busy_after_ns or 0 for t in ts], height=0.4, color="#4c72b0", label="pull request")
    ax.set_yticks(y, [_label(t.name) for t in ts])
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(DURATION)
    ax.set(title="Busy time per device")
    ax.legend(loc="lower right")
    return fig
