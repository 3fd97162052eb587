"""NVIDIA PMA stall samples (tinygrad's ProfilePMAEvent, VIZ=±2 on NV): decoded without tinygrad, drawn as a timeline.

The blob is a run of 32-byte packets. Bytes 4-7 of a packet are its header (little-endian u32): bits 4:0 how many
sample bytes it carries, bits 15:8 and 27:25 the TPC it comes from (low and high bits), bit 28 "dropped" (that TPC's
partial record is lost). The sample bytes sit at bytes 0-3 then 8-31, in that order, and continue a per-TPC byte
stream cut into records: 8 bytes before sm_version 0xa04 (Ampere/Ada/Hopper: PC >> 4 in bits 44:0, stall key 49:45,
warp 55:50, active 62), 9 bytes from it (Blackwell: stall key 5:0, PC >> 4 in 60:8, warp high bits 7:6 and low bits
71:68, active 67). A TPC id is GPC << 5 | TPC << 1 | SM. Stall keys map to CUPTI's stall reasons per generation.
This is the layout tinygrad's own decoder reads (extra/nv_pma, not in its wheel); tinygrad's viewer draws one
32-cycle box per sample, in order, on a row per GPC/TPC/SM/warp, named by stall reason.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .devices import HOST, device_root
from .records import Capture, Profile, Span
from .timeline import Role, Timeline, Track

PACKET = 32
HEADER = slice(4, 8)
SAMPLE_BYTES = (0, 1, 2, 3, *range(8, 32))  # where a packet's sample bytes are, in stream order
BLACKWELL = 0xa04  # first sm_version with 9-byte records
DEFAULT_SM = 0x800  # tinygrad's default when the device gives none
CYCLES_PER_SAMPLE = 32  # as tinygrad's viewer draws them
REASONS = ("INVALID", "NONE", "INST_FETCH", "EXEC_DEPENDENCY", "MEMORY_DEPENDENCY", "TEXTURE", "SYNC",
           "CONSTANT_MEMORY", "PIPE_BUSY", "MEMORY_THROTTLE", "NOT_SELECTED", "OTHER", "SLEEPING")
_AMPERE = {1: "MEMORY_THROTTLE", 15: "MEMORY_THROTTLE", 2: "CONSTANT_MEMORY", 3: "SYNC", 6: "INST_FETCH",
           11: "INST_FETCH", 7: "EXEC_DEPENDENCY", 10: "EXEC_DEPENDENCY", 9: "MEMORY_DEPENDENCY", 12: "PIPE_BUSY",
           17: "OTHER", 20: "OTHER", 18: "NONE"}
_BLACKWELL = {0x01: "MEMORY_THROTTLE", 0x0e: "MEMORY_THROTTLE", 0x02: "SYNC", 0x05: "INST_FETCH", 0x0a: "INST_FETCH",
              0x06: "EXEC_DEPENDENCY", 0x09: "EXEC_DEPENDENCY", 0x08: "MEMORY_DEPENDENCY", 0x0b: "PIPE_BUSY",
              0x0f: "PIPE_BUSY", 0x10: "OTHER", 0x13: "OTHER", 0x11: "NONE"}


def _bits(v: int, hi: int, lo: int) -> int:
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


@dataclass(frozen=True)
class PMASample:
    tpc_id: int
    pc: int  # offset in the program (bytes)
    stall_key: int
    reason: str
    warp: int
    active: bool

    @property
    def row(self) -> str:
        """tinygrad's row name: GPC:g TPC:t SM:s WAVE:w."""
        t = self.tpc_id
        return f"GPC:{t >> 5} TPC:{(t >> 1) & 0xF} SM:{t & 1} WAVE:{self.warp}"


def _record(raw: bytes, tpc: int, blackwell: bool) -> PMASample:
    v = int.from_bytes(raw, "little")
    if blackwell:
        key, pc, active = _bits(v, 5, 0), _bits(v, 60, 8), _bits(v, 67, 67)
        warp = _bits(v, 7, 6) << 4 | _bits(v, 71, 68)
        return PMASample(tpc, pc << 4, key, _BLACKWELL.get(key, "OTHER"), warp, bool(active))
    key, pc, warp, active = _bits(v, 49, 45), _bits(v, 44, 0), _bits(v, 55, 50), _bits(v, 62, 62)
    return PMASample(tpc, pc << 4, key, _AMPERE.get(key, "OTHER"), warp, bool(active))


def decode(blob: bytes, sm_version: int = DEFAULT_SM) -> list[PMASample]:
    """Every complete sample record of a PMA blob, in stream order (a trailing partial packet is ignored)."""
    blackwell = sm_version >= BLACKWELL
    size = 9 if blackwell else 8
    pending: dict[int, bytearray] = defaultdict(bytearray)
    out = []
    for at in range(0, len(blob) - PACKET + 1, PACKET):
        pkt = blob[at:at + PACKET]
        h = int.from_bytes(pkt[HEADER], "little")
        tpc = _bits(h, 15, 8) | _bits(h, 27, 25) << 8
        buf = pending[tpc]
        if _bits(h, 28, 28):
            buf.clear()
        buf += bytes(pkt[i] for i in SAMPLE_BYTES[:_bits(h, 4, 0)])
        while len(buf) >= size:
            out.append(_record(bytes(buf[:size]), tpc, blackwell))
            del buf[:size]
    return out


def add_pma_tracks(tl: Timeline, parent: Track, prof: Profile) -> list[Track]:
    """A group `PMA <kernel> n<run>` per PMA capture of the devices under `parent`, with a slice track per
    tinygrad row and a slice per sample named by its stall reason (args pc, active, stall key)."""
    sm = {d.device: int(d.props.get("sm_version", DEFAULT_SM)) for d in prof.devices
          if d.props and isinstance(d.props.get("sm_version", DEFAULT_SM), int)}
    kernels = _kernel_spans(prof)
    runs: dict[tuple, int] = defaultdict(int)
    out = []
    for c in (c for c in prof.captures if c.kind == "pma" and device_root(c.device) == parent.name):
        key = (c.device, c.profile_key if c.profile_key is not None else c.kern)
        runs[key] += 1
        spans = kernels.get(key, [])
        span = spans[runs[key] - 1] if runs[key] <= len(spans) else None
        out.append(_capture(tl, parent, c, runs[key], span, sm.get(c.device, DEFAULT_SM)))
    return out


def _kernel_spans(prof: Profile) -> dict[tuple, list[Span]]:
    """A device's kernel slices per program key (0.14+) and per name (0.13), in time order."""
    out: dict[tuple, list[Span]] = defaultdict(list)
    for s in sorted(prof.spans.rows(prof.spans.where_device(lambda d: d not in HOST)), key=lambda s: s.st):
        out[(s.device, s.key.name)].append(s)
        if s.profile_key is not None:
            out[(s.device, s.profile_key)].append(s)
    return out


def _capture(tl: Timeline, parent: Track, c: Capture, run: int, span: Span | None, sm_version: int) -> Track:
    samples = decode(c.blob, sm_version)
    name = span.key.name if span is not None else str(c.kern)
    start = span.st if span is not None else 0
    where = "the kernel slice's start" if span is not None else "0 (no kernel slice matched this capture)"
    desc = (f"{len(samples)} PMA stall samples of {name} run {run} on {c.device} (sm_version {sm_version:#x}); "
            f"each drawn as {CYCLES_PER_SAMPLE} cycles after its row's previous one, as tinygrad's viewer does, "
            f"1 cycle = 1 ns from {where}: the samples carry no time")
    group = tl.add_track(f"PMA {name} n{run}", parent, "group", Role.PMA, description=desc)
    rows: dict[str, Track] = {}
    n: dict[int, int] = defaultdict(int)
    for s in samples:
        track = rows.get(s.row)
        if track is None:
            track = rows[s.row] = tl.add_track(s.row, group, "slice", Role.PMA)
        k = n[s.tpc_id]  # tinygrad counts a TPC's samples, whatever their warp
        n[s.tpc_id] += 1
        track.args[len(track)] = {"pc": f"0x{s.pc:06x}", "active": s.active, "stall key": s.stall_key}
        track.ts.append(start + k * CYCLES_PER_SAMPLE)
        track.dur.append(CYCLES_PER_SAMPLE)
        track.names.append(tl.intern(s.reason))
    return group
