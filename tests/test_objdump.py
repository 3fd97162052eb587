"""Which llvm-objdump disassembles AMD code here: the probe (one known instruction per target), what it says when
none can (Debian's LLVM 14 knows no gfx11/gfx12/gfx950), and the kernel page that says so (issue #34)."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

import vizexport.sqtt.code as codemod
from vizexport import load_profile
from vizexport.sqtt.code import disassembler
from vizexport.sqtt.listings import program_listings

from .conftest import FIXTURES, run_cli

GEMM = FIXTURES / "sqtt/gfx1100/profile_gemm_run_0.pkl"
HINT = "install a newer LLVM (Debian: apt-get install llvm-22) or set VIZEXPORT_OBJDUMP"


def fake_objdump(folder: Path, version: int, prints: str | None) -> Path:
    """An llvm-objdump stand-in: `--version` names LLVM `version`; disassembling prints `prints` as its one line of
    code, or (None) fails as LLVM 14 does on a processor it does not know (a warning, then an abort)."""
    body = (f"printf '\\t{prints} // 000000000000: BFB00000\\n'; exit 0" if prints is not None else
            "echo \"'$cpu' is not a recognized processor for this target (ignoring processor)\" >&2\n"
            "echo 'LLVM ERROR: Disassembly not yet supported for subtarget' >&2; exit 134")
    path = folder / f"llvm-objdump-fake-{version}"
    path.write_text("#!/bin/sh\n"
                    f'case "$1" in --version) echo "Debian LLVM version {version}.0.6"; exit 0;; esac\n'
                    'for a; do case "$a" in --mcpu=*) cpu=${a#--mcpu=};; esac; done\n'
                    f"{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def use_objdump(monkeypatch: pytest.MonkeyPatch):
    """Point VIZEXPORT_OBJDUMP (this process and the commands it runs) at a tool, with the probe's caches emptied."""
    def use(tool: Path | str) -> None:
        monkeypatch.setenv("VIZEXPORT_OBJDUMP", str(tool))
        for name, empty in (("_OBJDUMPS", None), ("_FOUND", {}), ("_CACHE", {})):
            monkeypatch.setattr(codemod, name, empty)
    return use


def test_an_old_llvm_is_named_with_the_target(tmp_path: Path, use_objdump):
    """LLVM 14's failure on gfx1100 and gfx950: no tool, and a reason naming the version, the target and the fix."""
    use_objdump(fake_objdump(tmp_path, 14, None))
    for target in ("gfx1100", "gfx950"):
        found = disassembler(target)
        assert found.tool is None and found.missing == f"llvm-objdump 14 does not know {target}; {HINT}"


def test_the_probe_wants_the_instruction_by_name(tmp_path: Path, use_objdump):
    """A tool that runs but prints the probe's word as data (`.long`: it knows the family, not the processor) does
    not count; one that prints `s_endpgm` does, and is probed once per target."""
    use_objdump(fake_objdump(tmp_path, 17, ".long 0xbfb00000"))
    assert disassembler("gfx1200").missing.startswith("llvm-objdump 17 does not know gfx1200;")
    good = fake_objdump(tmp_path, 22, "s_endpgm")
    use_objdump(good)
    assert disassembler("gfx1200").tool == str(good)
    good.write_text("#!/bin/sh\nexit 1\n")  # probed already: the answer stands
    assert disassembler("gfx1200").tool == str(good)


def test_no_tool_at_all(tmp_path: Path, use_objdump):
    use_objdump(tmp_path / "absent")
    found = disassembler("gfx1100")
    assert found.tool is None
    assert found.missing == f"VIZEXPORT_OBJDUMP names '{tmp_path / 'absent'}', not found; install LLVM (Debian: " \
                            "apt-get install llvm-22) or set VIZEXPORT_OBJDUMP"


@pytest.mark.skipif(not GEMM.exists(), reason="sqtt fixtures absent")
def test_the_kernel_page_says_why(tmp_path: Path, use_objdump):
    """With LLVM 14 the gfx1100 gemm's kernel page has no disassembly, control flow or SQTT tables, and one note
    saying why; the listing records the same reason."""
    use_objdump(fake_objdump(tmp_path, 14, None))
    (lst,) = program_listings(load_profile(GEMM))
    assert lst.lines == [] and lst.cfg is None and lst.waves == []
    assert lst.missing == f"llvm-objdump 14 does not know gfx1100; {HINT}"
    out = tmp_path / "site"
    r = run_cli(GEMM, "-o", f"{out}/")
    assert r.returncode == 0, r.stderr
    (page,) = (out / "kernel").glob("*r_32_32_16_2*.html")
    html = page.read_text()
    assert 'id="disassembly"' not in html and 'id="control-flow"' not in html and "wave-insts" not in html
    note = html.split('<p class="note" id="no-disassembly">')[1].split("</p>")[0]
    assert note == ("Disassembly unavailable (and with it the control flow and the per-instruction SQTT tables): "
                    f"llvm-objdump 14 does not know gfx1100; {HINT}.")
