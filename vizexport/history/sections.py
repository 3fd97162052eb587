"""A check (history.check.Check) as sections of tables, as the report writers show them: a pull-request comment in
Markdown (significant changes first, the rest folded), plain text, one HTML file."""
from __future__ import annotations

from ..analysis.stats import FASTER, SLOWER, VERDICTS
from ..report.tables import Cell, Section, Table, ns, num, ratio, text
from .check import NEW, Check, KernelVerdict

SHORT = 15
VERDICT_ORDER = (*VERDICTS, NEW)
TITLE = "History check"


def title(c: Check) -> str:
    return f"{TITLE}: {c.run.file} ({short(c.run.commit)} on {c.run.branch})"


def short(commit: str) -> str:
    return commit[:10]


def verdict_counts(c: Check) -> str:
    return ", ".join(f"{c.verdicts[v]} {v}" for v in VERDICT_ORDER if c.verdicts.get(v))


def headline(c: Check) -> str:
    runs = f"against {len(c.earlier)} earlier run{'s' if len(c.earlier) != 1 else ''} of {c.run.branch}"
    return f"{verdict_counts(c)} ({runs})" if c.kernels else f"no kernels ({runs})"


def sections(c: Check) -> list[Section]:
    significant = [k for k in c.kernels if k.verdict in (SLOWER, FASTER)]
    out = [_summary(c)]
    if significant:
        out.append(Section("significant", "Significant changes", tables=[_kernel_table(significant)]))
    out.append(Section("kernels", "Kernels", "Per kernel name and device; change = this run against the earlier "
                       "runs (run-wide shift included); interval: its 95% interval; q: p adjusted over the kernels; "
                       "runs: earlier runs that launched it.", [_kernel_table(c.kernels, SHORT)],
                       collapsed=bool(significant)))
    rows = [[text(d.device), num(d.launches), ns(d.total_ns), ns(d.earlier_total_ns),
             ratio(d.total_ns / d.earlier_total_ns if d.earlier_total_ns else None), ns(d.busy_ns),
             ns(d.earlier_busy_ns)] for d in c.devices]
    out.append(Section("devices", "Devices", "Earlier: the median over the earlier runs.",
                       [Table(["Device", "Launches", "Launch time", "earlier", "Change", "Busy", "earlier"], rows)],
                       collapsed=True))
    if c.vanished:
        out.append(Section("vanished", "Vanished kernels", "Launched by the latest earlier run, not by this one.",
                           [Table(["Kernel"], [[text(v)] for v in c.vanished], SHORT)], collapsed=True))
    rows = [[text(short(m.commit)), text(m.time[:19].replace("T", " ")), text(m.file)] for m in c.earlier]
    out.append(Section("earlier", "Earlier runs", tables=[Table(["Commit", "Time (UTC)", "File"], rows)],
                       collapsed=True))
    return out


def _summary(c: Check) -> Section:
    labels = ", ".join(f"{k}={v}" for k, v in sorted(c.run.labels.items()))
    rows = [[text("Run"), text(f"{c.run.file} (tinygrad {c.run.release})" if c.run.release else c.run.file)],
            [text("Commit"), text(f"{c.run.commit} on {c.run.branch}, {c.run.time[:19].replace('T', ' ')} UTC")],
            [text("Earlier runs"), text(f"{len(c.earlier)} of {c.run.branch}" + (
                f" ({short(c.earlier[0].commit)} … {short(c.earlier[-1].commit)})" if c.earlier else ""))],
            [text("Run-wide shift"), text(ratio(c.shift)[0] + " (every kernel alike; set aside for the verdicts)")],
            [text("Kernels"), text(verdict_counts(c) or "none")]]
    if labels:
        rows.insert(2, [text("Labels"), text(labels)])
    note = (f"Slower or faster only with evidence: the adjusted p-value below α = {c.alpha:g}, the interval "
            f"excluding no change, the change at least {c.min_effect:.0%}; unchanged only where the interval lies "
            f"within ±{c.min_effect:.0%}; otherwise inconclusive; a kernel fewer than {c.min_runs} earlier runs "
            f"launched has too few launches. Method: {c.method}.")
    return Section("summary", "Summary", note, [Table(["", ""], rows)])


def _kernel_table(ks: list[KernelVerdict], limit: int | None = None) -> Table:
    rows = [[text(k.name), text(k.device), text(k.match), num(k.launches), num(k.runs), ns(k.median_ns),
             ns(k.earlier_median_ns), ratio(k.ratio), _interval(k), num(k.q, "{:.3g}"), text(k.verdict)] for k in ks]
    return Table(["Kernel", "Device", "Programs", "Launches", "Runs", "Median", "earlier", "Change", "95% interval",
                  "q", "Verdict"], rows, limit)


def _interval(k: KernelVerdict) -> Cell:
    if k.interval is None:
        return text("")
    low, high = k.interval
    return (f"{(low - 1) * 100:+.0f}% … {(high - 1) * 100:+.0f}%", low)
