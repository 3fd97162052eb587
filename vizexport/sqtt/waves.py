"""Packets of one blob → waves, instruction issues and clock markers (sqtt-format.md §8, §9.1, §9.5).

A wave is a WAVESTART/WAVEEND pair on one hardware slot (SE, SA, WGP, SIMD, slot; CDNA: SE, SH, CU, SIMD, slot).
Instruction packets of the traced unit (RDNA: SA 0, WGP 0, the traced SIMD; CDNA: CU 0, any SIMD) become issues of the
open wave of their slot. The stream is also checked here, and decoding stops (Packets.truncate) at the first packet
that contradicts it: a wave that starts on a slot already running, a wave end without a start, an instruction of a
slot with no running wave. A clean stream never has these (§8, §9.1); a corrupt one soon does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .decode import Packets
from .formats import FORMATS, ids, is_other, op_name

# where an issue came from (the PC walk treats them differently, §10)
SRC_INST, SRC_VALU, SRC_IMM, SRC_IMM_MASK, SRC_CDNA = 0, 1, 2, 3, 4
BARRIERS = ("BARRIER", "BARRIER_SIGNAL")


@dataclass(slots=True)
class Issue:
    time: int  # cycles, the blob's clock
    category: str  # INST op name, "VALU" or "IMMEDIATE"
    source: int  # SRC_*
    pc: int | None = None  # ELF address, when the PC walk applies
    mnemonic: str | None = None


@dataclass(slots=True)
class Wave:
    se: int
    sa: int  # shader array (CDNA: sh)
    wgp: int  # WGP within the SA (CDNA: CU within the SH)
    cu: int  # tinygrad's flat id: RDNA3 wgp + 8·sa, RDNA4 wgp + 16·sa, CDNA cu
    simd: int
    slot: int
    start: int  # cycles
    end: int | None = None  # None: no end in the stream (cut short)
    traced: bool = False  # on the instruction-traced unit of an itrace blob
    issues: list[Issue] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)  # WAVERDY times of a wave on the traced unit (RDNA)


@dataclass
class BlobTrace:
    """What one SQTT blob says: its packets, its waves (stream order of their starts), its clock markers."""

    se: int
    itrace: bool
    packets: Packets
    waves: list[Wave] = field(default_factory=list)
    markers: list[tuple[int, int]] = field(default_factory=list)  # (cycle, reference-clock ticks)
    other_inst: int = 0  # INST packets with an OTHER_* op (§9.1: not issues of the traced wave)
    unit_waveends: int = 0  # WAVEENDs of the traced unit's SIMD 0 (tinygrad's map_insts reports them as s_endpgm)
    waverdy: int = 0  # WAVERDY events that close a barrier in VIZ (§9.5)

    @property
    def arch(self) -> str:
        return self.packets.arch

    @property
    def issues(self) -> int:
        return sum(len(w.issues) for w in self.waves)

    @property
    def last_time(self) -> int:
        return self.packets.times[-1] if len(self.packets) else 0


class _Refused(Exception):
    pass


def analyze(p: Packets, se: int = 0, itrace: bool = True) -> BlobTrace:
    """Waves and issues of one decoded blob. Truncates `p` (with its error) at the first contradicting packet."""
    bt = BlobTrace(se, bool(itrace), p)
    if p.arch:
        (_Cdna if p.arch == "cdna" else _Rdna)(bt).run()
    bt.markers = [(p.times[i], v) for i, v in p.markers]
    return bt


class _Walker:
    def __init__(self, bt: BlobTrace) -> None:
        self.bt, self.p, self.arch = bt, bt.packets, bt.packets.arch
        self.open: dict[tuple, Wave] = {}
        self.ids = ids(self.arch)
        self.last_event: dict[int, str] = {}  # VIZ row (traced slot) → its latest event name

    def run(self) -> None:
        handlers = self.handlers()
        kind = [handlers.get(i) for i in range(len(FORMATS))]
        p, times = self.p, self.p.times
        try:
            for i, tid in enumerate(p.types):
                h = kind[tid]
                if h is not None:
                    h(p.raw(i), times[i])
        except _Refused as e:
            p.truncate(i, f"{e} at nibble {p.offsets[i]}")
        self.finish()

    def handlers(self) -> dict:
        raise NotImplementedError

    def finish(self) -> None:
        pass

    def start(self, key: tuple, wave: Wave) -> None:
        if key in self.open:
            raise _Refused(f"wave slot {key} started while running")
        self.open[key] = wave
        self.bt.waves.append(wave)

    def end(self, key: tuple, t: int) -> Wave:
        wave = self.open.pop(key, None)
        if wave is None:
            raise _Refused(f"end of wave slot {key} that is not running")
        wave.end = t
        return wave

    def issue(self, key: tuple, t: int, category: str, source: int) -> None:
        wave = self.open.get(key)
        if wave is None:
            raise _Refused(f"instruction {category} of wave slot {key} that is not running")
        wave.issues.append(Issue(t, category, source))

    def viz_event(self, slot: int, name: str) -> None:
        self.last_event[slot] = name


class _Rdna(_Walker):
    """RDNA3/RDNA4. Slot key: (sa, wgp, simd, wave). Traced unit: sa 0, wgp 0, simd `self.simd` (0 by default)."""

    def __init__(self, bt: BlobTrace) -> None:
        super().__init__(bt)
        f = FORMATS
        self.ws, self.we = f[self.ids["WAVESTART"]], f[self.ids["WAVEEND"]]
        self.inst = f[self.ids["INST"]]
        self.cu_mul = 8 if self.arch == "rdna3" else 16
        self.simd: int | None = None  # the traced SIMD, learnt from the first instruction packet

    def handlers(self) -> dict:
        i = self.ids
        return {i["WAVESTART"]: self.on_start, i["WAVEEND"]: self.on_end, i["INST"]: self.on_inst,
                i["VALUINST"]: self.on_valu, i["IMMEDIATE"]: self.on_imm, i["IMMEDIATE_MASK"]: self.on_imm_mask,
                i["WAVERDY"]: self.on_waverdy}

    def _slot(self, fmt, w: int) -> tuple[int, int, int, int]:
        return fmt.get(w, "sa"), fmt.get(w, "wgp"), fmt.get(w, "simd"), fmt.get(w, "wave")

    def on_start(self, w: int, t: int) -> None:
        sa, wgp, simd, slot = key = self._slot(self.ws, w)
        self.start(key, Wave(self.bt.se, sa, wgp, wgp + self.cu_mul * sa, simd, slot, t))

    def on_end(self, w: int, t: int) -> None:
        key = self._slot(self.we, w)
        self.end(key, t)
        if key[:3] == (0, 0, 0):
            self.bt.unit_waveends += 1
            self.viz_event(key[3], "WAVEEND")

    def traced_key(self, slot: int) -> tuple[int, int, int, int]:
        if self.simd is None:  # SQTT_SIMD_SEL: the SIMD whose wave in this slot is running (0 if several)
            self.simd = next((s for s in (0, 1, 2, 3) if (0, 0, s, slot) in self.open), 0)
        return 0, 0, self.simd, slot

    def on_inst(self, w: int, t: int) -> None:
        op, slot = self.inst.get(w, "op"), self.inst.get(w, "wave")
        name = op_name(self.arch, op)
        self.viz_event(slot, name)
        if is_other(self.arch, op):
            self.bt.other_inst += 1
        else:
            self.issue(self.traced_key(slot), t, name, SRC_INST)

    def on_valu(self, w: int, t: int) -> None:
        slot = (w >> 7) & 0x1F
        self.viz_event(slot, "VALUINST")
        self.issue(self.traced_key(slot), t, "VALU", SRC_VALU)

    def on_imm(self, w: int, t: int) -> None:
        slot = (w >> 7) & 0x1F
        self.viz_event(slot, "IMMEDIATE")
        self.issue(self.traced_key(slot), t, "IMMEDIATE", SRC_IMM)

    def on_imm_mask(self, w: int, t: int) -> None:
        mask = (w >> 8) & 0xFFFF
        for slot in range(16):
            if mask >> slot & 1:
                self.viz_event(slot, "IMMEDIATE")
                self.issue(self.traced_key(slot), t, "IMMEDIATE", SRC_IMM_MASK)

    def on_waverdy(self, w: int, t: int) -> None:
        mask = (w >> 8) & 0xFFFF
        for slot in range(16):
            if not mask >> slot & 1:
                continue
            if self.last_event.get(slot) in BARRIERS:
                self.bt.waverdy += 1
                self.viz_event(slot, "WAVERDY")
            wave = self.unit_wave(slot)
            if wave is not None:
                wave.ready.append(t)

    def unit_wave(self, slot: int) -> Wave | None:
        """The running wave of this slot on the traced unit (before the first instruction names the SIMD: any)."""
        simds = (self.simd,) if self.simd is not None else (0, 1, 2, 3)
        return next((w for s in simds if (w := self.open.get((0, 0, s, slot))) is not None), None)

    def finish(self) -> None:
        simd = self.simd or 0
        if self.bt.itrace:
            for wave in self.bt.waves:
                wave.traced = wave.sa == 0 and wave.wgp == 0 and wave.simd == simd


class _Cdna(_Walker):
    """CDNA (gfx9). Slot key: (sh, cu, simd, wave). Traced unit: CU 0 of SH 0, all four SIMDs."""

    def __init__(self, bt: BlobTrace) -> None:
        super().__init__(bt)
        self.ws = FORMATS[self.ids["CDNA_WAVESTART"]]

    def handlers(self) -> dict:
        i = self.ids
        return {i["CDNA_WAVESTART"]: self.on_start, i["CDNA_WAVEEND"]: self.on_end, i["CDNA_INST"]: self.on_inst}

    def on_start(self, w: int, t: int) -> None:
        sh, cu, simd, slot = key = self._slot(w)
        self.start(key, Wave(self.bt.se, sh, cu, cu, simd, slot, t))

    @staticmethod
    def _slot(w: int) -> tuple[int, int, int, int]:  # CDNA_WAVESTART/WAVEEND share the low 16 bits
        return (w >> 5) & 1, (w >> 6) & 0xF, (w >> 14) & 3, (w >> 10) & 0xF

    def on_end(self, w: int, t: int) -> None:
        key = self._slot(w)
        self.end(key, t)
        if key[:3] == (0, 0, 0):
            self.bt.unit_waveends += 1

    def on_inst(self, w: int, t: int) -> None:
        slot, simd, op = (w >> 5) & 0xF, (w >> 9) & 3, (w >> 11) & 0x1F
        self.issue((0, 0, simd, slot), t, op_name("cdna", op), SRC_CDNA)

    def finish(self) -> None:
        if self.bt.itrace:
            for wave in self.bt.waves:
                wave.traced = wave.sa == 0 and wave.wgp == 0
