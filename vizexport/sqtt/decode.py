"""SQTT packet stream → packet columns (sqtt-format.md §2, §3, §6, §7).

`decode(blob)` keeps, per packet, its format id (formats.FORMATS), its timestamp and its nibble offset;
`Packets.raw(i)` reads any packet's 64-bit window (its first 16 nibbles, which hold every field of every type) when a
field is needed. Clock markers are collected on the way.

Speed: decoding is the hot path. Every packet's type, size and time delta depend only on its first 16 bits (special
packets aside), so per arch a 65,536-entry table maps those bits to (format id, size, delta, special), and the blob is
laid out once (four strided C copies) as one 16-bit word per nibble offset. A packet then costs one index into that
layout, one table look-up and three list appends; only the rare special packets (markers, CDNA timestamps, headers,
unassigned patterns) read their whole window.

Bad input: decoding stops at the first packet it cannot accept and says why in `Packets.error`; everything before
that packet is kept. What the decoder refuses (a clean stream never has these): a blob that does not start with a
layout header, a layout header in mid-stream that would switch to other tables, and (strict, the default) a byte
pattern no packet type claims (sqtt-format.md §4 "unassigned"; tinygrad reads it as a 1-nibble filler).
"""
from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from .formats import FORMATS, SP_CDNA_TS, SP_HEADER, SP_MARK3, SP_MARK4, SP_NONE, SP_UNASSIGNED, TABLES

_U64 = struct.Struct("<Q").unpack_from
HEADER_ID = {a: next(i for i, f in enumerate(FORMATS) if f.arch == a and f.special == SP_HEADER) for a in TABLES}
_MARK_RT_BIT = {SP_MARK3: 9, SP_MARK4: 7}
_INFO: dict[str, list[tuple[int, int, int, int]]] = {}


def _delta(tid: int, x: int) -> int:
    """The time delta of a non-special packet of format tid whose low 16 bits are x (§6, §7)."""
    f = FORMATS[tid]
    if f.delta is None or f.special != SP_NONE:
        return 0
    hi, lo = f.delta
    return ((x >> lo) & ((1 << (hi - lo + 1)) - 1)) * f.delta_mul + f.delta_add


# special codes of the look-up table: what the walk does beyond adding the delta
WIDE36, WIDE52, MARKER36, MARKER52, CDNA_SAMPLE, HEADER, UNASSIGNED = 1, 2, 3, 4, 5, 6, 7


def _special_code(f, x: int) -> int:
    """The look-up table's special code of a packet of format f whose low 16 bits are x."""
    if f.special in (SP_MARK3, SP_MARK4):  # marker or plain delta: the rt and pl bits lie in the low 16 bits
        marker = (x >> _MARK_RT_BIT[f.special]) & 1 and not (x >> 8) & 1
        return (MARKER36 if marker else WIDE36) if f.special == SP_MARK3 else (MARKER52 if marker else WIDE52)
    if f.special == SP_CDNA_TS:  # only an absolute sample (low12 == 0) acts on the clock
        return 0 if (x >> 4) & 0xFFF else CDNA_SAMPLE
    return {SP_HEADER: HEADER, SP_UNASSIGNED: UNASSIGNED}.get(f.special, 0)


def info_table(arch: str) -> list[tuple[int, int, int, int]]:
    """A packet's low 16 bits → (format id, size in nibbles, time delta, special code), for one arch (built once)."""
    out = _INFO.get(arch)
    if out is None:
        out, cache = [(0, 0, 0, 0)] * 65536, {}
        for b in range(256):
            tid = TABLES[arch][b]
            f = FORMATS[tid]
            narrow = f.special in (SP_NONE, SP_HEADER, SP_UNASSIGNED) and (f.delta is None or f.delta[0] < 8)
            for h in range(1) if narrow else range(256):
                x = h << 8 | b
                key = (tid, f.nib, _delta(tid, x), _special_code(f, x))
                e = cache.setdefault(key, key)
                if narrow:
                    out[b::256] = [e] * 256
                else:
                    out[x] = e
        _INFO[arch] = out
    return out


def _words(data: bytes, odd: bytes) -> memoryview:
    """One little-endian 16-bit word per nibble offset k: the stream's bits 4k … 4k+15."""
    n = len(data)
    buf = bytearray(4 * n)
    buf[0::4], buf[1::4] = data, data[1:] + b"\0"
    buf[2::4], buf[3::4] = odd, odd[1:] + b"\0"
    if sys.byteorder == "big":
        swapped = array("H", bytes(buf))
        swapped.byteswap()
        return memoryview(swapped)
    return memoryview(buf).cast("H")


@dataclass
class Packets:
    """Decoded packets of one blob, as columns. `arch` is the table set in force after the first header."""

    data: bytes = b""
    odd: bytes = b""  # the blob shifted by one nibble: windows at odd nibble offsets
    types: bytes = b""  # format ids, one byte per packet
    times: list[int] = field(default_factory=list)  # clock after the packet's delta (§6, §7)
    offsets: list[int] = field(default_factory=list)  # nibble offset of each packet
    markers: list[tuple[int, int]] = field(default_factory=list)  # (packet index, reference-clock value)
    arch: str = ""
    layout: int | None = None  # layout field of the first header
    error: str | None = None  # why decoding stopped early, None for a clean end
    stop_nibble: int = 0  # nibble offset where decoding ended

    def __len__(self) -> int:
        return len(self.types)

    def raw(self, i: int) -> int:
        """The 64-bit window of packet i."""
        k = self.offsets[i]
        return _U64(self.odd if k & 1 else self.data, k >> 1)[0]

    def truncate(self, n: int, reason: str) -> None:
        """Keep the first n packets: the packet at n is the first one refused."""
        if n < len(self.types):
            self.stop_nibble = self.offsets[n]
            self.types, self.times, self.offsets = self.types[:n], self.times[:n], self.offsets[:n]
            self.markers = [m for m in self.markers if m[0] < n]
        self.error = reason


class Packet(NamedTuple):
    name: str
    time: int
    fields: dict[str, int]


def arch_of_layout(layout: int) -> str:
    """§3: layout 4 → RDNA4, 3 → RDNA3, anything else → CDNA (the gfx9 synthetic header has layout 0)."""
    return "rdna4" if layout == 4 else "rdna3" if layout == 3 else "cdna"


def decode(blob: bytes, strict: bool = True) -> Packets:
    """Decode one SQTT blob. Never raises on bad content; see `Packets.error`."""
    data = bytes(blob)
    n = len(data)
    out = Packets(data)
    if n < 8:
        out.error = f"blob of {n} bytes holds no packet" if n else None
        return out
    w = _U64(data, 0)[0]
    if TABLES["rdna3"][w & 0xFF] != HEADER_ID["rdna3"]:
        out.error = f"no layout header at the start (first byte 0x{data[0]:02x})"
        return out
    out.odd = (int.from_bytes(data, "little") >> 4).to_bytes(n, "little")
    out.layout = (w >> 7) & 0x3F
    out.arch = arch_of_layout(out.layout)
    _decode_rest(out, strict)
    return out


def _decode_rest(out: Packets, strict: bool) -> None:
    """Packets after the first header, until the end rule (§2: a packet needs its 16-nibble window) or an error."""
    data, odd = out.data, out.odd
    words, info = _words(data, odd), info_table(out.arch)
    types, times, offsets, state = [HEADER_ID[out.arch]], [0], [0], []
    tput, timeput, kput = types.append, times.append, offsets.append
    k, kmax, time = 16, 2 * len(data) - 16, 0
    while k <= kmax:
        tid, size, delta, special = info[words[k]]
        if special:
            if special <= WIDE52:  # a plain delta of 36 / 52 bits
                delta = _U64(odd if k & 1 else data, k >> 1)[0] >> 12
                if special == WIDE36:
                    delta &= 0xF_FFFF_FFFF
            else:
                delta = _special(out, special, k, len(types), time, state, strict)
                if delta is None:
                    break
        time += delta
        tput(tid)
        timeput(time)
        kput(k)
        k += size
    out.stop_nibble = k
    out.types, out.times, out.offsets = bytes(types), times, offsets


def _special(out: Packets, special: int, k: int, i: int, time: int, state: list, strict: bool) -> int | None:
    """A rarer packet that needs its whole window: its time delta, or None to stop decoding at it."""
    w = _U64(out.odd if k & 1 else out.data, k >> 1)[0]
    if special in (MARKER36, MARKER52):  # a clock sample, no delta
        out.markers.append((i, (w >> 12) & 0xF_FFFF_FFFF if special == MARKER36 else w >> 12))
        return 0
    if special == CDNA_SAMPLE:  # state[0]: the CDNA clock's offset, set by the first absolute sample (§7)
        if not state:
            state.append((w >> 16) - time)
            return 0
        return ((((w >> 16) - state[0]) & ~3) - 4) - time  # later ones re-anchor the clock
    if special == HEADER:
        layout = (w >> 7) & 0x3F
        if arch_of_layout(layout) != out.arch and layout != 3:
            out.error = f"layout header in mid-stream (layout {layout}) at nibble {k}"
            return None
        return 0
    if strict:  # UNASSIGNED: a pattern no packet type claims
        out.error = f"unassigned packet pattern 0x{w & 0xFF:02x} at nibble {k}"
        return None
    return 0


def packet_names(p: Packets) -> list[str]:
    return [FORMATS[t].name for t in p.types]


def iter_packets(p: Packets) -> Iterator[Packet]:
    """Every packet with its named fields (for inspection and tests; slow next to the columns)."""
    for i, (tid, t) in enumerate(zip(p.types, p.times, strict=True)):
        f, w = FORMATS[tid], p.raw(i)
        yield Packet(f.name, t, {name: f.get(w, name) for name in f.fields})
