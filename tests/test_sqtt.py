"""AMD SQTT/PMC: the decoder against the acceptance figures of sqtt-format.md §13, hand-made streams for the rules the
examples do not exercise, bad input, code objects, PMC against tinygrad's own viewer, and the Timeline tracks (also in
the real Perfetto trace processor).

tests/data/sqtt_expected.json comes from tools/sqtt_expected.py (the sheet's §13 and tinygrad 0.14.0's unpack_pmc).
"""
from __future__ import annotations

import json
import random
import time
import warnings
from functools import cache
from pathlib import Path

import pytest

import vizexport
from vizexport.info import pmc_text as as_text
from vizexport.perfetto import write_trace
from vizexport.records import Capture, Profile
from vizexport.sqtt import (
    SQTTWarning,
    add_sqtt_tracks,
    analyze,
    decode,
    find_launches,
    iter_packets,
    load_launches,
    packet_names,
    read_code_object,
    target_name,
)
from vizexport.sqtt import code as codemod
from vizexport.sqtt.code import arch_of_target, disassemble, unpackb
from vizexport.sqtt.formats import FORMATS, OPS_RDNA3, TABLES, ids, op_name
from vizexport.sqtt.launches import Launch, decode_blob
from vizexport.sqtt.pmc import decode_pmc, launch_counters, span_args
from vizexport.timeline import Role, Timeline
from vizexport.tinygrad.timeline import build_timeline

from .conftest import FIXTURES, ROOT, objdump_missing, tpq

SQTT = FIXTURES / "sqtt"
EXPECTED = json.loads((ROOT / "tests" / "data" / "sqtt_expected.json").read_text())
KEYS = sorted(EXPECTED)


def fixture(key: str) -> pytest.param:
    path = SQTT / f"{key}.pkl"
    return pytest.param(key, id=key, marks=[] if path.exists() else [pytest.mark.skip(reason=f"{path} not present")])


ALL = [fixture(k) for k in KEYS]
RDNA = [fixture(k) for k in KEYS if not k.startswith("gfx950")]


@cache
def profile(key: str) -> Profile:
    return vizexport.load_profile(SQTT / f"{key}.pkl")


@cache
def launches(key: str) -> list[Launch]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # clean fixtures decode without a single warning
        return load_launches(profile(key))


def blobs(key: str) -> list:
    return [b for la in launches(key) for b in la.blobs]


# --- §13: the acceptance figures ------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ALL)
def test_figures(key: str):
    exp, bts = EXPECTED[key], blobs(key)
    waves = [w for b in bts for w in b.waves]
    cdna = bts[0].arch == "cdna"
    issues = sum(b.issues for b in bts)
    unit_ends = sum(b.unit_waveends for b in bts)
    simd0 = sum(len(w.issues) for w in waves if w.simd == 0) if cdna else issues
    got = {
        "blobs": len(bts), "itrace": sum(b.itrace for b in bts), "packets": sum(len(b.packets) for b in bts),
        "packets_per_blob": [len(b.packets) for b in bts], "waves": len(waves),
        "traced_waves": sum(w.traced for w in waves), "issues": issues, "other_inst": sum(b.other_inst for b in bts),
        "viz_events": simd0 + sum(b.other_inst + b.waverdy for b in bts) + unit_ends,
        "map_insts": 0 if cdna else issues + unit_ends,
        "marker_pairs": sum(max(len(b.markers) - 1, 0) for b in bts),
        "first_wavestart": min(w.start for w in waves), "last_waveend": max(w.end for w in waves),
        "last_packet": max(b.last_time for b in bts),
    }
    assert got == {k: exp[k] for k in got}
    assert all(b.packets.error is None and w.end is not None for b in bts for w in b.waves)


@pytest.mark.parametrize("key", ALL)
def test_wave_lists(key: str):
    """§13.2: every wave (or every traced wave) with its place, cycles and issue count, in stream order."""
    exp = EXPECTED[key]["wave_list"]
    got = [{"kern": la.kern, "se": b.se, "cu": w.cu, "simd": w.simd, "slot": w.slot, "start": w.start, "end": w.end,
            "issues": len(w.issues) if w.traced else None}
           for la in launches(key) for b in la.blobs for w in b.waves if w.traced or not exp["traced_only"]]
    assert got == exp["waves"]


@pytest.mark.parametrize("key", RDNA)
def test_pc_walk(key: str):
    """§10: with a disassembler, every issue of a traced wave lands on an instruction of its kind (§9.6)."""
    las = launches(key)
    if not any(la.insts for la in las):
        pytest.skip(objdump_missing(las[0].target) or f"{las[0].target}: llvm-objdump printed no instructions")
    imm = {"s_waitcnt", "s_clause", "s_nop", "s_wait_dscnt", "s_wait_loadcnt", "s_wait_kmcnt", "s_wait_storecnt"}
    for w in (w for la in las for b in la.blobs for w in b.waves if w.traced):
        for i in w.issues:
            assert i.pc is not None and i.mnemonic, (key, w, i)
            if i.category == "VALU":
                assert i.mnemonic.startswith("v_"), i
            elif i.category == "IMMEDIATE":
                assert i.mnemonic in imm, i
            elif i.category.startswith("JUMP"):
                assert "branch" in i.mnemonic, i
            elif i.category.startswith(("SALU", "SMEM")):
                assert i.mnemonic.startswith("s_"), i
            elif i.category.startswith(("LDS_", "SGMEM", "VMEM", "FLAT")):
                assert i.mnemonic.startswith(("ds_", "global_", "flat_", "buffer_")), i


# --- hand-made streams ------------------------------------------------------------------------------------------
def pkt(arch: str, name: str, delta: int = 0, **fields: int) -> list[int]:
    f = FORMATS[ids(arch)[name]]
    v = f.match
    if f.delta is not None:
        v |= (delta - f.delta_add) // f.delta_mul << f.delta[1]
    for k, x in fields.items():
        v |= x << f.fields[k][1]
    return [(v >> 4 * i) & 0xF for i in range(f.nib)]


def header(layout: int) -> list[int]:
    return pkt("rdna3", "LAYOUT_HEADER", layout=layout)


def stream(*packets: list[int], pad: int = 16) -> bytes:
    nibs = [n for p in packets for n in p] + [0] * pad
    nibs += [0] * (-len(nibs) % 64)
    return bytes(nibs[i] | nibs[i + 1] << 4 for i in range(0, len(nibs), 2))


def real(p) -> list[tuple[str, int]]:
    return [(n, t) for n, t in zip(packet_names(p), p.times, strict=True) if n != "NOP"]


def test_rdna3_stream():
    a = "rdna3"
    blob = stream(header(3), pkt(a, "NOP"), pkt(a, "WAVESTART", 2, wave=3), pkt(a, "TS_DELTA_SHORT", 7),
                  pkt(a, "VALUINST", 1, wave=3), pkt(a, "TS_DELTA_S8_W3", 5), pkt(a, "INST", 2, wave=3, op=0x29),
                  pkt(a, "INST", 0, wave=1, op=0x50), pkt(a, "IMMEDIATE_MASK", 1, mask=0b1000),
                  pkt(a, "TS_DELTA_OR_MARK", 1000), pkt(a, "TS_DELTA_OR_MARK", rt=1, delta=12345),
                  pkt(a, "WAVEEND", 3, wave=3))
    p = decode(blob)
    assert p.arch == "rdna3" and p.error is None
    assert real(p) == [("LAYOUT_HEADER", 0), ("WAVESTART", 2), ("TS_DELTA_SHORT", 9), ("VALUINST", 10),
                       ("TS_DELTA_S8_W3", 15), ("INST", 17), ("INST", 17), ("IMMEDIATE_MASK", 18),
                       ("TS_DELTA_OR_MARK", 1018), ("TS_DELTA_OR_MARK", 1018), ("WAVEEND", 1021)]
    bt = analyze(p, se=1, itrace=True)
    (w,) = bt.waves
    assert (w.slot, w.start, w.end, w.traced) == (3, 2, 1021, True)
    assert [(i.time, i.category) for i in w.issues] == [(10, "VALU"), (17, "LDS_RD"), (18, "IMMEDIATE")]
    assert bt.other_inst == 1 and bt.markers == [(1018, 12345)] and bt.unit_waveends == 1


def test_rdna4_stream():
    a = "rdna4"
    blob = stream(header(4), pkt(a, "WAVESTART", 1, wgp=9, sa=1, simd=2, wave=7), pkt(a, "TS_DELTA_S5_W2", 3),
                  pkt(a, "WAVESTART", 1, wave=0), pkt(a, "INST", 2, wave=0, op=0x8d),
                  pkt(a, "TS_DELTA_OR_MARK", rt=1, delta=(1 << 51) + 5),
                  pkt(a, "WAVEEND", 1, wgp=9, sa=1, simd=2, wave=7), pkt(a, "WAVEEND", 4, wave=0))
    p = decode(blob)
    assert p.arch == "rdna4" and real(p)[-1] == ("WAVEEND", 12)
    bt = analyze(p, se=0, itrace=True)
    assert [(w.sa, w.wgp, w.cu, w.simd, w.slot, w.start, w.end, w.traced) for w in bt.waves] == [
        (1, 9, 25, 2, 7, 1, 8, False), (0, 0, 0, 0, 0, 5, 12, True)]
    assert [i.category for i in bt.waves[1].issues] == ["WMMA_16"] and bt.markers == [(7, (1 << 51) + 5)]


def cdna_header(se: int = 0) -> list[int]:
    v = 0x11 + (4 << 13) + (0xF << 16) + (se << 24)
    return [(v >> 4 * i) & 0xF for i in range(16)]


def test_cdna_stream():
    a = "cdna"
    blob = stream(cdna_header(3), pkt(a, "CDNA_TIMESTAMP", timestamp=5000), pkt(a, "CDNA_MISC", 20),
                  pkt(a, "CDNA_WAVESTART", simd=1, wave=2), pkt(a, "CDNA_INST", simd=1, wave=2, op=28),
                  pkt(a, "CDNA_TIMESTAMP", low12=7, timestamp=1), pkt(a, "CDNA_TIMESTAMP", timestamp=5103),
                  pkt(a, "CDNA_WAVEEND", simd=1, wave=2), pkt(a, "CDNA_WAVESTART", cu=4, wave=1))
    p = decode(blob)
    assert p.arch == "cdna" and p.error is None
    # first absolute sample: offset 5000; MISC: +20; later sample: ((5103 - 5000) & ~3) - 4 = 96
    assert [t for _, t in real(p)][:9] == [0, 0, 20, 20, 20, 20, 96, 96, 96]  # then zero padding: CDNA_MISC
    bt = analyze(p, se=0, itrace=True)
    assert [(w.cu, w.simd, w.slot, w.start, w.end, w.traced) for w in bt.waves] == [
        (0, 1, 2, 20, 96, True), (4, 0, 1, 96, None, False)]
    assert [(i.time, i.category) for i in bt.waves[0].issues] == [(20, "VALU_MAI")]


def test_end_rule_and_alignment():
    """§2: a packet starts only where its 16-nibble window fits; 5-nibble packets walk odd and even offsets."""
    a = "rdna3"
    body = [pkt(a, "WAVESTART", wave=0)] + [pkt(a, "INST", 1, wave=0, op=0)] * 9 + [pkt(a, "WAVEEND", 1, wave=0)]
    nibs = [n for p in [header(3), *body] for n in p]
    blob = bytes(nibs[i] | nibs[i + 1] << 4 for i in range(0, len(nibs) - 1, 2)) + bytes(8)
    p = decode(blob)
    assert p.offsets[-1] + 16 <= 2 * len(blob) < p.stop_nibble + 16
    assert packet_names(p)[:12] == ["LAYOUT_HEADER", "WAVESTART"] + ["INST"] * 9 + ["WAVEEND"]
    assert analyze(p).waves[0].end == 10
    assert [f.fields for f in iter_packets(p)][2] == {"flag1": 0, "flag2": 0, "wave": 0, "op": 0}


def test_tables():
    """§4 decision tree, spot checks; unassigned patterns are 1-nibble fillers; op names incl. OTHER_ ranges."""
    name = {a: [FORMATS[t].name for t in TABLES[a]] for a in TABLES}
    assert [name["rdna3"][b] for b in (0x11, 0x01, 0x21, 0x31, 0x51, 0x61, 0xE1, 0x71, 0x41, 0x07)] == [
        "LAYOUT_HEADER", "TS_DELTA_OR_MARK", "TS_DELTA_S8_W3", "UTILCTR", "TS_WAVE_STATE", "EVENT", "EVENT_BIG",
        "SNAPSHOT", "NOP", "NOP"]
    assert [name["rdna3"][b] for b in (0x02, 0x0A, 0x13, 0x04, 0x14, 0x05, 0x15, 0x06, 0x16, 0x0C, 0x1C)] == [
        "INST", "INST", "VALUINST", "IMMEDIATE_MASK", "WAVERDY", "WAVEALLOC", "WAVEEND", "TS_DELTA_S5_W3", "PERF",
        "WAVESTART", "TS_DELTA_S5_W2"]
    assert name["cdna"][0x91] == "LAYOUT_HEADER" and name["cdna"][0x21] == "CDNA_TIMESTAMP"
    assert op_name("rdna3", 0x5A) == "OTHER_VMEM_1" and op_name("rdna4", 0xDD) == "OTHER_VMEM_34"
    assert op_name("rdna4", 0x78) == "OTHER_LDS_10" and op_name("rdna3", 0x7F) == "0x7f"
    assert OPS_RDNA3[0x13] == "BARRIER"
    p = decode(stream(header(3), [7], pkt("rdna3", "WAVEALLOC", 3)), strict=False)
    assert real(p) == [("LAYOUT_HEADER", 0), ("WAVEALLOC", 3)]


# --- bad input -------------------------------------------------------------------------------------------------------
def test_refused_streams():
    a = "rdna3"
    p = decode(stream(header(3), pkt(a, "WAVEALLOC", 2), header(4), pkt(a, "WAVEALLOC", 2)))
    assert len(p) == 2 and "mid-stream" in p.error
    p = decode(stream(header(3), pkt(a, "WAVEALLOC", 2), [7], pkt(a, "WAVEALLOC", 2)))
    assert len(p) == 2 and "unassigned" in p.error
    assert decode(b"\x00" * 64).error.startswith("no layout header") and len(decode(b"")) == 0
    assert len(decode(b"\x91\x01")) == 0 and decode(b"\x91\x01").error
    p = decode(stream(header(3), pkt(a, "WAVESTART", 1, wave=2), pkt(a, "WAVEEND", 1, wave=3)))
    bt = analyze(p)
    assert len(p) == 2 and "not running" in p.error and bt.waves[0].end is None
    p = decode(stream(header(3), pkt(a, "WAVESTART", 1, wave=2), pkt(a, "VALUINST", 1, wave=4)))
    assert len(analyze(p).packets) == 2 and "VALU of wave slot" in p.error
    p = decode(stream(header(3), pkt(a, "WAVESTART", 1, wave=2), pkt(a, "WAVESTART", 1, wave=2)))
    assert len(analyze(p).packets) == 2 and "started while running" in p.error


BAD_CASES = [fixture(k) for k in ("gfx1100/profile_gemm_run_0", "gfx1200/profile_handwritten_run_0",
                                   "gfx950/profile_gemm_run_0")]


@pytest.mark.parametrize("key", BAD_CASES)
def test_cut_and_flipped_blobs(key: str):
    """Random cuts and byte flips: what decodes equals the clean decode's prefix; a warning names kernel and SE."""
    rng = random.Random(key)
    la = launches(key)[0]
    for cap, clean in zip(la.sqtt[:2], la.blobs[:2], strict=True):
        ref = clean.packets
        for trial in range(24):
            blob = bytearray(cap.blob)
            if trial % 2:
                cut = rng.randrange(len(blob))
                del blob[cut:]
                limit = 2 * cut
            else:
                at = rng.randrange(len(blob))
                blob[at] ^= rng.randrange(1, 256)
                limit = 2 * at
            bad = Capture("sqtt", cap.device, cap.kern, bytes(blob), cap.exec_tag, cap.se, cap.itrace)
            t = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                bt = decode_blob(bad, la)
            assert time.perf_counter() - t < 2
            p = bt.packets
            same = sum(1 for k in ref.offsets if k + 16 <= limit)
            assert list(p.types[:same]) == list(ref.types[:same]) and p.times[:same] == ref.times[:same]
            if p.error or any(w.end is None for w in bt.waves):
                msg = str(caught[0].message)
                assert issubclass(caught[0].category, SQTTWarning) and f"{la.name} n1" in msg and f"SE {cap.se}" in msg


@pytest.mark.parametrize("key", BAD_CASES)
def test_corrupt_profile_exports(key: str, tmp_path: Path):
    """A profile with corrupt SQTT blobs and no code objects still becomes a trace with its valid waves."""
    prof = vizexport.load_profile(SQTT / f"{key}.pkl")
    rng = random.Random(1)
    for c in prof.captures:
        if c.kind == "sqtt":
            blob = bytearray(c.blob)
            for _ in range(3):
                blob[rng.randrange(8, len(blob))] = rng.randrange(256)
            c.blob = bytes(blob[: rng.randrange(8, len(blob))])
        if c.kind == "pmc":
            c.blob = c.blob[:100]
    prof.programs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tl = build_timeline(prof)
        groups = add_sqtt_tracks(tl, next(t for t in tl.tracks if t.name == "AMD" and not t.parent), prof)
        rows = launch_counters(prof)
    assert any(issubclass(w.category, SQTTWarning) for w in caught)
    assert groups and "stopped early" in groups[0].description and "no code object" in groups[0].description
    assert rows[0]["error"].startswith("PMC blob of 100 bytes")
    assert write_trace(tl, tmp_path / "bad.pftrace") > 0


# --- code objects --------------------------------------------------------------------------------------------------
def test_code_objects():
    if not SQTT.exists():
        pytest.skip("sqtt fixtures not present")
    co = read_code_object(profile("gfx1100/profile_gemm_run_0").programs[0].lib)
    assert co.error is None and co.text_addr == 0x1700 and len(co.text) == 768
    (k,) = co.kernels
    assert (k.name, k.vgprs, k.sgprs, k.lds_bytes, k.scratch_bytes, k.wavefront_size) == (
        "r_32_32_16_2", 10, 18, 64, 0, 32)
    assert co.symbols["r_32_32_16_2"] == (0x1700, 364)
    hand = read_code_object(profile("gfx1200/profile_handwritten_run_0").programs[0].lib)  # tinygrad's minimal ELF
    assert hand.error is None and hand.text_addr == 0x100 and hand.kernels[0].lds_bytes == 512
    assert read_code_object(b"\x7fELF garbage").error and read_code_object(None).error == "no code object"


def test_targets_and_msgpack():
    assert [target_name(v) for v in (110000, 120001, 90500, 90010, 90402)] == [
        "gfx1100", "gfx1201", "gfx950", "gfx90a", "gfx942"]
    assert [arch_of_target(t) for t in ("gfx1100", "gfx1201", "gfx950")] == ["rdna3", "rdna4", "cdna"]
    packed = bytes.fromhex("82a16101a162930102c3")  # {"a": 1, "b": [1, 2, True]}
    assert unpackb(packed) == {"a": 1, "b": [1, 2, True]}
    assert unpackb(bytes.fromhex("cd0100d0ff")) == 256
    with pytest.raises(ValueError):
        unpackb(b"\x92\x01")


def test_without_disassembler(monkeypatch: pytest.MonkeyPatch):
    """No llvm-objdump: issues keep their SQTT category names and get no pc."""
    if not SQTT.exists():
        pytest.skip("sqtt fixtures not present")
    monkeypatch.setattr(codemod, "_OBJDUMPS", [])
    monkeypatch.setattr(codemod, "_CACHE", {})
    monkeypatch.setattr(codemod, "_FOUND", {})
    (la,) = load_launches(profile("gfx1100/profile_plus_run_0"))
    assert la.insts is None and disassemble(la.code, "gfx1100") is None
    issues = [i for b in la.blobs for w in b.waves for i in w.issues]
    assert len(issues) == 11 and all(i.pc is None and i.mnemonic is None for i in issues)


# --- PMC -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ALL)
def test_pmc_vs_tinygrad(key: str):
    """Counter sums and derived utilisation equal tinygrad 0.14.0's viewer (tests/data from tools/sqtt_expected.py)."""
    pmcs = [c for c in profile(key).captures if c.kind == "pmc"]
    for cap, exp in zip(pmcs, EXPECTED[key]["pmc"], strict=True):
        pmc = decode_pmc(cap)
        assert pmc.error is None
        for c in pmc.counters:
            assert c.sum == exp[c.name] and c.count == len(c.rows()) * c.dims[4]
        assert {k: f"{v:.1f}%" for k, v in pmc.derived.items()} == {k: v for k, v in exp.items() if "utilization" in k}


def test_pmc_table_and_span_args():
    if not SQTT.exists():
        pytest.skip("sqtt fixtures not present")
    prof = profile("gfx1100/profile_sync_run_0")
    rows = launch_counters(prof)
    assert [(r["kernel"], r["run"], r["exec_tag"]) for r in rows] == [("custom_lds_sync", 1, 1), ("E_32_4", 1, 2)]
    assert rows[0]["counters"]["SQ_INSTS_VALU"] == {"sum": 24, "max": 24, "count": 48}
    text = as_text(rows)
    assert "PMC custom_lds_sync n1" in text and "SQC_LDS_BANK_CONFLICT" in text and "VALU utilization" in text
    args = span_args(prof)
    idx = {prof.spans[i].key.name: i for i in args}
    assert args[idx["E_32_4"]]["pmc"]["SQ_INSTS_VALU"] == 10 and args[idx["E_32_4"]]["pmc"]["VALU utilization %"] == 0.0


# --- Timeline tracks -------------------------------------------------------------------------------------------------
def sqtt_slices(tl: Timeline, group) -> tuple[int, int]:
    inside = {group.uuid}
    waves = issues = 0
    for t in tl.walk():
        if t.parent in inside:
            inside.add(t.uuid)
            if t.kind == "slice":
                n = sum(tl.strings[x].startswith("wave") for x in t.names)
                waves, issues = waves + n, issues + len(t) - n
    return waves, issues


@pytest.mark.parametrize("key", ALL)
def test_tracks(key: str):
    prof, exp = profile(key), EXPECTED[key]
    tl = build_timeline(prof)
    amd = next(t for t in tl.tracks if t.name == "AMD" and not t.parent)
    groups = add_sqtt_tracks(tl, amd, prof, launches(key))
    assert [g.name for g in groups] == [f"SQTT {la.name} n1" for la in launches(key)]
    counts = [sqtt_slices(tl, g) for g in groups]
    assert sum(w for w, _ in counts) == exp["waves"] and sum(i for _, i in counts) == exp["issues"]
    for g, la in zip(groups, launches(key), strict=True):
        check_group(tl, g, la)


def check_group(tl: Timeline, g, la: Launch) -> None:
    ses = [t for t in tl.children(g) if t.name != "Shader Clock"]
    assert [t.name for t in ses] == [f"SE{b.se}" for b in la.blobs]
    clocks = [t for t in tl.children(g) if t.name == "Shader Clock"]
    assert all(t.kind == "counter" and t.unit == "Hz" and 0 < min(t.values) <= max(t.values) <= 10e9 for t in clocks)
    clock = "assumed" if la.arch == "cdna" else "markers"
    assert ("no clock markers" in g.description) == (clock == "assumed") or la.name == "E_32_4"
    span = la.span
    for t in tl.walk():
        if t.kind == "slice" and tl.path(t)[1] is g:
            assert tl.path(t)[-2].name.startswith("SIMD") and t.name.startswith("slot ")
            check_nesting(tl, t)
            if clock == "markers" and la.arch == "rdna3":  # placed by the markers: inside the kernel slice
                assert span.st - 1000 <= t.ts[0] and t.ts[-1] <= span.en + 1000
        if t.kind == "counter" and t.name.startswith("SIMD"):  # occupancy: the SIMD's row, its slots below it
            assert min(t.values) >= 0 and t.values[-1] == 0 and tl.children(t)


def check_nesting(tl: Timeline, t) -> None:
    """Each wave slice starts its slot's run of issue slices, which all lie inside it, in time order."""
    end = None
    for i in range(len(t)):
        a, b = t.ts[i], t.ts[i] + t.dur[i]
        if tl.strings[t.names[i]].startswith("wave"):
            assert end is None or a >= end
            end, start = b, a
            assert {"se", "simd", "slot", "start_cycle", "end_cycle"} <= set(t.args[i])
        else:
            assert start <= a <= b <= end and a < end and {"category", "cycles"} <= set(t.args[i])


def test_trace_processor(tmp_path: Path):
    """All captures in one trace, each under its own root: wave and issue slice counts per capture, no error stats.

    Slices sit 5 levels below their capture's root: slot → SIMD → WGP/CU → SE → `SQTT …` group → root."""
    present = [k for k in KEYS if (SQTT / f"{k}.pkl").exists()]
    if not present:
        pytest.skip("sqtt fixtures not present")
    tl = Timeline("sqtt fixtures")
    for key in present:
        add_sqtt_tracks(tl, tl.add_track(key, None, "group", Role.DEVICE), profile(key), launches(key))
    write_trace(tl, trace := tmp_path / "sqtt.pftrace")
    up = " ".join(f"join track t{i + 1} on t{i}.parent_id = t{i + 1}.id" for i in range(1, 6))
    counts, errors = tpq(trace, "select t6.name as file, sum(s.name like 'wave%') as waves, "
                         "sum(s.name not like 'wave%') as issues "
                         f"from slice s join track t1 on s.track_id = t1.id {up} group by t6.name",
                         "select name, idx, severity, source, value from stats "
                         "where value > 0 and severity in ('error', 'data_loss')")
    assert errors == []
    assert {r["file"]: (r["waves"], r["issues"]) for r in counts} == {
        k: (EXPECTED[k]["waves"], EXPECTED[k]["issues"]) for k in present}


def test_find_launches_without_programs():
    if not SQTT.exists():
        pytest.skip("sqtt fixtures not present")
    prof = vizexport.load_profile(SQTT / "gfx1100" / "profile_sync_run_0.pkl")
    prof.programs = []
    las = find_launches(prof)
    assert [(la.name, la.run, la.span) for la in las] == [("kernel 0", 1, None), ("kernel 1", 1, None)]
