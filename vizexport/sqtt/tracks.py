"""Decoded SQTT launches → Timeline tracks under a device root.

Per launch, a group `SQTT <kernel> n<run>` holds one group per SE, in it one per WGP (RDNA: `SA<sa> WGP<wgp>`) or
CU (CDNA: `CU<cu>`), in it one track per SIMD: `SIMD<n>` is the SIMD's occupancy counter (waves in flight, shown in
the SIMD's own row) and holds one slice track per hardware wave slot (`slot <n>`: the waves of one slot never
overlap). Every wave is one slice named `wave` (`wave (traced)` on the instruction-traced unit); every issue of a
traced wave is a slice nested in it, named by mnemonic when the PC walk placed it, else by its SQTT category, lasting
until the wave's next issue (or its end): `cycles` is that interval, the issue-to-issue time that shows stalls. SEs
with clock markers get a `SE<n> shader clock` counter (MHz), and the launch a `Shader Clock` counter (Hz, tinygrad's
name) from its instruction-traced SE. How cycles became ns is said in the launch group's description (clock.py).
"""
from __future__ import annotations

from collections import defaultdict

from ..records import Profile
from ..timeline import Role, Timeline, Track
from .clock import LaunchClock, clock_points, launch_clocks
from .launches import Launch, load_launches
from .waves import BlobTrace, Wave

MHZ = 1_000_000  # Hz per MHz
MAX_MHZ = 10_000  # a shader clock beyond 10 GHz is a corrupt capture's markers, not a measurement


def add_sqtt_tracks(tl: Timeline, parent: Track, prof: Profile, launches: list[Launch] | None = None) -> list[Track]:
    """Add a group per decoded SQTT launch of the devices under `parent` (a device root such as `AMD`, whose name
    selects the captures) and return the groups. Pass `launches` (sqtt.load_launches) to reuse decoded ones."""
    if launches is None:
        launches = load_launches(prof, parent.name)
    launches = [la for la in launches if la.blobs]
    return [_launch(tl, parent, la, lc) for la, lc in zip(launches, launch_clocks(launches), strict=True)]


def _launch(tl: Timeline, parent: Track, la: Launch, clock: LaunchClock) -> Track:
    group = tl.add_track(f"SQTT {la.name} n{la.run}", parent, "group", Role.SQTT, description=_describe(la, clock))
    _shader_clock(tl, group, la, clock)
    for i, bt in enumerate(la.blobs):
        _se(tl, group, bt, i, clock, la.arch)
    return group


def _shader_clock(tl: Timeline, group: Track, la: Launch, clock: LaunchClock) -> None:
    """The launch's `Shader Clock` (Hz, as tinygrad's viewer names and scales it): the clock the markers of the
    instruction-traced SE show (else of the first SE with markers) over the launch's waves. None for an assumed
    clock: there is nothing measured to show."""
    if clock.mode == "assumed":
        return
    order = sorted(range(len(la.blobs)), key=lambda i: (not la.blobs[i].itrace, i))
    for i in order:
        bt = la.blobs[i]
        if bt.waves and bt.markers:
            lo, hi = min(w.start for w in bt.waves), max(w.end or bt.last_time for w in bt.waves)
            pts = [(ts, mhz) for ts, mhz in clock_points(clock, i, lo, hi) if 0 < mhz <= MAX_MHZ]
            if pts:
                c = tl.add_track("Shader Clock", group, "counter", Role.SQTT, unit="Hz",
                                 description=f"from SE{bt.se}'s clock markers")
                c.ts.extend(ts for ts, _ in pts)
                c.values.extend(mhz * MHZ for _, mhz in pts)
                return


def _describe(la: Launch, clock: LaunchClock) -> str:
    waves = sum(len(b.waves) for b in la.blobs)
    issues = sum(b.issues for b in la.blobs)
    traced = ", ".join(f"SE{b.se}" for b in la.blobs if b.itrace) or "none"
    names = "mnemonics from llvm-objdump" if la.insts else (
        "SQTT categories (no code object)" if la.program is None or not la.program.lib else
        "SQTT categories (no PC walk for CDNA)" if la.arch == "cdna" else
        f"SQTT categories (no llvm-objdump that knows {la.target})")
    errors = "".join(f" SE{b.se} stopped early: {b.packets.error}." for b in la.blobs if b.packets.error)
    kernel = "" if la.span is not None else " No kernel slice matched this launch."
    return (f"{la.label} on {la.device} ({la.target or la.arch}): {len(la.blobs)} SEs, instruction-traced: {traced}; "
            f"{waves} waves, {issues} instruction issues.{_resources(la)} Time: {clock.description}. "
            f"Instructions named by {names}.{kernel}{errors}")


def _resources(la: Launch) -> str:
    """The kernel's resources from its code object: ' Kernel: 10 VGPRs, 18 SGPRs, 64 B LDS, 0 B scratch.'"""
    if la.code is None or not la.code.kernels:
        return ""
    a = la.code.kernels[0].as_args()
    parts = [f"{a[k]} {label}" for k, label in (("vgprs", "VGPRs"), ("agprs", "AGPRs"), ("sgprs", "SGPRs"),
                                                ("lds_bytes", "B LDS"), ("scratch_bytes", "B scratch")) if k in a]
    return f" Kernel: {', '.join(parts)}." if parts else ""


def _se(tl: Timeline, group: Track, bt: BlobTrace, bi: int, clock: LaunchClock, arch: str) -> None:
    desc = f"{len(bt.packets)} packets, {len(bt.waves)} waves, instruction-traced: {'yes' if bt.itrace else 'no'}"
    if bt.packets.error:
        desc += f"; decoding stopped early: {bt.packets.error}"
    se = tl.add_track(f"SE{bt.se}", group, "group", Role.SQTT, description=desc)
    if bt.waves and bt.markers and clock.mode != "assumed":
        lo, hi = min(w.start for w in bt.waves), max(w.end or bt.last_time for w in bt.waves)
        pts = clock_points(clock, bi, lo, hi)
        if pts:
            c = tl.add_track(f"SE{bt.se} shader clock", se, "counter", Role.SQTT, unit="MHz")
            for ts, mhz in pts:
                c.ts.append(ts)
                c.values.append(mhz)
    units: dict[tuple, dict[int, dict[int, list[Wave]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for w in bt.waves:
        units[(w.sa, w.wgp)][w.simd][w.slot].append(w)
    for (sa, wgp), simds in sorted(units.items()):
        name = (f"SH{sa} CU{wgp}" if sa else f"CU{wgp}") if arch == "cdna" else f"SA{sa} WGP{wgp}"
        unit = tl.add_track(name, se, "group", Role.SQTT)
        for simd, slots in sorted(simds.items()):
            _simd(tl, unit, simd, slots, bt, bi, clock, arch)


def _simd(tl: Timeline, unit: Track, simd: int, slots: dict[int, list[Wave]], bt: BlobTrace, bi: int,
          clock: LaunchClock, arch: str) -> None:
    st = occ = tl.add_track(f"SIMD{simd}", unit, "counter", Role.SQTT, unit="waves", description="waves in flight")
    spans = []
    for slot, waves in sorted(slots.items()):
        track = tl.add_track(f"slot {slot}", st, "slice", Role.SQTT)
        for w in sorted(waves, key=lambda w: w.start):
            spans.append(_wave(tl, track, w, bt, bi, clock, arch))
    _occupancy(occ, spans)


def _wave(tl: Timeline, track: Track, w: Wave, bt: BlobTrace, bi: int, clock: LaunchClock,
          arch: str) -> tuple[int, int]:
    end_cycle = w.end if w.end is not None else bt.last_time
    a, b = clock.ns(bi, w.start), clock.ns(bi, end_cycle)
    args: dict = {"se": w.se}
    args.update({"sh": w.sa, "cu": w.wgp} if arch == "cdna" else {"sa": w.sa, "wgp": w.wgp, "cu": w.cu})
    args.update(simd=w.simd, slot=w.slot, start_cycle=w.start, end_cycle=end_cycle, traced=w.traced)
    if w.traced:
        args["issues"] = len(w.issues)
    if w.end is None:
        args["ended"] = False
    _slice(tl, track, a, b - a, "wave (traced)" if w.traced else "wave", args)
    if w.issues:
        _issues(tl, track, w, a, b, end_cycle, bi, clock)
    return a, b


def _issues(tl: Timeline, track: Track, w: Wave, a: int, b: int, end_cycle: int, bi: int,
            clock: LaunchClock) -> None:
    """Issue slices inside [a, b]: each from its time to the next issue's (clamped to start before b)."""
    last = b - 1 if b > a else b
    starts = [min(max(clock.ns(bi, i.time), a), last) for i in w.issues]
    cycles = [i.time for i in w.issues] + [end_cycle]
    for k, issue in enumerate(w.issues):
        ts = starts[k]
        en = starts[k + 1] if k + 1 < len(starts) else b
        args: dict = {}
        if issue.pc is not None:
            args["pc"] = f"0x{issue.pc:x}"
        args.update(category=issue.category, cycle=issue.time, cycles=cycles[k + 1] - issue.time)
        _slice(tl, track, ts, max(en - ts, 0), issue.mnemonic or issue.category, args)


def _slice(tl: Timeline, track: Track, ts: int, dur: int, name: str, args: dict) -> None:
    track.args[len(track.ts)] = args
    track.ts.append(ts)
    track.dur.append(dur)
    track.names.append(tl.intern(name))


def _occupancy(track: Track, spans: list[tuple[int, int]]) -> None:
    """Waves in flight: +1 at each start, -1 at each end (ends first at equal times), one sample per time."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    n = 0
    for ts, d in events:
        n += d
        if len(track.ts) and track.ts[-1] == ts:
            track.values[-1] = n
        else:
            track.ts.append(ts)
            track.values.append(n)
