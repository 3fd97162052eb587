"""SQTT packet tables (sqtt-format.md §4, §5, §7, §9): one PacketFormat per packet type and arch, op-name tables.

Every bit position, size and delta field here is transcribed from the fact sheet. A format's id is its index in
FORMATS; a table maps a packet's low byte to the id of its type for one arch ("rdna3", "rdna4", "cdna").
"""
from __future__ import annotations

from dataclasses import dataclass, field

ARCHES = ("rdna3", "rdna4", "cdna")

# special handling in the walk
SP_NONE, SP_MARK3, SP_MARK4, SP_HEADER, SP_CDNA_TS, SP_UNASSIGNED = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class PacketFormat:
    name: str  # tinygrad's name without the _RDNA4 suffix
    arch: str
    match: int  # low-bit pattern
    nbits: int  # its length in bits
    nib: int  # packet size in nibbles
    delta: tuple[int, int] | None = None  # (hi, lo) of the time delta
    fields: dict[str, tuple[int, int]] = field(default_factory=dict)  # name → (hi, lo)
    delta_add: int = 0  # TS_DELTA_SHORT: +4
    delta_mul: int = 1  # CDNA_MISC: ×4
    special: int = SP_NONE

    def get(self, raw: int, name: str) -> int:
        hi, lo = self.fields[name]
        return (raw >> lo) & ((1 << (hi - lo + 1)) - 1)


def _f(**kw: tuple[int, int]) -> dict[str, tuple[int, int]]:
    return kw


_HEADER_FIELDS = _f(layout=(12, 7), simd=(14, 13), group=(17, 15), sel_a=(31, 28), sel_b=(36, 33), flag4=(59, 59))

# Table R3 (RDNA3, layout 3)
_R3 = [
    ("VALUINST", 0b011, 3, 3, (5, 3), _f(flag=(6, 6), wave=(11, 7))),
    ("VMEMEXEC", 0b1111, 4, 2, (5, 4), _f(src=(7, 6))),
    ("ALUEXEC", 0b1110, 4, 2, (5, 4), _f(src=(7, 6))),
    ("IMMEDIATE", 0b1101, 4, 3, (6, 4), _f(wave=(11, 7))),
    ("IMMEDIATE_MASK", 0b00100, 5, 6, (7, 5), _f(mask=(23, 8))),
    ("WAVERDY", 0b10100, 5, 6, (7, 5), _f(mask=(23, 8))),
    ("TS_DELTA_S8_W3", 0b0100001, 7, 18, (10, 8), {}),
    ("WAVEEND", 0b10101, 5, 5, (7, 5), _f(sa=(8, 8), simd=(10, 9), wgp=(13, 11), wave=(19, 15))),
    ("WAVESTART", 0b01100, 5, 8, (6, 5), _f(sa=(7, 7), simd=(9, 8), wgp=(12, 10), wave=(17, 13), id7=(31, 18))),
    ("TS_DELTA_S5_W2", 0b11100, 5, 12, (6, 5), {}),
    ("WAVEALLOC", 0b00101, 5, 5, (7, 5), {}),
    ("TS_DELTA_S5_W3", 0b00110, 5, 13, (7, 5), {}),
    ("PERF", 0b10110, 5, 7, (7, 5), _f(arg=(27, 8))),
    ("UTILCTR", 0b0110001, 7, 12, (8, 7), _f(ctr=(47, 9))),
    ("TS_DELTA_SHORT", 0b1000, 4, 2, (7, 4), {}),
    ("NOP", 0b0000, 4, 1, None, {}),
    ("TS_WAVE_STATE", 0b1010001, 7, 6, (15, 7), _f(coarse=(23, 16))),
    ("EVENT", 0b01100001, 8, 6, (10, 8), _f(event=(23, 11))),
    ("EVENT_BIG", 0b11100001, 8, 8, (10, 8), _f(event=(31, 11))),
    ("REG", 0b1001, 4, 16, (6, 4), _f(slot=(9, 7), hi_byte=(15, 8), subop=(31, 16), val32=(63, 32))),
    ("SNAPSHOT", 0b1110001, 7, 16, (9, 7), _f(snap=(63, 10))),
    ("TS_DELTA_OR_MARK", 0b0000001, 7, 12, (47, 12), _f(pl=(8, 8), rt=(9, 9))),
    ("LAYOUT_HEADER", 0b0010001, 7, 16, None, _HEADER_FIELDS),
    ("INST", 0b010, 3, 5, (6, 4), _f(flag1=(3, 3), flag2=(7, 7), wave=(12, 8), op=(19, 13))),
]

# Table R4 (RDNA4, layout 4): rows that differ from R3
_R4_DIFF = {
    "WAVEEND": (0b10101, 5, 5, (7, 5), _f(sa=(8, 8), simd=(10, 9), wgp=(14, 11), wave=(19, 15))),
    "WAVESTART": (0b01100, 5, 8, (6, 5), _f(sa=(7, 7), simd=(9, 8), wgp=(13, 10), wave=(19, 15), id7=(31, 20))),
    "TS_DELTA_S5_W2": (0b11100, 5, 10, (6, 5), {}),
    "WAVEALLOC": (0b00101, 5, 6, (7, 5), {}),
    "TS_DELTA_S5_W3": (0b00110, 5, 14, (9, 7), {}),
    "PERF": (0b10110, 5, 8, (9, 7), _f(arg=(31, 10))),
    "TS_DELTA_OR_MARK": (0b0000001, 7, 16, (63, 12), _f(rt=(7, 7), pl=(8, 8), tl=(9, 9))),
    "INST": (0b010, 3, 5, (5, 3), _f(w64h=(6, 6), wave=(11, 7), op=(19, 12))),
}

# Table C (CDNA): id = low nibble, no delta fields (time rules in §7)
_C = [
    ("CDNA_MISC", 4, _f(delta=(11, 4), sh=(12, 12), misc_type=(15, 13))),
    ("CDNA_TIMESTAMP", 16, _f(low12=(15, 4), timestamp=(63, 16))),
    ("CDNA_REG", 16, _f(pipe=(6, 5), me=(8, 7), regaddr=(31, 16), regdata=(63, 32))),
    ("CDNA_WAVESTART", 8, _f(sh=(5, 5), cu=(9, 6), wave=(13, 10), simd=(15, 14), pipe=(17, 16), me=(19, 18),
                             count=(28, 22))),
    ("CDNA_WAVEALLOC", 4, _f(sh=(5, 5), cu=(9, 6), wave=(13, 10), simd=(15, 14))),
    ("CDNA_REG_CS", 12, _f(pipe=(6, 5), me=(8, 7), regaddr=(15, 9), regdata=(47, 16))),
    ("CDNA_WAVEEND", 4, _f(sh=(5, 5), cu=(9, 6), wave=(13, 10), simd=(15, 14))),
    ("CDNA_EVENT", 4, {}),
    ("CDNA_EVENT_CS", 4, {}),
    ("CDNA_EVENT_GFX1", 4, {}),
    ("CDNA_INST", 4, _f(wave=(8, 5), simd=(10, 9), op=(15, 11))),
    ("CDNA_INST_PC", 16, _f(wave=(8, 5), simd=(10, 9), err=(15, 15), pc=(63, 16))),
    ("CDNA_USERDATA", 12, _f(sh=(5, 5), cu=(9, 6), wave=(13, 10), simd=(15, 14), data=(47, 16))),
    ("CDNA_ISSUE", 8, _f(simd=(6, 5), **{f"inst{i}": (9 + 2 * i, 8 + 2 * i) for i in range(10)})),
    ("CDNA_PERF", 16, _f(sh=(5, 5), cu=(9, 6), cntr_bank=(11, 10), cntr0=(24, 12), cntr1=(37, 25), cntr2=(50, 38),
                         cntr3=(63, 51))),
    ("CDNA_REG_CS_PRIV", 12, _f(pipe=(6, 5), me=(8, 7), regaddr=(15, 9), regdata=(47, 16))),
]


def _rdna(arch: str) -> list[PacketFormat]:
    out = []
    for name, match, nbits, nib, delta, fields in _R3:
        if arch == "rdna4" and name in _R4_DIFF:
            match, nbits, nib, delta, fields = _R4_DIFF[name]
        special = {"TS_DELTA_OR_MARK": SP_MARK3 if arch == "rdna3" else SP_MARK4, "LAYOUT_HEADER": SP_HEADER}
        out.append(PacketFormat(name, arch, match, nbits, nib, delta, fields, 4 if name == "TS_DELTA_SHORT" else 0,
                                special=special.get(name, SP_NONE)))
    # bytes no pattern claims (low nibble 0x7, or 0x1 with bits 6:4 = 100): a 1-nibble filler, as tinygrad reads them
    out.append(PacketFormat("NOP", arch, 0, 0, 1, special=SP_UNASSIGNED))
    return out


def _cdna() -> list[PacketFormat]:
    out = [PacketFormat(name, "cdna", i, 4, nib, (11, 4) if i == 0 else None, fields,
                        delta_mul=4 if i == 0 else 1, special=SP_CDNA_TS if i == 1 else SP_NONE)
           for i, (name, nib, fields) in enumerate(_C)]
    out.append(PacketFormat("LAYOUT_HEADER", "cdna", 0b0010001, 7, 16, None, _HEADER_FIELDS, special=SP_HEADER))
    return out


FORMATS: list[PacketFormat] = _rdna("rdna3") + _rdna("rdna4") + _cdna()


def _table(arch: str) -> bytes:
    """Low byte → format id: the longest matching pattern wins; unmatched RDNA bytes are the 1-nibble NOP."""
    ids = sorted((i for i, f in enumerate(FORMATS) if f.arch == arch), key=lambda i: -FORMATS[i].nbits)
    out = bytearray()
    for b in range(256):
        out.append(next(i for i in ids if b & ((1 << FORMATS[i].nbits) - 1) == FORMATS[i].match))
    return bytes(out)


TABLES: dict[str, bytes] = {a: _table(a) for a in ARCHES}


def ids(arch: str) -> dict[str, int]:
    """Type name → format id for one arch."""
    return {f.name: i for i, f in enumerate(FORMATS) if f.arch == arch and f.special != SP_UNASSIGNED}


# §9.2–9.4: instruction categories of INST / CDNA_INST
OPS_RDNA3 = {
    0x00: "SALU", 0x01: "SMEM_RD", 0x03: "JUMP", 0x04: "JUMP_NO", 0x05: "CALL", 0x09: "MESSAGE", 0x0b: "VALUT_4",
    0x0d: "VALUB_2", 0x0e: "VALUB_4", 0x0f: "VALUB_16", 0x12: "VINTERP", 0x13: "BARRIER", 0x1c: "FLAT_RD_2",
    0x1d: "FLAT_WR_3", 0x1e: "FLAT_WR_4", 0x1f: "FLAT_WR_5", 0x20: "FLAT_WR_6", 0x21: "SGMEM_RD_1", 0x22: "SGMEM_RD_2",
    0x24: "SGMEM_WR_2", 0x25: "SGMEM_WR_3", 0x26: "SGMEM_WR_4", 0x27: "SGMEM_WR_5", 0x28: "SGMEM_WR_6", 0x29: "LDS_RD",
    0x2a: "LDS_WR_1", 0x2b: "LDS_WR_2", 0x2c: "LDS_WR_3", 0x2d: "LDS_WR_4", 0x2e: "LDS_WR_5", 0x72: "SALU_WR_EXEC",
    0x73: "VALU1_WR_EXEC",
}
OPS_RDNA4 = {
    0x00: "SALU", 0x01: "SMEM", 0x02: "SMEM_WR", 0x03: "JUMP", 0x04: "JUMP_NO", 0x05: "CALL", 0x07: "SALU_NO_EXEC",
    0x09: "MESSAGE", 0x0a: "VALU_1", 0x0b: "VALUT_4", 0x0c: "VALUB_1", 0x0d: "VALUB_2", 0x0e: "VALUB_4",
    0x0f: "VALUB_16", 0x12: "VINTERP", 0x13: "BARRIER_WAIT", 0x1c: "FLAT_RD_2", 0x1d: "FLAT_WR_3", 0x1e: "FLAT_WR_4",
    0x1f: "FLAT_WR_5", 0x20: "FLAT_WR_6", 0x21: "VMEM_RD_1", 0x22: "VMEM_RD_2", 0x23: "VMEM_WR_1", 0x24: "VMEM_WR_2",
    0x25: "VMEM_WR_3", 0x26: "VMEM_WR_4", 0x27: "VMEM_WR_5", 0x28: "VMEM_WR_6", 0x29: "LDS_RD", 0x2a: "LDS_WR_1",
    0x2b: "LDS_WR_2", 0x2c: "LDS_WR_3", 0x2d: "LDS_WR_4", 0x2e: "LDS_WR_5", 0x2f: "BUF_RD_1", 0x30: "BUF_RD_2",
    0x31: "BUF_WR_1", 0x32: "BUF_WR_2", 0x33: "BUF_WR_3", 0x34: "BUF_WR_4", 0x35: "BUF_WR_5", 0x36: "BUF_WR_6",
    0x6e: "LDS_DIR_LOAD", 0x6f: "LDS_PARAM_LOAD", 0x72: "SALU_WR_EXEC", 0x73: "VALU1_WR_EXEC", 0x74: "VALU_WR_EXEC_2",
    0x77: "OTHER_LDS_6", 0x78: "OTHER_LDS_10", 0x7a: "BARRIER_SIGNAL", 0x87: "DYN_VGPR", 0x8a: "BARRIER_JOIN",
    0x8c: "WMMA_8", 0x8d: "WMMA_16", 0x8e: "WMMA_32", 0x8f: "WMMA_64", 0x92: "VALU_DPFP", 0x98: "SALU_FLOAT_3",
    0x99: "VALU_SCL_TRANS", 0x9b: "SALU_2", 0x9c: "SALU_5",
}
OPS_CDNA = {
    0: "SMEM_RD", 1: "SALU_32", 2: "VMEM_RD", 3: "VMEM_WR", 4: "FLAT_WR", 5: "VALU_32", 6: "LDS", 7: "PC",
    12: "JUMP", 13: "NEXT", 14: "FLAT_RD", 15: "OTHER_MSG", 16: "SMEM_WR", 17: "SALU_64", 18: "VALU_64", 28: "VALU_MAI",
}


def _other(ops: dict[int, str], ranges: list[tuple[str, int, int, int]]) -> None:
    for cat, lo, hi, base in ranges:
        for v in range(lo, hi + 1):
            ops[v] = f"OTHER_{cat}_{v - lo + base}"


_other(OPS_RDNA3, [("LDS", 0x50, 0x54, 1), ("FLAT", 0x55, 0x59, 2), ("VMEM", 0x5a, 0x66, 1)])
_other(OPS_RDNA4, [("LDS", 0x50, 0x54, 1), ("FLAT", 0x55, 0x59, 2), ("VMEM", 0xbc, 0xdd, 1)])
OPS = {"rdna3": OPS_RDNA3, "rdna4": OPS_RDNA4, "cdna": OPS_CDNA}


def op_name(arch: str, op: int) -> str:
    """Category name of an INST op; values absent from the tables as `0x%02x` (as VIZ shows them)."""
    return OPS[arch].get(op) or f"0x{op:02x}"


def is_other(arch: str, op: int) -> bool:
    return arch != "cdna" and OPS[arch].get(op, "").startswith("OTHER_")
