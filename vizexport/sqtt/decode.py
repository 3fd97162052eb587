"""SQTT packet stream → packet columns (sqtt-format.md §2, §3, §6, §7).

`decode(blob)` walks the nibble stream once and keeps, per packet, its format id (formats.FORMATS), its timestamp
and its raw 64-bit window (the packet's first 16 nibbles: every field of every type lies inside it), so any field can
be read later without decoding again. The walk is the hot path: it reads each window with one `unpack_from`, from
the blob for even nibble offsets and from a copy shifted by one nibble for odd ones.

Bad input: decoding stops at the first packet it cannot accept and says why in `Packets.error`; everything before
that packet is kept. What the walk refuses (a clean stream never has these): a blob that does not start with a layout
header, a layout header in mid-stream that would switch to other tables, and (strict, the default) a byte pattern no
packet type claims (sqtt-format.md §4 "unassigned"; tinygrad reads it as a 1-nibble filler).
"""
from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from .formats import FORMATS, SP_CDNA_TS, SP_HEADER, SP_MARK3, SP_MARK4, SP_UNASSIGNED, TABLES

_U64 = struct.Struct("<Q").unpack_from
_SIZE = [f.nib for f in FORMATS]
_SPECIAL = [f.special for f in FORMATS]
_DSHIFT = [0] * len(FORMATS)
_DMASK = [0] * len(FORMATS)
_DADD = [f.delta_add for f in FORMATS]
for _i, _f in enumerate(FORMATS):
    if _f.delta is not None:  # a ×4 multiplier is folded into shift and mask: (w >> (lo - 2)) & (mask << 2)
        _hi, _lo = _f.delta
        _sh = _f.delta_mul.bit_length() - 1
        _DSHIFT[_i], _DMASK[_i] = _lo - _sh, ((1 << (_hi - _lo + 1)) - 1) << _sh
HEADER_ID = {a: next(i for i, f in enumerate(FORMATS) if f.arch == a and f.special == SP_HEADER) for a in TABLES}


@dataclass
class Packets:
    """Decoded packets of one blob, as columns. `arch` is the table set in force at the end."""

    types: array = field(default_factory=lambda: array("H"))  # format ids
    times: array = field(default_factory=lambda: array("q"))  # clock after the packet's delta (§6, §7)
    raws: array = field(default_factory=lambda: array("Q"))  # the packet's first 64 bits
    arch: str = ""
    layout: int | None = None  # layout field of the first header
    error: str | None = None  # why decoding stopped early, None for a clean end
    stop_nibble: int = 0  # nibble offset where decoding ended

    def __len__(self) -> int:
        return len(self.types)

    def truncate(self, n: int, reason: str) -> None:
        """Keep the first n packets; the packet at n is the first one refused."""
        if n < len(self.types):
            del self.types[n:], self.times[n:], self.raws[n:]
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
    out = Packets()
    if n < 8:
        out.error = f"blob of {n} bytes holds no packet" if n else None
        return out
    odd = (int.from_bytes(data, "little") >> 4).to_bytes(n, "little")
    w = _U64(data, 0)[0]
    if TABLES["rdna3"][w & 0xFF] != HEADER_ID["rdna3"]:
        out.error = f"no layout header at the start (first byte 0x{data[0]:02x})"
        return out
    out.layout = FORMATS[HEADER_ID["rdna3"]].get(w, "layout")
    out.arch = arch_of_layout(out.layout)
    out.types.append(HEADER_ID["rdna3"])
    out.times.append(0)
    out.raws.append(w)
    _walk(data, odd, out, strict)
    return out


def _walk(data: bytes, odd: bytes, out: Packets, strict: bool) -> None:
    """Packets after the first header, until the end rule (§2: a packet needs its 16-nibble window) or an error."""
    size, special, dshift, dmask, dadd = _SIZE, _SPECIAL, _DSHIFT, _DMASK, _DADD
    table, arch = TABLES[out.arch], out.arch
    tput, timeput, rawput = out.types.append, out.times.append, out.raws.append
    k, kmax, time, ts_offset = 16, 2 * len(data) - 16, 0, None
    while k <= kmax:
        w = _U64(odd if k & 1 else data, k >> 1)[0]
        tid = table[w & 0xFF]
        sp = special[tid]
        if not sp:
            time += ((w >> dshift[tid]) & dmask[tid]) + dadd[tid]
        elif sp == SP_MARK3 or sp == SP_MARK4:
            if not ((w >> (9 if sp == SP_MARK3 else 7)) & 1 and not (w >> 8) & 1):  # not a marker: a plain delta
                time += (w >> dshift[tid]) & dmask[tid]
        elif sp == SP_CDNA_TS:
            if not (w >> 4) & 0xFFF:  # an absolute sample re-anchors the clock (§7)
                if ts_offset is None:
                    ts_offset = (w >> 16) - time
                else:
                    time = (((w >> 16) - ts_offset) & ~3) - 4
        elif sp == SP_HEADER:
            layout = FORMATS[tid].get(w, "layout")
            if arch_of_layout(layout) != arch and layout != 3:
                out.error = f"layout header in mid-stream (layout {layout}) at nibble {k}"
                break
        elif sp == SP_UNASSIGNED and strict:
            out.error = f"unassigned packet pattern 0x{w & 0xFF:02x} at nibble {k}"
            break
        tput(tid)
        timeput(time)
        rawput(w)
        k += size[tid]
    out.stop_nibble = k


def packet_names(p: Packets) -> list[str]:
    return [FORMATS[t].name for t in p.types]


def iter_packets(p: Packets) -> Iterator[Packet]:
    """Every packet with its named fields (for inspection and tests; slow next to the columns)."""
    for tid, t, w in zip(p.types, p.times, p.raws, strict=True):
        f = FORMATS[tid]
        yield Packet(f.name, t, {name: f.get(w, name) for name in f.fields})
