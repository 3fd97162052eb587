"""Names from a pull request's profile are data: through every human-facing output (terminal, CI log, Markdown,
HTML, plot labels) they cannot move the cursor, set a title, print a link, start a GitHub Actions workflow command,
add a heading, image, link, HTML or mention to a comment, or make matplotlib parse math; a name of 29 KB is shown
bounded. The machine-facing outputs (.pftrace, Chrome JSON, CSV, --json) keep the real text."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from markdown_it import MarkdownIt

from vizexport.limits import capped
from vizexport.pickles import load
from vizexport.text import MESSAGE_CHARS, NAME_CHARS, lines, markdown, plot_label, shown

from . import tinyfake as tf
from .conftest import ROOT
from .repickle import dumps

SAMPLE = ROOT / "vizexport" / "data" / "sample"
BIG = "$" + r"\frac{\alpha}{\beta_{2}}" * 1200 + "$"  # 29 KB of mathtext
KEPT = capped(BIG)  # what the model keeps of it (limits.NAME_CAP)
MATH = r"E_$\undefinedcmd$"
KERNELS = ["E_\n::error file=x::pwned", "E_cr\rX", "E_\x1b]0;title\x07", "E_\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",
           "E_\x1b[2K", "E_\x9b31m", "E_\u202eevil\u2028x", "![img](http://x/y.png)", "[link](http://x)", "@mention",
           MATH, "<b>html</b>", "  ::warning::x", "##[error]legacy", "E_a|b`c`*d*_e_~~f~~ $x$", BIG]
HOSTILE_DEVICE = "NULL:1\n\n## All good\n\n<!--"
DEVICES = ["NULL", HOSTILE_DEVICE, BIG]
MARKERS = ["\n::stop-commands::pwn\x1b[2K", "<!-- m2"]
CONTEXT = "ctx\n::add-mask::ctx\x1b]0;t\x07 @mention <b>x</b> $\\undefinedcmd$ \x9b2J\u202e"
TOP_KERNEL = "![img](http://x/y.png)"  # on the busiest device: the headline names both
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _profile(kernels: list[str], devices: list[str], markers: list[str], slow: float = 1.0) -> bytes:
    """Twelve launches of each kernel, round robin over the devices; the second device and TOP_KERNEL's slot longest
    (the headline's busiest device and top kernel); the first kernel `slow` times longer."""
    events, t = [], 1.0
    for rep in range(12):
        for i, k in enumerate(kernels):
            d = 2.0 + (1.0 if i % 3 == 1 else 0) + (2.0 if i == KERNELS.index(TOP_KERNEL) else 0) + 0.01 * rep
            d *= slow if i == 0 else 1.0
            events.append(tf.span(device=devices[i % 3], name=k, st=t, en=t + d))
            t += d + 0.5
        if rep in (2, 9):
            events.append(tf.point("marker", t, arg={"name": markers[rep > 2], "color": "red"}, device="TINY"))
    return tf.profile(*events)


def _benign(i: int, name: str) -> str:
    """A plain twin of a hostile name, of the same category (tinygrad's E_ prefix: elementwise)."""
    return f"E_{i}" if name.startswith("E_") else f"k{i}"


def _rewrites(name: str) -> bytes:
    """The bundled rewrites trace with its first context and first rewrite renamed."""
    trace, _ = load(SAMPLE / "rewrites.pkl")
    trace.keys[0].display_name = name
    trace.rewrites[0][0].name = name
    return dumps(trace)


def _write(folder: Path, kernels: list[str], devices: list[str], markers: list[str], context: str) -> dict:
    folder.mkdir()
    paths = {"p": folder / "profile.pkl", "slow": folder / "slow.pkl", "r": folder / "rewrites.pkl"}
    paths["p"].write_bytes(_profile(kernels, devices, markers))
    paths["slow"].write_bytes(_profile(kernels, devices, markers, slow=3.0))
    paths["r"].write_bytes(_rewrites(context))
    return {**paths, "dir": folder}


def run_cli(*args: object) -> SimpleNamespace:
    """As conftest.run_cli, but stdout and stderr exactly as written: text mode would turn a carriage return into a
    newline, the very byte these tests look for."""
    r = subprocess.run([sys.executable, "-m", "vizexport", *map(str, args)], capture_output=True, timeout=600)
    return SimpleNamespace(returncode=r.returncode, stdout=r.stdout.decode(), stderr=r.stderr.decode())


def _commands(f: dict) -> dict[str, list]:
    d = f["dir"]
    return {
        "top": ["top", f["p"], f["r"]], "top-wide": ["top", f["p"], f["r"], "--wide"],
        "top-between": ["top", f["p"], "--between", *MARKERS],
        "top-bad-device": ["top", f["p"], "--device", "nope"], "info": ["info", f["p"], f["r"]],
        "show": ["show", f["r"], "-s", "0"], "show-rewrite": ["show", f["r"], "-s", "0", "-i", "0"],
        "show-json": ["show", f["r"], "-s", "0", "--json"],
        "report": ["report", f["p"], f["r"]], "report-md": ["report", f["p"], "-o", d / "report.md"],
        "report-html": ["report", f["p"], "-o", d / "report.html"],
        "diff": ["diff", f["p"], f["slow"], "--fail-if-slower", "5"], "diff-md": ["diff", f["p"], f["slow"], "-o",
                                                                                  d / "diff.md"],
        "convert": ["convert", f["p"], f["r"], "-o", d / "trace.pftrace", "--no-compress"],
        "convert-json": ["convert", f["p"], "-o", d / "trace.json"], "csv": ["top", f["p"], "--csv"],
        "site": [f["p"], f["r"], "-o", f"{d / 'site'}/", "--baseline", f["slow"]],
    }


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    """Every command run once on the hostile profile, rewrites trace and base run."""
    f = _write(tmp_path_factory.mktemp("hostile") / "run", KERNELS, DEVICES, MARKERS, CONTEXT)
    return {**f, "runs": {k: run_cli(*args) for k, args in _commands(f).items()}}


@pytest.fixture(scope="module")
def benign(tmp_path_factory) -> dict:
    """The same runs' Markdown with plain names: what the comment's structure must be."""
    names = [_benign(i, k) for i, k in enumerate(KERNELS)]
    f = _write(tmp_path_factory.mktemp("benign") / "run", names, ["NULL", "NULL:1", "NULL:2"], ["m1", "m2"], "ctx")
    for key in ("report-md", "diff-md"):
        assert run_cli(*_commands(f)[key]).returncode == 0
    return f


def assert_safe_for_terminal(text: str, where: str) -> None:
    """No control character but newline and tab (and no bidi control or separator); no line a GitHub Actions runner
    reads as a workflow command."""
    assert not UNSAFE.findall(SGR.sub("", text)), (where, set(UNSAFE.findall(text)))
    for line in text.split("\n"):
        assert not SGR.sub("", line).lstrip().startswith("::"), (where, line[:200])
        assert "##[" not in line, (where, line[:200])


@pytest.mark.parametrize("key", ["top", "top-wide", "top-between", "top-bad-device", "info", "show", "show-rewrite",
                                 "show-json", "report", "report-md", "report-html", "diff", "diff-md", "convert",
                                 "convert-json", "site"])
def test_printed_text_is_safe(hostile: dict, key: str):
    r = hostile["runs"][key]
    assert r.returncode == {"top-bad-device": 1, "diff": 3}.get(key, 0), r.stderr
    assert_safe_for_terminal(r.stdout, f"{key} stdout")
    assert_safe_for_terminal(r.stderr, f"{key} stderr")
    assert "Traceback" not in r.stderr
    if key in ("report-md", "report-html", "diff-md", "convert", "convert-json", "site", "top-bad-device"):
        assert (r.stdout + r.stderr).count("\n") == 1, (r.stdout + r.stderr)[:500]  # one `wrote` or error line


def test_names_are_shown_escaped_not_dropped(hostile: dict):
    runs = hostile["runs"]
    top, report = runs["top-wide"].stdout, runs["report"].stdout  # whole names (120 columns cut them in the middle)
    for k in KERNELS[:7]:  # the control characters, as visible escapes
        assert shown(k) in top and shown(k)[:10] in runs["top"].stdout, k
    assert r"E_cr\x0dX" in report and r"E_\x1b]0;title\x07" in report and r"E_\x9b31m" in report
    info = runs["info"].stdout.splitlines()  # a newline in a name does not make a line of its own
    assert len(info) == 11 and info[4] == r"  NULL:1\x0a\x0a## All good\x0a\x0a<!-- range 60"
    # the markers info lists, escaped too
    assert info[7].startswith(r"    \x0a::stop-commands::pwn\x1b[2K  ×1") and info[8].startswith("    <!-- m2 ")
    assert r"  \x3a:warning::x" in top and r"#\x23[error]legacy" in top  # workflow commands, wherever the name is
    assert f"busiest {shown(HOSTILE_DEVICE)}" in runs["report-md"].stdout  # the `wrote` line's headline
    assert r"ctx\x0a::add-mask::ctx\x1b]0;t\x07 @mention" in runs["show"].stdout
    assert r"rewrite 0: ctx\x0a::add-mask::" in runs["show-rewrite"].stdout
    assert runs["diff"].stderr.startswith(r"vizexport: 1 kernel(s) significantly slower by more than 5%: "
                                          r"E_\x0a::error file=x::pwned on NULL (+")
    assert runs["top-between"].stdout.startswith("16 kernels")  # the markers matched their real names
    error = runs["top-bad-device"].stderr
    assert error.count("\n") == 1 and error.endswith(f"devices: {shown(KEPT)}, NULL, {shown(HOSTILE_DEVICE)})\n")
    assert len(error) < MESSAGE_CHARS


def test_long_names_are_bounded(hostile: dict):
    cut = f"… ({len(KEPT) - NAME_CHARS:,} more characters)"
    for key, held in (("top", KEPT), ("info", BIG)):  # top shows the timeline's name, info the profile's device
        out = hostile["runs"][key].stdout
        assert f"… ({len(held) - NAME_CHARS:,} more characters)" in out and BIG not in out
        assert max(map(len, out.splitlines())) < 3 * NAME_CHARS
    md = (hostile["dir"] / "report.md").read_text()
    assert markdown(BIG[:NAME_CHARS]) + cut in md and max(map(len, md.splitlines())) < 20 * NAME_CHARS


def _tokens(md: str) -> list:
    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    out = []
    for t in parser.parse(md):
        out.append(t)
        out += t.children or []
    return out


@pytest.mark.parametrize("name", ["report.md", "diff.md"])
def test_markdown_renders_names_as_text(hostile: dict, benign: dict, name: str):
    """CommonMark with HTML on: the comment has the structure the plain-named twin has (the same headings, tables
    and <details> blocks), no image, link, autolink or inline HTML, and the names as literal text."""
    md = (hostile["dir"] / name).read_text()
    assert_safe_for_terminal(md, name)
    tokens, plain = _tokens(md), _tokens((benign["dir"] / name).read_text())
    assert [t.type for t in tokens] == [t.type for t in plain]
    assert not [t for t in tokens if t.type in ("image", "link_open", "html_inline")]
    blocks = [t.content for t in tokens if t.type == "html_block"]
    assert all(re.fullmatch(r"<details><summary><b>[A-Za-z ]+</b></summary>\n|</details>\n", b) for b in blocks)
    assert "@mention" not in md and "@&#8203;mention" in md
    text = "".join(t.content for t in tokens if t.type == "text").replace("\u200b", "")
    for k in [*KERNELS[:-1], HOSTILE_DEVICE] if name == "report.md" else [KERNELS[0], TOP_KERNEL, MATH]:
        assert shown(k).strip() in text, k  # a table cell's spaces are trimmed


def test_markdown_headline_is_one_paragraph(hostile: dict):
    """The device name ending in a heading and an open HTML comment stays inside the headline's paragraph."""
    md = (hostile["dir"] / "report.md").read_text()
    tokens = _tokens(md)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "All good" not in " ".join(headings) and headings[0].startswith("Run report: ")
    inline = next(t for t in tokens if t.type == "inline" and t.content.startswith("192 launches"))
    rendered = "".join(c.content for c in inline.children).replace("\u200b", "")
    assert [c.type for c in inline.children] == ["text"]
    assert f"busiest {shown(HOSTILE_DEVICE)}" in rendered and f"top kernel {shown(TOP_KERNEL)} " in rendered


def test_html_pages(hostile: dict):
    """Pages hold no control character; a name is text (autoescaped); the plots show the mathtext names as they are
    (no math parsed, so no failure), cut to a label's length."""
    pages = [hostile["dir"] / "report.html", *sorted((hostile["dir"] / "site").rglob("*.html"))]
    assert len(pages) > 10
    for page in pages:
        html = page.read_text()
        assert not UNSAFE.findall(html), page
        assert "<b>html</b>" not in html and "<b>x</b>" not in html and "<!--" not in html, page
    report = (hostile["dir"] / "site" / "report.html").read_text()
    svgs = "".join(re.findall(r"<svg.*?</svg>", report, re.S))
    assert report.count("<svg") >= 4 and MATH in svgs and plot_label(BIG, 48) in svgs
    assert "&lt;b&gt;html&lt;/b&gt;" in report and r"E_\x1b]0;title\x07" in report
    assert (hostile["dir"] / "report.html").read_text().count("<svg") == report.count("<svg")


def test_machine_outputs_keep_the_real_text(hostile: dict):
    data = (hostile["dir"] / "trace.pftrace").read_bytes()
    for k in KERNELS[:-1]:
        assert k.encode() in data, k
    events = json.loads((hostile["dir"] / "trace.json").read_text())
    names = {e.get("name") for e in (events["traceEvents"] if isinstance(events, dict) else events)}
    assert {capped(k) for k in KERNELS} <= names and BIG not in names
    table = hostile["runs"]["csv"].stdout  # not parsed: Python's csv writer leaves a lone \r unquoted
    assert table.startswith("device,name,") and all(capped(k) in table for k in [*KERNELS, HOSTILE_DEVICE])
    view = json.loads(hostile["runs"]["show-json"].stdout)
    assert view["name"] == CONTEXT and view["rewrites"][0]["name"] == CONTEXT


# ---- the sanitizer itself ----

@pytest.mark.parametrize("s", ["\x00\x07\x08\x0b\x0c\x0d\x1b\x7f", "\x80\x85\x9b\x9f", "\u202a\u202e\u2066\u2069\u200f",
                               "\u2028\u2029", "\ud800\udfff", "a\nb\tc"])
def test_shown_leaves_no_control(s: str):
    out = shown(s)
    assert not UNSAFE.findall(out) and "\n" not in out and "\t" not in out and out.isascii()
    out.encode()  # lone surrogates are escapes too: any output can encode it
    assert out.count("\\") == len(s) - (s.count("a") + s.count("b") + s.count("c"))


def test_lines_breaks_workflow_commands():
    block = "ok\n  ::error::x\n\x1b[2m::y\x1b[0m\nz ##[warning]q\r::add-mask::s\x1b]0;t\x07\u00a0::notice::n"
    out = lines(block)
    assert out.split("\n") == ["ok", r"  \x3a:error::x", "\x1b[2m\\x3a:y\x1b[0m",
                               r"z #\x23[warning]q\x0d::add-mask::s\x1b]0;t\x07" + "\u00a0::notice::n"]
    assert lines(out) == out  # idempotent
    assert lines("\u00a0::x") == "\u00a0\\x3a:x"  # .NET trims non-breaking spaces too


INLINE = ["*em* _em_ **b** ~~s~~ `code` $x^2$", "[a](http://x) ![i](http://x/i.png) [r][1] [^1]", "<http://x> <b>",
          "<!-- c --> &lt; &#64;user &amp;", "@user a@b.co #12 GH-1 http://x.y/z www.x.com", "a|b\\|c", "\\*"]
BLOCK_STARTS = ["# h", "## h", "> q", "- x", "+ x", "* x", "1. x", "2) x", "===", "---", "```", "~~~", "<div>"]


@pytest.mark.parametrize("s", INLINE + BLOCK_STARTS)
def test_markdown_is_literal(s: str):
    """Rendered with HTML on, the escaped text is one paragraph of plain text: exactly the shown name."""
    tokens = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).parse(markdown(s, start=True))
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], s
    assert [c.type for c in tokens[1].children] == ["text"], s
    assert tokens[1].children[0].content.replace("\u200b", "") == shown(s)
    assert "@user" not in markdown(s) and not re.search(r"[a-z]://|www\.|(?<!&)#\d", markdown(s))  # GitHub links these


def test_markdown_keeps_plain_names():
    """Kernel names and our numbers pass unchanged (underscores between letters and digits cannot make emphasis)."""
    for s in ("r_32_16_4n1", "E_4_4", "NULL:1", "AMD:SDMA:0", "+100.0%", "1.5 ms", "copy 4096, NULL <- CPU"):
        assert markdown(s) == s.replace("<", "&lt;")


def test_plots_never_parse_math():
    """matplotlib would fail on an unknown command and take minutes on a long formula: labels are text."""
    from vizexport.report.plots import _figure, _label, _svg
    fig, (ax,) = _figure(2.0)
    ax.barh([_label(MATH), _label(BIG), _label("E_\x1b[2K\x9b")], [1, 2, 3])
    ax.set(title=_label(BIG))
    svg = _svg(fig, "math")
    assert MATH in svg and _label(BIG) in svg and r"E_\x1b[2K\x9b" in svg and len(_label(BIG)) == 48


def test_lone_surrogates_are_replaced_where_text_is_kept(tmp_path: Path):
    """A pickle can hold a lone surrogate, which no output can encode: the model keeps U+FFFD in its place, so every
    writer works, and what a person reads shows the replacement."""
    data = tf.profile(tf.span(name="E_\ud800x", st=1.0, en=2.0), tf.point("m\udfff", 1.5))
    (prof := tmp_path / "profile.pkl").write_bytes(data)
    for out in ("t.pftrace", "t.json", "site/"):
        r = run_cli(prof, "-o", tmp_path / out)
        assert r.returncode == 0 and r.stderr == "", (out, r.stderr)
    events = json.loads((tmp_path / "t.json").read_text())
    names = {e.get("name") for e in (events["traceEvents"] if isinstance(events, dict) else events)}
    assert "E_\ufffdx" in names
    top = run_cli("top", prof)
    assert top.returncode == 0 and "E_\ufffdx" in top.stdout
