"""Shared test helpers. Real fixtures come from ../shared/fixtures; tests that need them skip where it is absent."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"
EXPECTED = json.loads((ROOT / "tests" / "data" / "expected.json").read_text())


def fixture_files(pattern: str) -> list[Path]:
    return sorted(FIXTURES.glob(pattern)) if FIXTURES.is_dir() else []


def fixture_params(pattern: str) -> list:
    """pytest params over fixture files, or one skipped param where ../shared is absent."""
    files = fixture_files(pattern)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"../shared/fixtures/{pattern} not present"))]
    return [pytest.param(f, id=str(f.relative_to(FIXTURES))) for f in files]


def _if_present(path: Path) -> list:
    return [] if path.exists() else [pytest.mark.skip(reason="absent")]


def set_params(sets: dict[str, Path]) -> list:
    """pytest params over named input sets, skipped where a set's file is absent."""
    return [pytest.param(k, id=k, marks=_if_present(p)) for k, p in sets.items()]


def trace_params(sets: dict[str, Path], chrome: tuple[str, ...]) -> list:
    """(set, output suffix) params: every set as .pftrace, the `chrome` ones also as Chrome JSON (the same model
    through the other writer: a few sets show it, each load in the browser costs seconds)."""
    return [pytest.param(k, fmt, id=f"{fmt}-{k}", marks=_if_present(p))
            for k, p in sets.items() for fmt in ((".pftrace", ".json.gz") if k in chrome else (".pftrace",))]


# The LLVM processor of each SQTT fixture folder's device (its gfx_target_version: gfx1200's captures are gfx1201)
SQTT_TARGETS = {"gfx1100": "gfx1100", "gfx1200": "gfx1201", "gfx950": "gfx950"}


def objdump_missing(*targets: str) -> str:
    """Why the llvm-objdump vizexport would use cannot disassemble every AMD `target` ("" when it can): the package's
    own probe (vizexport.sqtt.code.disassembler, once per target and process), so a test skips exactly where the site
    would show no disassembly (Debian's LLVM 14 knows no gfx11/gfx12/gfx950)."""
    from vizexport.sqtt.code import disassembler
    return next((found.missing for found in map(disassembler, targets) if found.tool is None), "")


def needs_objdump(*targets: str) -> pytest.MarkDecorator:
    """Skip unless an llvm-objdump here disassembles every one of `targets` (see objdump_missing)."""
    missing = objdump_missing(*targets)
    return pytest.mark.skipif(bool(missing), reason=missing)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vizexport", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


TPQ = ROOT.parent / "shared" / "tools" / "perfetto-check" / "tpq"
TPQ_HOME = Path.home() / ".cache" / "perfetto-check"


def tpq_available() -> bool:
    return TPQ.exists() and Path("/usr/bin/chromium").exists() and (TPQ_HOME / "web_dist" / "index.html").exists()


def tpq(trace: Path, *sql: str) -> list:
    """Run SQL against `trace` in the real Perfetto trace processor (../shared/tools/perfetto-check)."""
    if not tpq_available():
        pytest.skip("perfetto-check is not installed (../shared/tools/perfetto-check/install.sh)")
    r = subprocess.run([str(TPQ), "--timeout", "180", str(trace), *sql], capture_output=True, text=True, timeout=240,
                       check=False)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def on_terminal(*args: object, columns: int = 120) -> tuple[float | None, bytes, int]:
    """Run the command with stderr on a pseudo-terminal: the seconds to its first byte there, all it wrote there, and
    its exit code."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "vizexport", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=follower, cwd=ROOT)
    os.close(follower)
    first, seen = None, b""
    while True:
        if not select.select([leader], [], [], 1)[0]:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        first = time.monotonic() - t0 if first is None else first
        seen += chunk
    os.close(leader)
    return first, seen, proc.wait()


# Graphviz's dot draws the SVG export (sites lay graphs out in the browser): an optional system tool
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz dot is not installed (apt-get install graphviz)")
