"""A run report: where the time went on each device, what kind of work it was, how launch times spread, how long
launches waited, how JIT batches settle, which call sites cost the most, and achieved against peak rates.

Computed from a Timeline (and, for the host side of launches and device properties, the profile's records); the
writers in vizexport/report/ show it as text, Markdown, JSON and HTML with plots."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..launchtable import CATEGORIES
from ..records import Profile
from ..timeline import Timeline
from .batches import Batch, batches
from .hostside import CallSite, Latency, call_sites, exec_times, latency, tensor_calls
from .launches import Runs, columns, device_ns, kernel_runs
from .usage import CategoryUse, DeviceUse, Overlap, category_use, copy_overlap, device_use

TOP = 20
BINS = 30  # log-spaced bins of a device's launch-duration histogram


@dataclass
class KernelSummary:
    """A kernel's launch durations (ns) and its time-weighted achieved rates (from the compile-time estimates): the
    report's view of analysis.launches.Runs (`top`'s is top.KernelStats)."""

    name: str
    device: str
    program: str | None
    label: str
    category: str
    launches: int
    total_ns: int
    pct: float  # of its device's summed launch time
    mean_ns: float
    min_ns: int
    p10_ns: float
    median_ns: float
    p90_ns: float
    max_ns: int
    gflops: float | None = None
    gbs: float | None = None


@dataclass
class Histogram:
    """A device's launches by duration: log-spaced bin edges (ns) and counts per category."""

    device: str
    edges_ns: list[float]
    counts: dict[str, list[int]]


@dataclass
class Achieved:
    """A kernel's achieved rates against the peak: arithmetic intensity = FLOPs per byte of memory traffic."""

    label: str
    device: str
    total_ns: int
    gflops: float
    gbs: float
    intensity: float | None
    flops_pct: float | None
    bw_pct: float | None


@dataclass
class Peaks:
    gflops: float | None
    gbs: float | None
    source: str
    properties: dict[str, dict] = field(default_factory=dict)  # device → its properties as the profile has them


@dataclass
class Report:
    file: str
    span_ns: int  # first start to last end of anything on the timeline
    launches: int
    launch_ns: int  # summed launch time on every device
    devices: list[DeviceUse]
    overlap: list[Overlap]
    categories: list[CategoryUse]
    kernels: list[KernelSummary]
    histograms: list[Histogram]
    latency: list[Latency]
    batches: list[Batch]
    call_sites: list[CallSite]
    tensor_calls: list[CallSite]
    peaks: Peaks
    achieved: list[Achieved]


def time_range(tl: Timeline) -> tuple[int, int]:
    """The first start and the last end of any event of the timeline."""
    firsts = [t.ts[0] for t in tl.tracks if len(t)]
    lasts = [int((ts + np.maximum(dur, 0)).max()) if t.kind == "slice" else t.ts[-1]
             for t in tl.tracks if len(t) for ts, dur, _ in [columns(t)]]
    return (min(firsts), max(lasts)) if firsts else (0, 0)


def build_report(tl: Timeline, prof: Profile | None = None, peak_gflops: float | None = None,
                 peak_gbs: float | None = None, top: int = TOP) -> Report:
    """The report of a timeline (its launch table) and its profile's records (the host side, device properties)."""
    runs = kernel_runs(tl)
    t0, t1 = time_range(tl)
    by_uuid = {t.uuid: t for t in tl.tracks}
    root_of = {t.name: tl.path(t)[0].name for t in tl.tracks if t.parent in by_uuid}
    kernels = kernel_summaries(runs)
    peaks = Peaks(peak_gflops, peak_gbs, _peak_source(peak_gflops, peak_gbs),
                  {d.device: dict(d.props) for d in (prof.devices if prof else ()) if d.props})
    return Report(file=tl.title, span_ns=t1 - t0, launches=sum(r.count for r in runs),
                  launch_ns=sum(r.total_ns for r in runs), devices=device_use(runs, t0, t1),
                  overlap=copy_overlap(runs, root_of), categories=category_use(runs), kernels=kernels[:top],
                  histograms=histograms(runs), latency=latency(tl), batches=batches(tl),
                  call_sites=call_sites(tl, exec_times(prof)), tensor_calls=tensor_calls(tl), peaks=peaks,
                  achieved=achieved(kernels, peaks))


def _peak_source(gflops: float | None, gbs: float | None) -> str:
    given = [f for f, v in (("--peak-gflops", gflops), ("--peak-gbs", gbs)) if v]
    return " and ".join(given) if given else "none given (the profile's device properties state no clock or peak)"


def kernel_summaries(runs: list[Runs]) -> list[KernelSummary]:
    totals = device_ns(runs)
    out = []
    for r in runs:
        k, d = r.kernel, r.dur
        p10, med, p90 = np.percentile(d, (10, 50, 90)).tolist()
        out.append(KernelSummary(k.name, k.device, k.program, k.label(), r.category, r.count, r.total_ns,
                               100.0 * r.total_ns / totals[k.device], float(d.mean()), int(d.min()), p10, med, p90,
                               int(d.max()), r.gflops, r.gbs))
    return out


def histograms(runs: list[Runs], bins: int = BINS) -> list[Histogram]:
    out = []
    for device in dict.fromkeys(r.kernel.device for r in runs):
        mine = [r for r in runs if r.kernel.device == device]
        durs = np.concatenate([r.dur for r in mine])
        lo, hi = float(durs.min()), float(durs.max())
        edges = np.geomspace(lo, hi * 1.000001, bins + 1) if hi > lo else np.array([lo * 0.9, hi * 1.1])
        counts = {c: np.histogram(np.concatenate([r.dur for r in mine if r.category == c]), edges)[0].tolist()
                  for c in CATEGORIES if any(r.category == c for r in mine)}
        out.append(Histogram(device, edges.tolist(), counts))
    return out


def achieved(kernels: list[KernelSummary], peaks: Peaks) -> list[Achieved]:
    """Kernels with estimates (the rewrites trace gives them), their intensity and share of the peaks."""
    out = []
    for k in kernels:
        if k.gflops is None or k.gbs is None:
            continue
        out.append(Achieved(k.label, k.device, k.total_ns, k.gflops, k.gbs, k.gflops / k.gbs if k.gbs else None,
                            100.0 * k.gflops / peaks.gflops if peaks.gflops else None,
                            100.0 * k.gbs / peaks.gbs if peaks.gbs else None))
    return out
