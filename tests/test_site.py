"""The static site, checked in a real browser (headless Chromium via playwright-core, as perfetto-check installs)."""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections import defaultdict
from pathlib import Path

import pytest

import vizexport

from .conftest import ROOT, TPQ_HOME, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"
SHOTS = ROOT / "test-output" / "site"
NODE_MODULES = TPQ_HOME / "node_modules"


def browser_check(site: Path, shots: Path, http_base: str | None = None) -> dict:
    have = shutil.which("node") and (NODE_MODULES / "playwright-core").exists() and Path("/usr/bin/chromium").exists()
    if not have:
        pytest.skip("headless Chromium + playwright-core not installed (../shared/tools/perfetto-check/install.sh)")
    shots.mkdir(parents=True, exist_ok=True)
    args = ["node", str(ROOT / "tests" / "browser" / "check_site.cjs"), str(site), str(shots)]
    r = subprocess.run(args + ([http_base] if http_base else []), capture_output=True, text=True, timeout=600,
                       env={**os.environ, "NODE_PATH": str(NODE_MODULES)}, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "site"
    r = run_cli("demo", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def served(demo_site: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(demo_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def expected_kernels() -> dict[tuple[str, str], tuple[int, int]]:
    """(device, name) → (count, total ns) straight from the pickle's range events and graph entries."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for s in vizexport.load_profile(SAMPLE / "profile.pkl").spans:
        if s.device not in ("TINY", "USER", "GC") and s.en is not None and s.en > s.st:
            out[(s.device, s.key.name)][0] += 1
            out[(s.device, s.key.name)][1] += s.en - s.st
    return {k: tuple(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def browsed(demo_site: Path, served: str) -> dict:
    return browser_check(demo_site, SHOTS, served)


def test_site_in_browser(demo_site: Path, browsed: dict):
    result = browsed
    pages = result["pages"]
    assert "index.html" in pages and any(p.startswith("kernel/") for p in pages) and any(p.startswith("ctx/")
                                                                                           for p in pages)
    assert {p: v["errors"] for p, v in pages.items() if v["errors"]} == {}
    assert result["brokenLinks"] == []
    rows = result["topKernels"]
    want = expected_kernels()
    assert len(rows) == len(want)
    for name, device, _total, count, *_ in rows:
        assert int(count) == want[(device, name)][0], (device, name)
    totals = [want[(r[1], r[0])][1] for r in rows]
    assert totals == sorted(totals, reverse=True)  # longest total time first
    assert result["fileHelpShown"]  # from file:// the button explains how to open the trace instead
    size = (demo_site / "trace.pftrace").stat().st_size
    assert result["perfetto"] == f"got {size} sample"  # PING/PONG + postMessage({perfetto:{buffer,title}})
    for shot in ("index.png", "kernel.png"):
        assert (SHOTS / shot).stat().st_size > 10_000


def test_step_viewer_keys(browsed: dict):
    st = browsed["stepper"]
    if st is None:
        pytest.skip("no rendered rewrite steps in this build")
    p = st["positions"]
    assert [x.rsplit("step ", 1)[1].split(" of")[0] for x in p] == ["0", "1", "2", "1"]
    assert st["img"]["ok"] and not st["img"]["hidden"]


def test_kernel_links_to_codegen(demo_site: Path):
    page = next((demo_site / "kernel").glob("*-r_32_32_32.html")).read_text()
    assert "../ctx/" in page and "r_32_32_32" in page and 'class="hl"' in page  # source highlighted at build time
    ctx = next((demo_site / "ctx").glob("*-r_32_32_32.html")).read_text()
    assert "../kernel/" in ctx and '<span class="nf">r_32_32_32</span>' in ctx  # the kernel's C source


def test_open_serves_trace_once(tmp_path: Path, demo_site: Path):
    import socket
    import time
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trace = demo_site / "trace.pftrace"
    proc = subprocess.Popen(["python", "-m", "vizexport", "open", str(trace), "--no-browser", "--port", str(port)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline() + proc.stdout.readline()
        assert f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/trace.pftrace" in line
        for _ in range(50):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/trace.pftrace") as r:
                    assert r.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
                    assert r.read() == trace.read_bytes()
                break
            except OSError:
                time.sleep(0.1)
        assert proc.wait(timeout=10) == 0  # served once, then exits
    finally:
        proc.kill()


def test_site_sqtt_and_pmc_tables(tmp_path: Path):
    """An AMD capture's site lists its launch with the §13 wave/issue figures and the PMC table; the kernel table
    holds device work only (not SQTT wave slices)."""
    from .conftest import FIXTURES
    f = FIXTURES / "sqtt" / "gfx1200" / "profile_gemm_run_0.pkl"
    if not f.exists():
        pytest.skip("sqtt fixtures not present")
    assert run_cli(f, "-o", tmp_path / "site/").returncode == 0
    html = (tmp_path / "site" / "index.html").read_text()
    row = html.split('<section id="sqtt">')[1].split("</tr>")[1]
    assert [c.split(">")[-1] for c in row.split("</td>")[:6]] == ["r_32_32_16_2 n1", "AMD", "4", "1024", "16", "960"]
    assert "SQC_LDS_BANK_CONFLICT" in html and "VALU utilization" in html
    kernels = html.split('id="top-kernels"')[1].split("</table>")[0]
    assert kernels.count("<tr>") == 4 and "wave" not in kernels  # header + 3 device rows


def test_site_packs_each_graph_once(demo_site: Path):
    """Beside a profile, the site keeps the first and last state of each rewrite, each distinct graph once,
    gzip-compressed in one script per context; every step's key is in its context's pack and decodes to an SVG."""
    import base64
    import gzip
    import xml.etree.ElementTree as ET
    folder = demo_site / "rewrites"
    m = json.loads((folder / "manifest.json").read_text())
    assert m["options"]["steps"] == "ends" and m["layout"].startswith("packs/") and not (folder / "svg").exists()
    decoded = 0
    for c in m["contexts"]:
        keys = {s["svg"] for r in c["rewrites"] for s in r["steps"] if s["svg"]}
        for r in c["rewrites"]:
            drawn = [s["index"] for s in r["steps"] if s["svg"]]
            replayed = [s["index"] for s in r["steps"] if s["nodes"] is not None]
            assert drawn == sorted({replayed[0], replayed[-1]}) if replayed else drawn == []
        if not keys:
            assert "pack" not in c
            continue
        text = (folder / c["pack"]).read_text()
        prefix = "(window.vizexportPacks = window.vizexportPacks || []).push("
        assert text.startswith(prefix) and text.endswith(");\n")
        pack = json.loads(text[len(prefix):-3])
        assert set(pack["index"]) == keys
        stream = gzip.decompress(base64.b64decode(pack["data"]))
        assert sum(n for _, n in pack["index"].values()) == len(stream)
        for offset, n in pack["index"].values():
            root = ET.fromstring(stream[offset:offset + n])
            assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.find(".//{*}g") is not None
            decoded += 1
    distinct = {s["svg"] for c in m["contexts"] for r in c["rewrites"] for s in r["steps"] if s["svg"]}
    assert decoded >= len(distinct) == m["summary"]["svg_files"] > 10  # a graph two contexts share is in both packs
