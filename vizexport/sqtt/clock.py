"""Shader cycles of a launch's blobs → host nanoseconds.

SQTT time is shader-clock cycles on a clock that starts at 0 in each blob (sqtt-format.md §6). RDNA blobs carry
markers: samples of the GPU's 100 MHz reference counter, the counter the kernel timestamps use. So, per blob, cycles
map to reference ticks by interpolating between its markers (beyond them: the blob's mean rate), and ticks to host ns
as `ticks·10 + tdiff` (RDNA3 markers hold only the low 36 bits; the high bits are those of the kernel's start).

Placement of a launch, in order of preference:
- "markers": the absolute placement above, when it puts the launch's waves inside its kernel slice (±1 µs). Blobs
  without markers of their own (gfx12 records them only on instruction-traced SEs) borrow the map of a blob that has
  them: this assumes the SEs' clocks started together, which holds to a few hundred cycles in the examples.
- "anchored": the same marker maps, shifted so that the launch's first wave start is the kernel slice's start (used
  when the absolute placement disagrees with the slice, or there is no slice).
- "assumed": no markers in the launch (CDNA: gfx9 streams have none). Cycles are taken to run at the median clock the
  markers of the device's other launches show or, without any, at the target's peak shader clock (ASSUMED_MHZ), and
  the first wave start is placed after the kernel slice's start by the median delay those launches show (about
  1.2-1.8 µs in the examples), or at the kernel start. CDNA blobs of one launch share one clock
  (their absolute TIMESTAMP samples agree), so one anchor serves them all.
"""
from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .waves import BlobTrace

if TYPE_CHECKING:
    from .launches import Launch

REF_NS = 10  # the reference counter ticks at 100 MHz
TOLERANCE_NS = 1000
NS_LIMIT = 1 << 62
MIN_TICKS = 50  # shader clock points: markers at least 0.5 µs apart
# peak shader clocks (MHz) assumed when neither the launch nor the device's other launches have markers; the
# fallback for unknown targets is DEFAULT_MHZ
ASSUMED_MHZ = {"gfx950": 2400, "gfx942": 2100, "gfx941": 2100, "gfx940": 2100, "gfx90a": 1700, "gfx908": 1502,
               "gfx906": 1725, "gfx1100": 2500, "gfx1201": 2970}
DEFAULT_MHZ = 2000


@dataclass
class CycleMap:
    """Piecewise-linear, non-decreasing map: cycles → ns (before the launch offset)."""

    xs: list[int]
    ys: list[float]
    slope: float  # ns per cycle outside [xs[0], xs[-1]]

    def __call__(self, c: int) -> float:
        xs, ys = self.xs, self.ys
        if c <= xs[0]:
            return ys[0] + (c - xs[0]) * self.slope
        if c >= xs[-1]:
            return ys[-1] + (c - xs[-1]) * self.slope
        i = bisect.bisect_right(xs, c)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (c - x0) * (y1 - y0) / (x1 - x0)


def clean_markers(markers: list[tuple[int, int]], bits: int, near: int | None) -> list[tuple[int, int]]:
    """Markers as (cycle, full tick): one per cycle, ticks unwrapped and extended to the high bits of `near`."""
    out: list[tuple[int, int]] = []
    base = 0
    if near is not None and bits < 64:
        base = (near - markers[0][1] + (1 << (bits - 1))) >> bits << bits if markers else 0
    for c, r in markers:
        r += base
        if out and r < out[-1][1] and out[-1][1] - r > 1 << (bits - 1):  # the counter wrapped
            base += 1 << bits
            r += 1 << bits
        if out and (c <= out[-1][0] or r < out[-1][1]):
            continue
        out.append((c, r))
    return out


def marker_map(markers: list[tuple[int, int]]) -> CycleMap | None:
    """cycles → ns on the reference clock, from ≥ 2 clean markers spanning some time."""
    if len(markers) < 2 or markers[-1][1] <= markers[0][1]:
        return None
    (c0, r0), (c1, r1) = markers[0], markers[-1]
    return CycleMap([c for c, _ in markers], [r * REF_NS for _, r in markers], (r1 - r0) * REF_NS / (c1 - c0))


@dataclass
class LaunchClock:
    mode: str  # "markers" | "anchored" | "assumed"
    description: str
    maps: dict[int, CycleMap] = field(default_factory=dict)  # blob index → map
    offset: float = 0.0
    markers: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # blob index → clean markers

    def first_ns(self, blobs: list[BlobTrace]) -> int | None:
        """Host ns of the launch's first wave start."""
        return min((self.ns(i, c) for i, b in enumerate(blobs) if (c := _first_start(b)) is not None), default=None)

    def ns(self, blob: int, cycle: int) -> int:
        """Host ns of a cycle of one blob (clamped to ±2^62: a corrupt stream's times may be absurd, never fatal)."""
        return max(-NS_LIMIT, min(NS_LIMIT, round(self.maps[blob](cycle) + self.offset)))


def _first_start(bt: BlobTrace) -> int | None:
    return min((w.start for w in bt.waves), default=None)


def _last_end(bt: BlobTrace) -> int | None:
    return max((w.end if w.end is not None else bt.last_time for w in bt.waves), default=None)


def measured_mhz(blobs: list[BlobTrace], arch: str) -> list[float]:
    """The mean shader clock each blob's markers show (MHz), for blobs that have ≥ 2 markers."""
    bits = 36 if arch == "rdna3" else 52
    maps = (marker_map(clean_markers(b.markers, bits, None)) for b in blobs)
    return [1000 / m.slope for m in maps if m is not None and m.slope > 0]


@dataclass
class DeviceHint:
    """What the device's launches with markers tell about those without: their median clock and median delay from
    the kernel start to the first wave start."""

    mhz: float | None = None
    delay_ns: int | None = None


def launch_clocks(launches: list[Launch]) -> list[LaunchClock]:
    """A clock per launch; launches without markers use their device's DeviceHint."""
    clocks = [launch_clock(la) for la in launches]
    mhz: dict[str, list[float]] = defaultdict(list)
    delay: dict[str, list[int]] = defaultdict(list)
    for la, lc in zip(launches, clocks, strict=True):
        mhz[la.device] += measured_mhz(la.blobs, la.arch)
        first = lc.first_ns(la.blobs)
        if lc.mode == "markers" and la.span is not None and first is not None:
            delay[la.device].append(first - la.span.st)
    for i, (la, lc) in enumerate(zip(launches, clocks, strict=True)):
        if lc.mode == "assumed" and (mhz[la.device] or delay[la.device]):
            hint = DeviceHint(statistics.median(mhz[la.device]) if mhz[la.device] else None,
                              round(statistics.median(delay[la.device])) if delay[la.device] else None)
            clocks[i] = launch_clock(la, hint)
    return clocks


def _span(la: Launch) -> tuple[int | None, int | None]:
    s = la.span
    return (s.st, s.en if s.en is not None else s.st) if s is not None else (None, None)


def launch_clock(la: Launch, hint: DeviceHint | None = None) -> LaunchClock:
    """How the cycles of a launch's blobs become host ns; see the module doc. `hint`: what the device's other
    launches measured, used when this one has no markers."""
    blobs, target, tdiff_ns = la.blobs, la.target, la.tdiff_ns
    span_st, span_en = _span(la)
    bits = 36 if la.arch == "rdna3" else 52
    near = (span_st - tdiff_ns) // REF_NS if span_st is not None else None
    marks = {i: clean_markers(b.markers, bits, near) for i, b in enumerate(blobs)}
    maps = {i: m for i, mk in marks.items() if (m := marker_map(mk)) is not None}
    if not maps:
        return _assumed(blobs, target, span_st, hint or DeviceHint())
    donor = maps[min(maps)]
    all_maps = {i: maps.get(i, donor) for i in range(len(blobs))}
    first = _extreme(blobs, all_maps, _first_start, min)
    last = _extreme(blobs, all_maps, _last_end, max)
    borrowed = len(blobs) - len(maps)
    note = f"; {borrowed} SE(s) without markers use SE {blobs[min(maps)].se}'s clock" if borrowed else ""
    if span_st is None or first is None or last is None:
        return LaunchClock("markers", "time from the reference-clock markers (no kernel slice found)" + note,
                           all_maps, tdiff_ns, marks)
    if first + tdiff_ns >= span_st - TOLERANCE_NS and last + tdiff_ns <= (span_en or span_st) + TOLERANCE_NS:
        return LaunchClock("markers", "time from the reference-clock markers (100 MHz, the kernel timestamps' clock)"
                           + note, all_maps, tdiff_ns, marks)
    return LaunchClock("anchored", "cycles → ns by the reference-clock markers, first wave start placed at the kernel "
                       "start (the markers' absolute time disagreed with the kernel slice)" + note,
                       all_maps, span_st - first, marks)


def _extreme(blobs: list[BlobTrace], maps: dict[int, CycleMap], pick, agg) -> float | None:
    vals = [maps[i](c) for i, b in enumerate(blobs) if (c := pick(b)) is not None]
    return agg(vals) if vals else None


def _assumed(blobs: list[BlobTrace], target: str | None, span_st: int | None, hint: DeviceHint) -> LaunchClock:
    if hint.mhz:
        mhz, why = round(hint.mhz), "the median clock the markers of the device's other launches show"
    else:
        mhz = ASSUMED_MHZ.get(target or "", DEFAULT_MHZ)
        why = f"the peak shader clock of {target}" if target in ASSUMED_MHZ else "a default"
    starts = [c for b in blobs if (c := _first_start(b)) is not None]
    c0 = min(starts) if starts else 0
    m = CycleMap([c0, c0 + 1], [0.0, 1000 / mhz], 1000 / mhz)
    where = (f"{hint.delay_ns} ns after the kernel start (the median delay of the device's launches placed by "
             "markers)" if hint.delay_ns is not None else "at the kernel start")
    desc = (f"no clock markers in this launch's stream ({target or 'unknown target'}): cycles assumed at {mhz} MHz "
            f"({why}), the first wave start placed {where}")
    offset = float((span_st or 0) + (hint.delay_ns or 0))
    return LaunchClock("assumed", desc, dict.fromkeys(range(len(blobs)), m), offset)


def clock_points(lc: LaunchClock, blob: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """Shader clock (MHz) at each marker of one blob, as (host ns, MHz), around cycles [lo, hi].

    tinygrad's viewer divides consecutive markers; gfx12 writes markers every ~256 cycles while the reference counter
    moves in steps of 4-8 ticks, which makes single pairs swing between ~2 and ~6 GHz. Here each marker is paired
    with the latest earlier one at least MIN_TICKS before it (0.5 µs), which keeps gfx11's pairs (~170 ticks apart)
    as they are and averages gfx12's over ~a dozen."""
    mk = lc.markers.get(blob) or []
    pts, j = [], 0
    for c1, r1 in mk[1:]:
        while j + 1 < len(mk) and r1 - mk[j + 1][1] >= MIN_TICKS:
            j += 1
        c0, r0 = mk[j]
        if r1 > r0 and c1 > c0:
            pts.append((c1, (c1 - c0) * 1000 // ((r1 - r0) * REF_NS)))
    cs = [c for c, _ in pts]
    i, j = max(bisect.bisect_left(cs, lo) - 1, 0), bisect.bisect_right(cs, hi) + 1
    return [(lc.ns(blob, c), mhz) for c, mhz in pts[i:j]]
