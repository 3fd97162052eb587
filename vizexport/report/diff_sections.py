"""analysis.diff.Diff → sections of tables (and the plots that go with them)."""
from __future__ import annotations

from ..analysis.diff import NEW, VANISHED, Diff, KernelChange, Side, TotalChange
from ..analysis.stats import FASTER, SLOWER, VERDICTS
from ..units import duration_text
from .tables import Cell, Section, Table, delta_ns, kernel, ns, num, ratio, text

SHORT = 15
VERDICT_ORDER = (*VERDICTS, NEW, VANISHED)


def sections(d: Diff) -> list[Section]:
    significant = [k for k in d.kernels if k.verdict in (SLOWER, FASTER)]
    matched = [k for k in d.kernels if k.verdict not in (NEW, VANISHED)]
    out = [_summary(d)]
    if significant:
        out.append(Section("significant", "Significant changes", tables=[_kernel_table(significant)]))
    out.append(Section("kernels", "Kernels", "Per kernel name and device, all its programs together: matched by "
                       "program where both runs have the same program keys, else by name (a name whose program "
                       "changed is labelled so); change = the median paired ratio "
                       "after / before − 1 where both runs launch a kernel alike (paired), else the ratio of medians; "
                       "interval: its 95% interval; q: p adjusted over the kernels.", [_kernel_table(matched, SHORT)],
                       ["ratios"], collapsed=bool(significant)))
    for verdict, title in ((NEW, "New kernels"), (VANISHED, "Vanished kernels")):
        ks = [k for k in d.kernels if k.verdict == verdict]
        if ks:
            rows = [[_kernel(k), text(k.device), text(k.category), num(k.launches_before + k.launches_after),
                     ns(k.total_before_ns + k.total_after_ns)] for k in ks]
            out.append(Section(verdict, title, tables=[Table(["Kernel", "Device", "Category", "Launches", "Total"],
                                                             rows, SHORT)], collapsed=True))
    out.append(Section("devices", "Devices", "Busy = the union of the device's launches.",
                       [_totals(d.devices, "Device", busy=True)], ["totals"]))
    out.append(Section("categories", "Categories", tables=[_totals(d.categories, "Category", busy=False)]))
    if d.intervals:
        rows = [[text(i.name), ns(i.wall_before_ns), ns(i.wall_after_ns), ratio(_r(i.wall_after_ns, i.wall_before_ns)),
                 ns(i.busy_before_ns), ns(i.busy_after_ns), delta_ns(i.busy_before_ns, i.busy_after_ns),
                 num(i.launches_before), num(i.launches_after)] for i in d.intervals]
        out.append(Section("intervals", "Between markers", "Stretches between markers, matched by name and order.",
                           [Table(["Stretch", "Wall before", "Wall after", "Change", "Busy before", "Busy after",
                                   "Busy change", "Launches before", "Launches after"], rows)], collapsed=True))
    return out


def _r(after: float, before: float) -> float | None:
    return after / before if before else None


def _summary(d: Diff) -> Section:
    rows = [[text("Base"), text(_side(d.base))], [text("Pull request"), text(_side(d.pr))],
            [text("Launch time"), text(f"{duration_text(d.base.launch_ns)} → {duration_text(d.pr.launch_ns)} "
                                       f"({ratio(_r(d.pr.launch_ns, d.base.launch_ns))[0]})")],
            [text("Launches"), text(f"{d.base.launches:,} → {d.pr.launches:,}")],
            [text("Run-wide shift"), text(f"{ratio(d.wide.shift)[0]} for every kernel; scatter ±{d.wide.spread:.0%}, "
                                          f"medians ±{duration_text(round(d.wide.jitter))} between runs anyway (set "
                                          "aside)")],
            [text("Kernels"), text(verdict_counts(d))]]
    note = (f"Slower or faster only with evidence: the adjusted p-value below α = {d.alpha:g}, the interval "
            f"excluding no change, the change at least {d.min_effect:.0%} and its median's move beyond what most "
            "kernels' move anyway; unchanged only where the interval lies "
            f"within ±{d.min_effect:.0%}; otherwise inconclusive. Method: {d.method}.")
    return Section("summary", "Summary", note, [Table(["", ""], rows)])


def verdict_counts(d: Diff) -> str:
    return ", ".join(f"{d.verdicts[v]} {v}" for v in VERDICT_ORDER if d.verdicts.get(v))


def _side(s: Side) -> str:
    release = f" (tinygrad {s.release})" if s.release else ""
    return f"{s.file}{release}"


TERMINAL_DROPS = ((2,), (5, 6), (3, 4))  # a terminal's kernel table keeps the medians, the change and the verdict


def _kernel_table(ks: list[KernelChange], limit: int | None = None) -> Table:
    rows = [[_kernel(k), text(k.device), text(k.matched), num(k.launches_before), num(k.launches_after),
             ns(k.total_before_ns), ns(k.total_after_ns), ns(k.median_before_ns), ns(k.median_after_ns),
             ratio(k.ratio), _interval(k), num(k.q, "{:.3g}"), text(k.verdict)] for k in ks]
    return Table(["Kernel", "Device", "Matched by", "Launches before", "after", "Total before", "after",
                  "Median before", "after", "Change", "95% interval", "q", "Verdict"], rows, limit, TERMINAL_DROPS)


def _kernel(k: KernelChange) -> Cell:
    """A kernel's name, linked (on the site, whose pages are the pull request's run) unless it vanished: a vanished
    program's name may be another program's in the pull request."""
    return text(k.label) if k.verdict == VANISHED else kernel(k.label, k.device)


def _interval(k: KernelChange) -> Cell:
    if k.low is None or k.high is None:
        return text("")
    return (f"{(k.low - 1) * 100:+.0f}% … {(k.high - 1) * 100:+.0f}%", k.low)


def _totals(ts: list[TotalChange], what: str, busy: bool) -> Table:
    rows = []
    for t in ts:
        row = [text(t.name), num(t.launches_before), num(t.launches_after)]
        if busy:
            row += [ns(t.busy_before_ns), ns(t.busy_after_ns), delta_ns(t.busy_before_ns or 0, t.busy_after_ns or 0)]
        row += [ns(t.total_before_ns), ns(t.total_after_ns), ratio(_r(t.total_after_ns, t.total_before_ns))]
        rows.append(row)
    headers = [what, "Launches before", "after"] + (["Busy before", "after", "Busy change"] if busy else [])
    return Table([*headers, "Launch time before", "after", "Change"], rows)
