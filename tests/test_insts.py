"""Per-instruction SQTT tables (issue #20) against tinygrad's own (`sqtt-insts`, computed by AMD's
rocprof-trace-decoder; tests/data/sqtt_insts, written by tools/sqtt_insts_reference.py): every row of every traced wave.

The Instruction column is compared by mnemonic: tinygrad prints its own disassembler's text (`s_waitcnt(64519)`,
`s_load_b64(s[0:1], s[0:1])`), we print llvm-objdump's (`s_waitcnt vmcnt(0) lgkmcnt(0)`); the mnemonic is the text
before tinygrad's `(` and llvm's first blank, the same in both, but for dual-issue VOPD: tinygrad's
`VOPD(VOPDOp.V_DUAL_MOV_B32, VOPDOp.V_DUAL_FMAC_F32, ...)` is llvm's `v_dual_mov_b32 ... :: v_dual_fmac_f32 ...`, both
`v_dual_mov_b32::v_dual_fmac_f32` here (26 rows on gfx1100 gemm).
"""
from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

import pytest

from vizexport import load_profile
from vizexport.sqtt import load_launches
from vizexport.sqtt.insts import inst_type, launch_tables
from vizexport.sqtt.listings import program_listings

from .conftest import FIXTURES, SQTT_TARGETS, needs_objdump, run_cli

REFERENCE = Path(__file__).parent / "data" / "sqtt_insts"
# rows (instructions) per fixture: all of every reference wave's rows equal ours
ROWS = {"gfx1100_profile_gemm_run_0": 1730, "gfx1100_profile_plus_run_0": 123, "gfx1100_profile_sync_run_0": 382,
        "gfx1200_profile_gemm_run_0": 3248, "gfx1200_profile_handwritten_run_0": 404,
        "gfx1200_profile_plus_run_0": 120, "gfx1200_profile_sync_run_0": 368}


def _mnemonic(text: str) -> str:
    if text.startswith("VOPD("):  # tinygrad's VOPD(VOPDOp.X, VOPDOp.Y, operands...)
        return "::".join(op.strip().removeprefix("VOPDOp.").lower() for op in text[5:].split(",")[:2])
    return "::".join(part.split("(", 1)[0].split()[0] for part in text.split("::"))


def _ours(ref: Path) -> tuple[list[dict], list]:
    arch, name = ref.name.split(".")[0].split("_", 1)
    path = FIXTURES / "sqtt" / arch / f"{name}.pkl"
    if not path.exists():
        pytest.skip("fixture absent")
    tables = [t for la in load_launches(load_profile(path)) for t in launch_tables(la)]
    return json.loads(gzip.decompress(ref.read_bytes())), tables


def _same_wave(md: dict, tables: list) -> list:
    return [t for t in tables if (t.se, t.cu, t.simd, t.slot, t.cycles) ==
            (md["SE"], md["CU"], md["SIMD"], md["Wave ID"], md["Total Cycles"])]


@pytest.mark.parametrize("ref", [pytest.param(p, id=p.name.split(".")[0],
                                              marks=needs_objdump(SQTT_TARGETS[p.name.split("_")[0]]))
                                 for p in sorted(REFERENCE.glob("gfx1*.json.gz"))])
def test_tables_are_tinygrads(ref: Path):
    """Each reference wave has exactly one table of ours whose rows equal it: PC, mnemonic, Hits, Cycles, Stall, Type
    and every hit's N, Clk (the same clock: absolute values agree), Idle, Dur, Stall."""
    refs, tables = _ours(ref)
    assert len(tables) == len(refs)
    agree = 0
    for r in refs:
        md = {m["label"]: m["value"] for m in r["metadata"][0]}
        mine = [t for t in _same_wave(md, tables)
                if [(x.pc, x.hits, x.runs) for x in t.rows] == [(x[0], x[2], [tuple(h) for h in x[6]["rows"]])
                                                                for x in r["rows"]]]
        assert len(mine) == 1, (r["ctx"], r["step"], md)
        for x, row in zip(r["rows"], mine[0].rows, strict=True):
            assert (x[0], _mnemonic(x[1]), x[2], x[3], x[4], x[5]) == \
                (row.pc, _mnemonic(row.text), row.hits, row.cycles, row.stall, row.type), (r["step"], x, row)
            agree += 1
    assert agree == ROWS[ref.name.split(".")[0]]


@needs_objdump("gfx950")
def test_cdna_rows_are_tinygrads():
    """gfx950 (CDNA): our PC walk gives every row of tinygrad's tables (4 waves x 320 rows: PC, mnemonic, Hits, Type;
    the 262 s_nop rows after s_endpgm never ran). rocprof's cycles there are its own model, not the packets' times:
    each of our runs is the CDNA_INST packet's cycle, 0-92 earlier than rocprof's Clk, and a wave's Total Cycles is
    our WAVESTART-WAVEEND span (48-96 fewer than rocprof's)."""
    refs, tables = _ours(REFERENCE / "gfx950_profile_gemm_run_0.json.gz")
    assert len(tables) == len(refs) == 4
    rows = 0
    for r in refs:
        md = {m["label"]: m["value"] for m in r["metadata"][0]}
        (mine,) = [t for t in tables if (t.se, t.cu, t.simd, t.slot) == (md["SE"], md["CU"], md["SIMD"], md["Wave ID"])]
        assert 48 <= md["Total Cycles"] - mine.cycles <= 96
        for x, row in zip(r["rows"], mine.rows, strict=True):
            assert (x[0], _mnemonic(x[1]).removesuffix("_e64"), x[2], x[5]) == \
                (row.pc, _mnemonic(row.text).removesuffix("_e64"), row.hits, row.type), (r["step"], x, row)
            for ref_run, run in zip(x[6]["rows"], row.runs, strict=True):
                assert 0 <= ref_run[1] - run[1] <= 92
            rows += 1
        assert len(mine.code_rows()) == sum(1 for x in r["rows"] if x[2]) == 58
    assert rows == 4 * 320


def test_categories_name_rocprofs():
    assert [inst_type(c) for c in ("IMMEDIATE", "BARRIER", "BARRIER_SIGNAL", "JUMP_NO", "JUMP", "SALU_2", "SMEM_RD",
                                   "VALUB_4", "WMMA_16", "SGMEM_WR_2", "VMEM_RD_1", "LDS_RD", "FLAT_WR_3",
                                   "SALU_64", "NEXT", "OTHER_MSG", "VALU_MAI", "FLAT_RD")] == \
        ["IMMED", "IMMED", "MESSAGE", "NEXT", "JUMP", "SALU", "SMEM", "VALU", "VALU", "VMEM", "VMEM", "LDS", "FLAT",
         "SALU", "NEXT", "MESSAGE", "VALU", "FLAT"]


ROW = re.compile(r'<tr><td data-v="(\d+)">0x[0-9a-f]+</td><td><code>(.*?)</code></td>'
                 r'<td data-v="(\d+)">\d+</td><td data-v="(\d+)">\d+</td><td data-v="(\d+)">\d+</td>'
                 r'<td>(\w*)</td><td class="runs">(.*?)</td></tr>')


@needs_objdump("gfx1100")
def test_kernel_page_shows_the_tables(tmp_path: Path):
    """gfx1100's gemm kernel page: a collapsed table per traced wave (10: 5 slots x 2 launches), each row the
    record's PC, text, hits, cycles, stall, type and runs (Clk from the wave's start); s_code_end padding left out."""
    path = FIXTURES / "sqtt/gfx1100/profile_gemm_run_0.pkl"
    if not path.exists():
        pytest.skip("fixture absent")
    out = tmp_path / "site"
    assert run_cli(path, "-o", f"{out}/").returncode == 0
    (page,) = (out / "kernel").glob("*r_32_32_16_2*.html")
    text = page.read_text()
    prof = load_profile(path)
    (lst,) = [x for x in program_listings(prof, load_launches(prof)) if x.waves]
    parts = text.split('<details class="wave-insts">')[1:]
    assert len(parts) == len(lst.waves) == 10
    for part, w in zip(parts, lst.waves, strict=True):
        assert f"SE:{w.se} CU:{w.cu} SIMD:{w.simd} W:{w.slot}" in part and f"({w.cycles} cycles" in part
        shown = [r for r in w.rows if r.hits or not r.text.startswith("s_code_end")]
        rows = ROW.findall(part[:part.index("</table>")])
        assert len(rows) == len(shown) and sum(r.hits for r in shown) == 59
        for got, r in zip(rows, shown, strict=True):
            runs = "<br>".join(f"{n}: {clk - w.start}, {idle}, {dur}, {stall}" for n, clk, idle, dur, stall in r.runs)
            assert got == (str(r.pc), html.escape(r.text), str(r.hits), str(r.cycles), str(r.stall), r.type, runs)
