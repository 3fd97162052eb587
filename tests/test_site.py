"""The static site, checked in a real browser (headless Chromium via playwright-core, as perfetto-check installs)."""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import vizexport

from .browser import viewer
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
    """(device, row label) → (count, total ns) straight from the pickle's range events and graph entries: one row
    per program (profile_key), its key's first 8 hex digits beside names that several programs share."""
    out: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for s in vizexport.load_profile(SAMPLE / "profile.pkl").spans:
        if s.device not in ("TINY", "USER", "GC") and s.en is not None and s.en > s.st:
            row = out[(s.device, s.key.name, s.profile_key.hex() if s.profile_key else "")]
            row[0] += 1
            row[1] += s.en - s.st
    names = Counter((dev, name) for dev, name, _ in out)
    return {(dev, f"{name} [{key[:8]}]" if names[(dev, name)] > 1 else name): tuple(v)
            for (dev, name, key), v in out.items()}


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
    for shot in ("index.png", "kernel.png", "steps.png", "report.png"):
        assert (SHOTS / shot).stat().st_size > 10_000
    report = result["answers"]["report.html"]  # the run report: its plots drawn, its kernels sortable
    assert len(report["plots"]) >= 5 and all(p["width"] > 300 for p in report["plots"])
    assert report["sorted"] == sorted(report["sorted"], reverse=True)
    assert result["stepper"]["position"].startswith("0. ")  # the first context page's viewer drew its first step


def test_kernel_links_to_codegen(demo_site: Path):
    """A kernel page shows its program's source (highlighted at build time) and UOp list and links its codegen
    context, whose page links back (and leaves the source to the kernel page)."""
    page = next((demo_site / "kernel").glob("*-r_32_32_32.html")).read_text()
    assert "../ctx/" in page and '<span class="nf">r_32_32_32</span>' in page  # the kernel's C source, highlighted
    uops = page.split('<pre class="listing" id="uops">')[1].split("</pre>")[0].splitlines()
    assert uops[0].startswith("   0 Ops.") and uops[-1].split()[1] == "Ops.SINK"
    ctx = next((demo_site / "ctx").glob("*-r_32_32_32.html")).read_text()
    assert "../kernel/" in ctx and 'class="nf"' not in ctx


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
                ui = {"Origin": "https://ui.perfetto.dev"}  # the server answers the UI only
                with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/trace.pftrace",
                                                                   headers=ui)) as r:
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
    page = next((tmp_path / "site" / "kernel").glob("*-r_32_32_16_2.html")).read_text()
    from vizexport.sqtt.code import objdump_candidates
    if objdump_candidates():  # the program's own code, disassembled for gfx1200
        listing = page.split('<pre class="listing" id="disassembly">')[1].split("</pre>")[0].splitlines()
        assert len(listing) == 203 and listing[0] == "0x000000001700  s_load_b128 s[4:7], s[0:1], 0x0"
        assert "0x000000001888  s_endpgm" in listing and listing[-1].endswith("s_code_end")  # .text padding


def _context_page(site: Path, name: str) -> tuple[int, Path]:
    page = next((site / "ctx").glob(f"*-{name}.html"))
    return int(page.name.split("-")[0]), page


def _sample_graphs():
    return vizexport.step_graphs(vizexport.load_rewrites(SAMPLE / "rewrites.pkl"))


def test_step_viewer_draws_what_python_draws(demo_site: Path):
    """The browser writes the same DOT as the SVG export (graphs/dot.py) and the same diff (graphs/diff.py), byte for
    byte, for every step of the sample's largest codegen context (721 steps; capped graphs, folded constants,
    created and rebuilt nodes, the replaced node's ghost)."""
    if not viewer.have_browser():
        pytest.skip("headless Chromium + playwright-core not installed")
    ctx, page = _context_page(demo_site, "r_32_32_32")
    graphs = _sample_graphs()
    pairs = [(r, s) for r, rw in enumerate(graphs.contexts[ctx].rewrites) for s in range(len(rw.matches) + 1)]
    got = viewer.drive(page, {"dots": pairs})
    assert got["errors"] == [] and len(got["dots"]) == len(pairs) == 721
    want = viewer.python_steps(graphs, ctx, pairs)
    mismatched = [(d["r"], d["s"]) for d, (dot, _) in zip(got["dots"], want, strict=True) if d["dot"] != dot]
    assert mismatched == []
    assert [d["diff"] for d in got["dots"]] == [diff for _, diff in want]
    assert sum('class="created"' in d["dot"] for d in got["dots"] if d["dot"]) > 300  # really highlighted steps
    assert sum("showing 400 of" in d["dot"] for d in got["dots"] if d["dot"]) > 10  # and capped ones


@pytest.fixture(scope="module")
def train_site(tmp_path_factory) -> Path | None:
    """The site of a small training run (the corpus's master MLP: 3 Adam steps and a JIT'd inference)."""
    import gzip
    folder = ROOT / "tests" / "data" / "corpus" / "master-null-train"
    if not folder.exists():
        pytest.skip("corpus not present")
    tmp = tmp_path_factory.mktemp("train")
    for name in ("profile.pkl", "rewrites.pkl"):
        (tmp / name).write_bytes(gzip.decompress((folder / f"{name}.gz").read_bytes()))
    r = run_cli(tmp / "profile.pkl", tmp / "rewrites.pkl", "-o", tmp / "site/")
    assert r.returncode == 0, r.stderr
    return tmp / "site"


def _largest_context(site: Path) -> Path:
    return max((site / "ctx").glob("*.html"), key=lambda p: int(p.read_text().split(" steps")[0].split()[-1]
                                                                 .replace(",", "")) if " steps" in p.read_text()
               else 0)


def test_random_steps_show_their_graph(train_site: Path):
    """200 random steps of a training run's biggest context: each ends up shown with its own graph — the SVG holds
    every new node of that step, created ones with class "created", rebuilt ones "rebuilt"."""
    if not viewer.have_browser():
        pytest.skip("headless Chromium + playwright-core not installed")
    got = viewer.drive(_largest_context(train_site), {"random": 200, "seed": 7, "maxNodes": 400})
    assert got["errors"] == [] and len(got["random"]) == 200
    assert len({(x["r"], x["s"]) for x in got["random"]}) > 150
    for x in got["random"]:
        assert x["boxStep"] == x["key"] == f"{x['r']}:{x['s']}" and not x["pending"], x
        assert set(x["created"]) <= {"ok"} and set(x["rebuilt"]) <= {"ok"}, x
    assert sum(len(x["created"]) for x in got["random"]) > 100


def test_fast_keys_leave_no_stale_picture(train_site: Path):
    """Twelve → presses without waiting: the header and the picture both end on step 12, drawn for that step."""
    if not viewer.have_browser():
        pytest.skip("headless Chromium + playwright-core not installed")
    got = viewer.drive(_largest_context(train_site), {"keys": 12, "shot": str(SHOTS / "keys.png")})
    k = got["keys"]
    assert got["errors"] == [] and " · step 12 of " in k["position"]
    assert k["key"] == f"{k['rewrite']}:12" == k["boxStep"] and not k["pending"]
    assert set(k["created"]) <= {"ok"} and set(k["rebuilt"]) <= {"ok"}
    lists = got["lists"]  # numbers stay readable (in full, in order)
    assert lists["steps"] > 150 and lists["rewrites"] > 50 and lists["clipped"] == 0 and lists["inOrder"]


def _read_pack(data: bytes) -> dict:
    """A pack's header and its columns as lists, read as steps.js reads them (packs.py's docstring)."""
    size = int.from_bytes(data[:4], "little")
    pack = json.loads(data[4:4 + size])
    at = 4 + size
    for name, kind, count in pack.pop("columns"):
        at += -at % 4
        width = {"int8": 1, "int16": 2, "int32": 4}[kind]
        pack[name] = np.frombuffer(data, f"<i{width}", count, at).tolist()
        at += count * width
    assert at + -at % 4 == len(data)  # nothing after the last column
    return pack


def _pack_sources(pack: dict) -> list[tuple[int, ...]]:
    """Every node's sources, decoded as steps.js decodes them (packs.py's docstring)."""
    out: list[tuple[int, ...]] = []
    at, own = 0, iter(pack["nsrc"])
    for i, back in enumerate(pack["origin"]):
        count = len(out[i - back]) if back else next(own)
        d = pack["src"][at:at + count]
        at += count
        out.append(tuple(i - x if x or not back else o for x, o in zip(d, out[i - back] if back else d, strict=True)))
    assert at == len(pack["src"]) and next(own, None) is None
    return out


def test_packs_hold_every_step(demo_site: Path):
    """Each context's pack (a gzip'd header and integer columns in a script) holds every rewrite and every step of
    it, in order, and its nodes' sources decode to the replay's own."""
    import base64
    import gzip
    graphs = _sample_graphs()
    packs = copies = 0
    for n, c in enumerate(graphs.contexts):
        script = demo_site / "rewrites" / "packs" / f"{n}.js"
        if not c.rewrites:
            assert not script.exists()
            continue
        head = f'(window.vizexportPacks = window.vizexportPacks || {{}})[{n}] = "'
        text = script.read_text()
        assert text.startswith(head) and text.endswith('";\n')
        pack = _read_pack(gzip.decompress(base64.b64decode(text[len(head):-3])))
        assert [(name, len(steps)) for name, _, steps in pack["rewrites"]] == [(r.name, len(r.matches) + 1)
                                                                               for r in c.rewrites]
        session = graphs.session()
        for rw in c.rewrites:
            session.replay(rw, changes=False)
        assert _pack_sources(pack) == session.nodes.src
        assert len(pack["look"]) == len(pack["origin"]) == len(session.nodes.src) > 0
        copies += sum(1 for x in pack["origin"] if x)
        packs += 1
    assert packs == sum(1 for c in graphs.contexts if c.rewrites) > 10 and copies > 1000


def test_site_needs_no_dot_and_svg_export_says_so(tmp_path: Path):
    """Without Graphviz on PATH: a site with a profile builds (the browser lays out); the rewrites-only SVG export
    ends in one line naming the output and the missing `dot`, exit 1, nothing written."""
    import sys
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    site = subprocess.run([sys.executable, "-m", "vizexport", str(SAMPLE / "profile.pkl"),
                           str(SAMPLE / "rewrites.pkl"), "-o", str(tmp_path / "site/")], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=False)
    assert site.returncode == 0, site.stderr
    assert len(list((tmp_path / "site" / "rewrites" / "packs").glob("*.js"))) > 10
    svg = subprocess.run([sys.executable, "-m", "vizexport", str(SAMPLE / "rewrites.pkl"), "-o",
                          str(tmp_path / "svg/")], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert svg.returncode == 1 and svg.stderr.count("\n") == 1 and "dot" in svg.stderr and "svg" in svg.stderr
    assert not (tmp_path / "svg").exists()


def test_rewrites_alone_are_svg_export_and_site(tmp_path: Path):
    """A rewrites trace alone: the folder is the SVG export (manifest, captioned step SVGs) and the site's pages."""
    r = run_cli(SAMPLE / "rewrites.pkl", "-o", tmp_path / "rw/")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "rw" / "manifest.json").read_text())
    svgs = [s["svg"] for c in m["contexts"] for rw in c["rewrites"] for s in rw["steps"] if s["svg"]]
    assert svgs and all((tmp_path / "rw" / p).exists() for p in svgs)
    assert (tmp_path / "rw" / "index.html").exists() and len(list((tmp_path / "rw" / "packs").glob("*.js"))) > 10
    ctx = next((tmp_path / "rw" / "ctx").glob("*-r_32_32_32.html")).read_text()
    assert 'src="../packs/' in ctx and "../static/steps.js" in ctx


def _pairs() -> list[tuple[str, Path, Path]]:
    """Every profile with its rewrites trace: the shared fixtures of each release and the corpus sets (gzip'd)."""
    from .conftest import FIXTURES
    out = [(d.name, d / "profile.pkl", d / "rewrites.pkl") for d in sorted((FIXTURES / "tinygrad").glob("*"))
           if (d / "profile.pkl").exists() and (d / "rewrites.pkl").exists()]
    corpus = ROOT / "tests" / "data" / "corpus"
    out += [(d.name, d / "profile.pkl.gz", d / "rewrites.pkl.gz") for d in sorted(corpus.glob("*"))
            if (d / "rewrites.pkl.gz").exists()]
    return out


PAIRS = _pairs()


@pytest.mark.parametrize("name,profile,rewrites", PAIRS, ids=[p[0] for p in PAIRS])
def test_kernel_page_source_is_each_launch_program(tmp_path: Path, name: str, profile: Path, rewrites: Path):
    """Every launch a kernel page lists was made from the source that page shows: the launch's codegen context found
    straight from the pickles (by its program key on 0.14+, else by name; the later context wins), compared with the
    page's highlighted source, launch by launch."""
    import gzip
    import html
    import re

    from vizexport.tinygrad.estimates import LaunchEstimates
    for p in (profile, rewrites):
        if p.suffix == ".gz":
            (tmp_path / p.stem).write_bytes(gzip.decompress(p.read_bytes()))
    prof = vizexport.load_profile(tmp_path / profile.stem if profile.suffix == ".gz" else profile)
    log = vizexport.load_rewrites(tmp_path / rewrites.stem if rewrites.suffix == ".gz" else rewrites)
    est = LaunchEstimates(log)
    expected: dict[tuple[int, int], set] = defaultdict(set)
    for s in prof.spans:
        if s.en is not None and s.en > s.st:
            ctx = est.lookup(s.profile_key, s.key.name)
            expected[(s.st, s.en - s.st)].add(ctx.source if ctx else None)
    site = tmp_path / "site"
    vizexport.build_site(site, prof, log, jobs=1)
    launches = with_source = 0
    for page in sorted((site / "kernel").glob("*.html")):
        text = page.read_text()
        block = re.search(r'<div class="source" id="source">(.*?)</div>', text, re.S)
        shown = html.unescape(re.sub(r"<[^>]+>", "", block.group(1))).strip() if block else None
        with_source += shown is not None
        rows = re.findall(r'<tr[^>]*><td data-v="(\d+)">[^<]*</td><td data-v="(\d+)">', text)
        assert rows, page.name
        for ts, dur in rows:
            want = {w.strip() if w else None for w in expected[(int(ts), int(dur))]}
            assert want and shown in want, (page.name, ts)
            launches += 1
    pages = len(list((site / "kernel").glob("*.html")))
    assert launches >= pages  # (0.10.x profiles and 0.11's NULL device hold no kernel launches)
    # a page shows source exactly when some launch has a codegen context with source (none in 0.14.0-hcq2, whose
    # profile comes from another run than its rewrites: no program key matches)
    assert bool(with_source) == any(v - {None} for v in expected.values())
