"""analysis.report.Report → sections of tables (and the plots that go with them)."""
from __future__ import annotations

from ..analysis.hostside import CallSite
from ..analysis.report import Report
from ..text import shown
from ..units import duration_text
from .tables import Section, Table, kernel, kernels, ns, num, pct, rate, text

SHORT = 10  # rows a terminal or a comment shows of a long table
PROPERTIES_CHARS = 1000  # of one device's properties (a real AMD device has about 200)


def sections(r: Report) -> list[Section]:
    out = [_run(r), _devices(r), _gaps(r)]
    if r.overlap:
        out.append(_overlap(r))
    out += [_categories(r), _kernels(r)]
    if r.latency:
        out.append(_latency(r))
    if r.batches:
        out.append(_batches(r))
    out.append(_sites("call-sites", "Python call sites", r.call_sites, "The device time of launches by the line of the "
                      "program that led to them: the outermost host span with a traceback around the launch's exec "
                      "event, at its first frame outside the library and the standard library."))
    if r.tensor_calls:
        out.append(_sites("tensor-calls", "Tensor calls", r.tensor_calls, "The device time of launches by the Tensor "
                          "calls recorded with them (metadata)."))
    out.append(_peaks(r))
    return out


def _run(r: Report) -> Section:
    rows = [[text("Profile"), text(r.file)], [text("Time span"), ns(r.span_ns)],
            [text("Launches"), num(r.launches)], [text("Launch time (all devices, summed)"), ns(r.launch_ns)]]
    return Section("run", "Run", tables=[Table(["", ""], rows)])


def _devices(r: Report) -> Section:
    rows = [[text(d.device), num(d.launches), ns(d.active_ns), ns(d.busy_ns), ns(d.idle_ns), pct(d.busy_pct, 2)]
            for d in r.devices]
    return Section("devices", "Devices", "Busy = the union of a device's launches (lanes together); active = from its "
                   "first launch's start to its last launch's end; idle = active − busy.",
                   [Table(["Device", "Launches", "Active", "Busy", "Idle", "Busy %"], rows)], ["busy"])


def _gaps(r: Report) -> Section:
    rows = [[text(d.device), ns(g.start_ns), ns(g.dur_ns), kernel(g.after, d.device), kernel(g.before, d.device)]
            for d in r.devices for g in d.gaps]
    return Section("gaps", "Largest gaps", "Idle stretches between launches, the longest of each device (start from "
                   "the beginning of the run).", [Table(["Device", "At", "Length", "After", "Before"], rows)])


def _overlap(r: Report) -> Section:
    rows = [[text(o.device), ns(o.compute_ns), ns(o.copy_ns), ns(o.both_ns), pct(o.hidden_pct)] for o in r.overlap]
    return Section("overlap", "Copies and compute", "Per device with its copy engines: time copies ran while "
                   "compute ran.", [Table(["Device", "Compute", "Copies", "Both at once", "Copy time hidden"], rows)])


def _categories(r: Report) -> Section:
    rows = [[text(c.device), text(c.category), num(c.launches), ns(c.total_ns), pct(c.pct)] for c in r.categories]
    return Section("categories", "Kernel categories", "From the kernel's name (tinygrad names reducing kernels r_…, "
                   "others E_…), copies, and tensor-core instructions in the program's UOps when the rewrites trace "
                   "is given.", [Table(["Device", "Category", "Launches", "Time", "% of device"], rows)],
                   ["categories"])


def _kernels(r: Report) -> Section:
    rows = [[kernel(k.label, k.device), text(k.device), text(k.category), num(k.launches), ns(k.total_ns), pct(k.pct),
             ns(k.median_ns), ns(k.p10_ns), ns(k.p90_ns), ns(k.max_ns), rate(k.gflops), rate(k.gbs)]
            for k in r.kernels]
    headers = ["Kernel", "Device", "Category", "Launches", "Total", "% of device", "Median", "p10", "p90", "Max",
               "GFLOPS", "GB/s"]
    return Section("kernels", "Kernels", f"The {len(r.kernels)} with the most device time; launch durations, and "
                   "achieved rates weighted by time (from the compile-time estimates).",
                   [Table(headers, rows, SHORT, ((7,), (9,)))], ["spread", "histograms"])  # a terminal drops p10, max


def _latency(r: Report) -> Section:
    rows = [[text(x.device), num(x.launches), ns(x.median_ns), ns(x.p90_ns), ns(x.min_ns), ns(x.max_ns)]
            for x in r.latency]
    return Section("latency", "Launch latency", "Device start − the host's exec event of the same launch (JIT graph "
                   "entries have none of their own).",
                   [Table(["Device", "Launches", "Median", "p90", "Min", "Max"], rows)], ["latency"])


def _batches(r: Report) -> Section:
    rows = [[text(b.label), text(b.track), num(b.launches), num(b.calls), ns(b.first_ns), ns(b.steady_ns),
             num(b.first_ns / b.steady_ns if b.steady_ns else None, "{:.2f}×")] for b in r.batches]
    return Section("batches", "JIT batches", "Each JIT graph batch told apart by the launches it holds: its first "
                   "call against the median of the later ones.",
                   [Table(["Batch", "Track", "Launches", "Calls", "First", "Steady", "First / steady"], rows, SHORT)],
                   ["batches"])


def _sites(key: str, title: str, sites: list[CallSite], note: str) -> Section:
    rows = [[text(s.site), text(s.code), num(s.launches), ns(s.device_ns), pct(s.pct), kernels(s.kernels)]
            for s in sites]
    return Section(key, title, note, [Table(["Where", "Code", "Launches", "Device time", "%", "Kernels"], rows, SHORT)],
                   [key])


def _peaks(r: Report) -> Section:
    p = r.peaks
    given = ", ".join(x for x in (p.gflops and f"{p.gflops:g} GFLOPS", p.gbs and f"{p.gbs:g} GB/s") if x)
    note = f"Peak: {given} ({p.source})." if given else f"Peak: {p.source}; --peak-gflops and --peak-gbs set one."
    if p.properties:
        note += " Device properties: " + "; ".join(f"{shown(d)}: " + _properties(props)
                                                  for d, props in p.properties.items()) + "."
    if not r.achieved:
        note += " No kernel has estimates (they come with the rewrites trace)."
    rows = [[kernel(a.label, a.device), text(a.device), ns(a.total_ns), rate(a.gflops), rate(a.gbs), rate(a.intensity),
             pct(a.flops_pct, 2), pct(a.bw_pct, 2)] for a in r.achieved]
    headers = ["Kernel", "Device", "Time", "GFLOPS", "GB/s", "FLOP/byte", "% of peak FLOPS", "% of peak GB/s"]
    return Section("peak", "Achieved vs peak", note, [Table(headers, rows, SHORT)] if rows else [],
                   ["roofline"] if rows else [])


def _properties(props: dict) -> str:
    return shown(", ".join(f"{k}={v}" for k, v in props.items()), PROPERTIES_CHARS)


def headline(r: Report) -> str:
    busiest = max(r.devices, key=lambda d: d.busy_ns, default=None)
    top = r.kernels[0] if r.kernels else None
    return (f"{r.launches:,} launches, {duration_text(r.launch_ns)} of device time in {duration_text(r.span_ns)}"
            + (f"; busiest {shown(busiest.device)} ({busiest.busy_pct:.1f}% busy)" if busiest else "")
            + (f"; top kernel {shown(top.label)} ({top.pct:.1f}% of {shown(top.device)})" if top else ""))
