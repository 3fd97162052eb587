"""The control-flow graph of AMD disassembly on kernel pages (issue #20): blocks, taken / not-taken / unconditional
edges, blocks shaded by the cycles of SQTT-traced waves, as SVG."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vizexport import load_profile
from vizexport.records import Listing
from vizexport.site.cfg import cfg_svg
from vizexport.sqtt import load_launches
from vizexport.sqtt.cfg import branch_target, control_flow, pc_cycles
from vizexport.sqtt.code import Instruction
from vizexport.sqtt.listings import program_listings

from .conftest import FIXTURES, SQTT_TARGETS, needs_objdump, run_cli

SVG = "{http://www.w3.org/2000/svg}"
SQTT = sorted(FIXTURES.glob("sqtt/*/profile_*_run_0.pkl"))
needs_fixtures = pytest.mark.skipif(not SQTT, reason="sqtt fixtures absent")


def _fixture_param(path: Path):
    """A fixture's param, skipped where no llvm-objdump here knows its target (by the folder it sits in)."""
    target = SQTT_TARGETS.get(path.parent.name, path.parent.name)
    return pytest.param(path, id="/".join(path.parts[-2:]), marks=needs_objdump(target))


def _inst(addr: int, mnemonic: str, simm: int = 0, size: int = 4) -> Instruction:
    word = (0xBF << 24) | (simm & 0xFFFF) if mnemonic.startswith(("s_branch", "s_cbranch")) else 0
    return Instruction(addr, size, mnemonic, f"{mnemonic} {simm}" if word else mnemonic, word)


def test_loop_and_skip_built_by_hand():
    """A loop (a backward conditional branch), a forward skip (s_branch) and the end: their blocks and edges."""
    insts = [_inst(0x100, "s_mov_b32"), _inst(0x104, "v_add_f32", size=8), _inst(0x10C, "s_cbranch_scc1", -3),
             _inst(0x110, "s_branch", 1), _inst(0x114, "s_nop"), _inst(0x118, "s_endpgm"), _inst(0x11C, "s_code_end")]
    cfg = control_flow({i.addr: i for i in insts}, {0x104: 10, 0x10C: 5, 0x118: 1})
    assert cfg.blocks == [(0, 1), (1, 3), (3, 4), (4, 5), (5, 6), (6, 7)]
    assert sorted(cfg.edges) == [(0, 1, "always"), (1, 1, "taken"), (1, 2, "not taken"), (2, 4, "always"),
                                 (3, 4, "always")]
    assert cfg.cycles == [0, 15, 0, 0, 1, 0] and cfg.measured
    assert branch_target(insts[2]) == 0x104 and branch_target(insts[0]) is None


def _text_target(inst: Instruction) -> int | None:
    """A branch's target from its printed operand (llvm-objdump prints the raw simm16, unsigned), apart from its
    word."""
    m = re.match(r"s_c?branch\S*\s+(-?\d+)$", inst.text)
    if m is None:
        return None
    v = int(m.group(1))
    return inst.addr + 4 + 4 * (v - 0x10000 if 0x8000 <= v < 0x10000 else v)


@needs_fixtures
@pytest.mark.parametrize("path", [_fixture_param(p) for p in SQTT])
def test_fixture_programs(path: Path):
    """Every program of the SQTT fixtures: each branch's target (from its word) is the one llvm-objdump prints and
    starts a block; blocks tile the listing; the cycles per block add up to the traced waves' issue intervals."""
    prof = load_profile(path)
    launches = load_launches(prof)
    listings = program_listings(prof, launches)
    assert listings
    for lst in listings:
        cfg = lst.cfg
        assert cfg.blocks[0][0] == 0 and cfg.blocks[-1][1] == len(lst.lines)
        assert all(a[1] == b[0] for a, b in zip(cfg.blocks, cfg.blocks[1:], strict=False))
        starts = {int(lst.lines[s].split()[0], 16) for s, _ in cfg.blocks}
        for line in lst.lines:
            addr, text = line.split(None, 1)
            mnemonic = text.split()[0]
            if mnemonic.startswith(("s_branch", "s_cbranch")):
                inst = Instruction(int(addr, 16), 4, mnemonic, text, 0)
                assert _text_target(inst) in starts, line
        mine = [la for la in launches if la.program is not None and la.program.name == lst.name and la.blobs]
        if mine:
            assert cfg.measured and sum(cfg.cycles) == sum(v for pc, v in pc_cycles(mine).items()
                                                           if f"{pc:#014x}" in {x.split()[0] for x in lst.lines})


@needs_fixtures
@needs_objdump("gfx1100")
def test_gemm_kernel_page_draws_the_graph(tmp_path: Path):
    """gfx1100's gemm: the skip of the lane-0 epilogue (s_cbranch_execz) is a taken edge past it, the epilogue falls
    through; the kernel page's SVG has a box per block, an edge per edge, the hottest block filled darkest."""
    path = FIXTURES / "sqtt/gfx1100/profile_gemm_run_0.pkl"
    out = tmp_path / "site"
    assert run_cli(path, "-o", f"{out}/").returncode == 0
    (page,) = (out / "kernel").glob("*r_32_32_16_2*.html")
    html = page.read_text()
    svg = ET.fromstring(html[html.index("<svg"):html.index("</svg>") + 6])
    blocks = svg.findall(f"{SVG}g[@class='block']")
    edges = [(e.get("class"), e.find(f"{SVG}title").text) for e in svg.findall(f"{SVG}path")]
    assert len(blocks) == 4
    assert sorted(edges) == [("edge always", "always: block 1 → block 2"),
                             ("edge not-taken", "not taken: block 0 → block 1"),
                             ("edge taken", "taken: block 0 → block 2")]
    fills = [b.find(f"{SVG}rect").get("fill") for b in blocks]
    assert fills[0] == "#f4a261" and fills[3] == "#ffffff"
    lst = program_listings(load_profile(path))[0]
    assert cfg_svg(Listing(lst.device, lst.name, lst.key, lst.lines, None)) == ""


# tinygrad's sqtt-insts tables (tools/sqtt_insts_reference.py)
REFERENCE = Path(__file__).parent / "data" / "sqtt_insts"


@pytest.mark.parametrize("ref", sorted(REFERENCE.glob("gfx1*.json.gz")), ids=lambda p: p.name.split(".")[0])
def test_traced_waves_are_tinygrads(ref: Path):
    """The waves tinygrad's per-instruction tables describe (decoded by AMD's rocprof-trace-decoder) are waves our
    decoder finds on the same SE, CU, SIMD and wave slot, lasting exactly as many cycles (RDNA fixtures)."""
    import gzip
    import json
    arch, name = ref.name.split(".")[0].split("_", 1)
    path = FIXTURES / "sqtt" / arch / f"{name}.pkl"
    if not path.exists():
        pytest.skip("fixture absent")
    waves = [w for la in load_launches(load_profile(path)) for b in la.blobs for w in b.waves if w.traced]
    tables = json.loads(gzip.decompress(ref.read_bytes()))
    assert tables
    for t in tables:
        md = {m["label"]: m["value"] for m in t["metadata"][0]}
        assert t["cols"] == ["PC", "Instruction", "Hits", "Cycles", "Stall", "Type"]
        same = [w for w in waves if (w.se, w.cu, w.simd, w.slot) == (md["SE"], md["CU"], md["SIMD"], md["Wave ID"])
                and w.end is not None and w.end - w.start == md["Total Cycles"]]
        assert same, (t["ctx"], t["step"], md)
