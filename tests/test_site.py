"""The static site, checked in a real browser (headless Chromium via playwright-core, as perfetto-check installs)."""
from __future__ import annotations

import functools
import html as html_lib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from markupsafe import escape as html_escape

import vizexport

from .browser import viewer
from .conftest import ROOT, TPQ_HOME, needs_dot, objdump_missing, run_cli

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
    kernel_rows = (demo_site / "report.html").read_text().split('<section id="kernels">')[1].count("<tr><td>")
    assert len([k for k in report["kernels"] if k[1].startswith("kernel/")]) >= kernel_rows > 5  # every kernel row
    followed = report["followed"]  # the first kernel's name leads to that kernel's page
    assert followed["url"].startswith((demo_site / "kernel").as_uri() + "/")
    assert followed["h1"].split()[0] == followed["name"].split(" [")[0]
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


def _cells(html: str, section: str, col: int) -> list[str]:
    """Column `col` of each row of a section's table, as HTML."""
    body = html.split(f'<section id="{section}">')[1].split("</section>")[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row)[col] for row in re.findall(r"<tr>(<td.*?)</tr>", body)]


def test_report_and_diff_pages_link_kernels(tmp_path: Path):
    """On the site, every kernel name in the report and the diff links to an existing page of that kernel (relative,
    as from file://), the kernel tables row by row, each name of a call site's kernels; the same report and diff as
    files of their own link nothing."""
    profile = SAMPLE / "profile.pkl"
    site = tmp_path / "site"
    r = run_cli(profile, SAMPLE / "rewrites.pkl", "--baseline", profile, "-o", f"{site}/")
    assert r.returncode == 0, r.stderr
    linked = 0
    columns = {"report.html": (("kernels", 0), ("peak", 0), ("gaps", 3), ("gaps", 4), ("call-sites", 5)),
               "diff.html": (("kernels", 0),)}
    for page, sections in columns.items():
        html = (site / page).read_text()
        links = re.findall(r'<a href="(kernel/[^"]+)">([^<]+)</a>', html)
        for href, name in links:
            target = site / href
            assert target.exists(), href
            h1 = re.search(r"<h1>(.*?) <span", target.read_text()).group(1)
            assert html_lib.unescape(h1) == html_lib.unescape(name).split(" [")[0], (href, name)
        for section, col in sections:
            cells = _cells(html, section, col)
            assert cells and all(c.startswith('<a href="kernel/') for c in cells), (page, section, col)
            assert all(c.count("<a ") == c.count(", ") + 1 for c in cells)  # each name of a list, linked
        linked += len(links)
    assert linked > 40
    for cmd in ("report", "diff"):
        args = (profile,) if cmd == "report" else (profile, profile)
        out = tmp_path / f"{cmd}.html"
        assert run_cli(cmd, *args, "-o", out).returncode == 0
        main = out.read_text().split("<main>")[1]
        assert "<a " not in main and "r_32_32_32" in main  # the names, as text


def test_same_named_contexts_told_apart(train_site: Path):
    """Six codegen contexts named E_2 (tinygrad 0.14+ names them after their kernel): each is listed, titled and
    linked from its kernel page with the program it made (the key's first 8 hex digits, as from the pickle) and its
    index; contexts of a name of their own keep it as it is."""
    contexts = vizexport.load_rewrites(train_site.parent / "rewrites.pkl").contexts  # as the fixture unpacked it
    index = (train_site / "index.html").read_text()
    listed = dict(re.findall(r'<li><a href="(ctx/[^"]+)">([^<]+)</a>', index))
    assert len(listed) == len(contexts) and len(set(listed.values())) == len(contexts)  # none alike
    e2 = {page: label for page, label in listed.items() if label.startswith("E_2 ")}
    assert len(e2) == 6
    for page, label in e2.items():
        n = int(page.split("/")[1].split("-")[0])
        key = next(k.hex() for k in contexts[n].key.keys if isinstance(k, bytes))
        assert label == f"E_2 [{key[:8]}] · #{n}"
        html = (train_site / page).read_text()
        assert f"<h1>{label}</h1>" in html and f"<title>{label} · vizexport</title>" in html
    assert listed[next(p for p in listed if p.endswith("-E_256_2.html"))] == "E_256_2"
    codegen = [re.search(r'Codegen</dt><dd><a href="\.\./(ctx/[^"]+)">([^<]+)</a>', p.read_text())
               for p in (train_site / "kernel").glob("*.html")]
    assert {m.group(1): m.group(2) for m in codegen if m}.items() <= listed.items()
    assert sum(1 for m in codegen if m and m.group(1) in e2) >= 1


def test_context_labels_stay_sanitized(tmp_path: Path):
    """Two contexts given one hostile name (markup, a terminal escape, a bidi override) are told apart by index, and
    the name is shown escaped in the list, the page's title and its heading."""
    graphs = _sample_graphs()
    hostile = "<b>E_2</b>\x1b[31m\u202e"
    quiet = [n for n, c in enumerate(graphs.contexts) if not any(isinstance(k, bytes) for k in c.key.keys)][:2]
    assert len(quiet) == 2  # contexts that made no program: told apart by index alone
    for n in quiet:
        graphs.contexts[n].key.name = hostile
    from vizexport.site import Pages, build_site
    build_site(tmp_path, Pages(graphs=graphs))
    index = (tmp_path / "index.html").read_text()
    shown = "&lt;b&gt;E_2&lt;/b&gt;\\x1b[31m\\u202e"
    for n in quiet:
        assert f">{shown} · #{n}</a>" in index
        page = next((tmp_path / "ctx").glob(f"{n}-*.html")).read_text()
        assert f"<h1>{shown} · #{n}</h1>" in page and f"<title>{shown} · #{n} · vizexport</title>" in page
    assert "\x1b" not in index and "\u202e" not in index and "<b>E_2" not in index


def test_open_serves_trace_once(tmp_path: Path, demo_site: Path):
    import socket
    import time
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trace = demo_site / "trace.pftrace"
    proc = subprocess.Popen([sys.executable, "-m", "vizexport", "open", str(trace), "--no-browser", "--port",
                             str(port)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
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
    missing = objdump_missing("gfx1201")
    if not missing:  # the program's own code, disassembled for gfx1201
        listing = page.split('<pre class="listing" id="disassembly">')[1].split("</pre>")[0].splitlines()
        assert len(listing) == 203 and listing[0] == "0x000000001700  s_load_b128 s[4:7], s[0:1], 0x0"
        assert "0x000000001888  s_endpgm" in listing and listing[-1].endswith("s_code_end")  # .text padding
        assert 'id="no-disassembly"' not in page
    else:  # the page says why there is none (an old LLVM: tests/test_objdump.py)
        assert 'id="disassembly"' not in page and f"{html_escape(missing)}.</p>" in page


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


def _viewbox(view: dict) -> list[float]:
    return [float(x) for x in view["viewBox"].split()]


def test_step_viewer_zooms_pans_and_fits(train_site: Path):
    """The biggest graph of a training run's biggest context (400 drawn boxes) opens fitted: the SVG's viewBox holds
    the whole graph and has the box's shape. The wheel zooms in around the pointer (the graph point under it stays),
    a drag pans by its length, F fits again, + zooms, another step keeps the chosen view, 1:1 shows a point as 4/3 px.
    """
    if not viewer.have_browser():
        pytest.skip("headless Chromium + playwright-core not installed")
    got = viewer.drive(_largest_context(train_site), {"zoom": True, "shot": str(SHOTS / "zoom.png")})
    z = got["zoom"]
    assert got["errors"] == [] and z["biggest"]["nodes"] == 400
    fitted, (w, h) = z["fitted"], z["box"]
    x, y, vw, vh = _viewbox(fitted)
    b = fitted["bounds"]
    assert fitted["auto"] and fitted["level"].startswith("fit, ") and fitted["scale"] < 0.5  # a big graph, shrunk
    assert x <= b["x"] and y <= b["y"] and x + vw >= b["x"] + b["w"] - 0.01 and y + vh >= b["y"] + b["h"] - 0.01
    assert vw / vh == pytest.approx(w / h) and max(b["w"] * fitted["scale"] - w, b["h"] * fitted["scale"] - h) \
        == pytest.approx(0, abs=0.01)  # fits exactly in one direction
    wheel = z["wheel"]
    assert wheel["scale"] > 1.5 * fitted["scale"] and not wheel["auto"] and _viewbox(wheel) != _viewbox(fitted)
    assert wheel["after"] == pytest.approx(wheel["before"])  # zoomed around the pointer
    dragged = _viewbox(z["dragged"])  # the mouse moved 120 px left, 60 up: the graph with it
    assert dragged[0] - _viewbox(wheel)[0] == pytest.approx(120 / wheel["scale"])
    assert dragged[1] - _viewbox(wheel)[1] == pytest.approx(60 / wheel["scale"])
    assert z["fit"]["viewBox"] == fitted["viewBox"] and z["fit"]["auto"]
    assert z["plus"]["scale"] == pytest.approx(1.25 * fitted["scale"])
    assert z["next"]["step"] != z["plus"]["step"] and z["next"]["viewBox"] == z["plus"]["viewBox"]
    assert z["actual"]["scale"] == pytest.approx(4 / 3) and z["actual"]["level"] == "100%"
    assert _viewbox(z["actual"])[2] == pytest.approx(w * 3 / 4)


def _read_pack(data: bytes) -> dict:
    """A pack's header and its columns as lists, read as steps.js reads them (packs.py's docstring): each column's
    bytes in planes, lowest bytes first."""
    size = int.from_bytes(data[:4], "little")
    pack = json.loads(data[4:4 + size])
    at = 4 + size
    for name, kind, count in pack.pop("columns"):
        at += -at % 4
        width = {"int8": 1, "int16": 2, "int32": 4}[kind]
        planes = np.frombuffer(data, np.uint8, count * width, at).reshape(width, count)  # byte b of every value
        pack[name] = np.ascontiguousarray(planes.T).view(f"<i{width}").ravel().tolist()
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
    it, in order, each step's root, matched node and replacement as the replay has them, and its nodes' sources
    decode to the replay's own."""
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
        assert [(name, steps) for name, _, steps in pack["rewrites"]] == [(r.name, len(r.matches) + 1)
                                                                          for r in c.rewrites]
        session = graphs.session()
        steps = [s for rw in c.rewrites for s in session.replay(rw, changes=False).steps]
        for column, field in (("sink", "sink"), ("before", "before"), ("after", "after")):  # running sums
            want = [-1 if getattr(s, field) is None else getattr(s, field) for s in steps]
            assert np.cumsum(pack[column]).tolist() == want, column
        assert len(pack["seconds"]) == len(steps) and [i for i, _ in pack["errors"]] == [
            i for i, s in enumerate(steps) if s.error is not None]
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


@needs_dot
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
