"""`vizexport show`: a rewrite context's rewrites as tinygrad's `viz.cli --list` prints them, and one rewrite replayed
match by match (pattern locations, the diff of each matched subgraph and its replacement, the graphs it goes
through) on the sample and on every fixture's rewrites trace."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import vizexport
from vizexport.graphs.diff import pretty
from vizexport.graphs.show import MAX_LINES, context_text, rewrite_text

from .conftest import fixture_params, run_cli

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"

# tinygrad 0.14.0's own `python -m tinygrad.viz.cli -s NULL r_32_32_32 --list` on the sample: the first rewrites of the
# kernel's context, indented by depth, with their match counts
TINYGRAD_LIST = """View Base AST
multi_pm
early movement ops
load collapse
 reduce_collapse
split ranges
initial symbolic
simplify ranges
shift (1,) 32 unroll - 1
flatten range - 1
postopt symbolic - 4
expander - 2
remove reduces - 2
add local buffers
add gpudims
*** expand broadcast / add loads - 9
devectorize2 - 51
 reshape
early symbolic - 32
memory coalescing - 34
add images - 37
extra symbolic
lower all index dtypes - 201
 graph_rewrite - 1""".splitlines()


@pytest.fixture(scope="module")
def log() -> vizexport.RewriteLog:
    return vizexport.load_rewrites(SAMPLE / "rewrites.pkl")


def test_context_lists_rewrites_as_tinygrad_does(log):
    view = vizexport.show_rewrites(log, "r_32")
    assert (view["context"], view["name"], len(view["rewrites"])) == (11, "r_32_32_32", 107)
    text = context_text(view).splitlines()
    assert text[0] == "context 11: r_32_32_32  (107 rewrites, 614 matches)"
    # each line: index, the name indented by depth, " - matches", then where the rewrite ran
    shown = [line[5:].split("  tinygrad/")[0] for line in text[1:len(TINYGRAD_LIST) + 1]]
    assert shown == TINYGRAD_LIST
    assert text[12] == "  11 expander - 2  tinygrad/codegen/__init__.py:322"
    assert vizexport.show_rewrites(log, "11") == view  # by index


def test_one_rewrite_match_by_match(log):
    view = vizexport.show_rewrites(log, "r_32", "^expander$")
    assert (view["index"], view["matches"], len(view["steps"])) == (11, 2, 2)
    first = view["steps"][0]
    assert first["loc"] == "tinygrad/codegen/__init__.py:86" and not first["error"]
    assert first["before"] == ["RANGE weakint (3, AxisType.UNROLL)", "  CONST weakint 32"]
    assert first["after"][0] == "STACK weakint" and len(first["after"]) == 33  # the unrolled range: 32 constants
    assert [d for d in first["diff"] if d.startswith("-") and not d.startswith("---")] == [
        "-" + x for x in first["before"]]
    assert view["input"][0] == "SINK r_32_32_32 (1 opts) tag=1" and view["final"] != view["input"]
    text = rewrite_text(view).splitlines()
    assert text[0] == ("context 11: r_32_32_32 · rewrite 11: expander  (2 matches, ran at "
                       "tinygrad/codegen/__init__.py:322)")
    assert "match 1/2  tinygrad/codegen/__init__.py:86  785.9 µs" in text
    assert "-RANGE weakint (3, AxisType.UNROLL)" in text
    assert "\x1b[" not in "\n".join(text) and "\x1b[31m-RANGE" in rewrite_text(view, color=True)


def test_cli_text_json_and_errors():
    r = run_cli("show", SAMPLE / "rewrites.pkl", "-s", "r_32", "-i", "11")
    assert r.returncode == 0 and r.stdout.startswith("context 11: r_32_32_32 · rewrite 11: expander")
    data = json.loads(run_cli("show", SAMPLE / "rewrites.pkl", "-s", "r_32", "-i", "11", "--json").stdout)
    assert data["steps"][0]["loc"] == "tinygrad/codegen/__init__.py:86"
    for args, message in ((("-s", "E_4_4"), "3 contexts match 'E_4_4' (3 E_4_4, 4 E_4_4, 5 E_4_4); give an index"),
                          (("-s", "99"), "no context 99 (there are 20)"),
                          (("-s", "nothing like this"), "no context matches 'nothing like this'"),
                          (("-s", "11", "-i", "graph_rewrite"), "context 11: 68 rewrites match 'graph_rewrite'"),
                          (("-s", "(("), "bad context regular expression '(('")):
        r = run_cli("show", SAMPLE / "rewrites.pkl", *args)
        assert r.returncode == 1 and not r.stdout and message in r.stderr, r.stderr
    r = run_cli("show", SAMPLE / "profile.pkl", "-s", "0")
    assert r.returncode == 1 and "a profile, not a rewrites trace" in r.stderr


@pytest.mark.parametrize("path", fixture_params("tinygrad/*/rewrites.pkl"))
def test_the_busiest_rewrite_of_each_fixture(path: Path):
    """Every release's trace: the rewrite with the most matches replays step by step, each match a diff of what it
    matched and what replaced it, and the graph it leaves is the last step's."""
    log = vizexport.load_rewrites(path)
    ci, ri, rw = max(((ci, ri, rw) for ci, c in enumerate(log.contexts) for ri, rw in enumerate(c.rewrites)),
                     key=lambda x: sum(m.after is not None for m in x[2].matches))
    view = vizexport.show_rewrites(log, str(ci), str(ri))
    real = sum(m.after is not None for m in rw.matches)
    assert view["matches"] == real > 5 and len(view["steps"]) == real
    assert all(not s["error"] and s["diff"] and s["before"] and s["after"] for s in view["steps"])
    graphs = vizexport.step_graphs(log)
    session = graphs.session()
    rep = session.replay(rw)
    assert view["final"] == pretty(session.nodes, rep.final, MAX_LINES)
    assert view["input"] == pretty(session.nodes, rep.steps[0].sink, MAX_LINES)
    assert len(rewrite_text(view).splitlines()) > 3 * real


def test_show_without_a_context_lists_them():
    """`show REWRITES` lists every context (the index -s takes, name, rewrites, matches), without replaying; each row
    agrees with that context's own view."""
    path = SAMPLE / "rewrites.pkl"
    listed = json.loads(run_cli("show", path, "--json").stdout)["contexts"]
    log = vizexport.load_rewrites(path)
    assert [c["name"] for c in listed] == [c.key.name for c in log.contexts] and len(listed) == 20
    for row in listed[:4]:
        one = json.loads(run_cli("show", path, "-s", str(row["index"]), "--json").stdout)
        assert one["name"] == row["name"] and len(one["rewrites"]) == row["rewrites"]
        assert sum(r["matches"] for r in one["rewrites"]) == row["matches"]
    text = run_cli("show", path)
    assert text.returncode == 0 and text.stdout.splitlines()[0].startswith("20 contexts")
    assert "   3 E_4_4  (43 rewrites, 68 matches)" in text.stdout.splitlines()


def test_show_a_rewrite_needs_its_context():
    r = run_cli("show", SAMPLE / "rewrites.pkl", "-i", "0")
    assert r.returncode == 2 and r.stderr.startswith("vizexport show: -i/--rewrite needs -s/--ctx")
