"""The layers hold by construction (docs/architecture.md): no import cycle anywhere in the package, the model
loads without any reader, writer or heavy dependency, and the package face is lazy. The layer contracts themselves
are pyproject.toml's [tool.importlinter], checked by `lint-imports` in CI."""
from __future__ import annotations

import json
import subprocess
import sys

import grimp
import pytest

import vizexport

from .conftest import ROOT

HEAVY = ("jinja2", "matplotlib", "graphviz", "pygments", "elftools", "scipy", "google.protobuf", "perfetto", "tqdm")
READERS = ("vizexport.pickles", "vizexport.tinygrad", "vizexport.sqtt", "vizexport.pma")
WRITERS = ("vizexport.perfetto", "vizexport.graphs", "vizexport.site", "vizexport.report", "vizexport.info",
           "vizexport.analysis", "vizexport.run", "vizexport.writers", "vizexport.api", "vizexport.cli")
MODEL = ("records", "timeline", "launchtable", "programs", "summary", "windows", "devices", "units", "walks", "errors",
         "output", "forks", "gcpause", "limits")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = stack[stack.index(v):]
                    del stack[stack.index(v):]
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
            elif w in stack:
                low[v] = min(low[v], index[w])
    return out


def test_cycle_finder_finds_a_cycle():
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c", "p.d"):
        g.add_module(m)
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        g.add_import(importer=a, imported=b)
    assert _cycles(g) == [["p.a", "p.b", "p.c"]]


def test_no_import_cycle_anywhere():
    """Every import, at module level or inside a function (grimp reads both): a cycle may only work by line order."""
    graph = grimp.build_graph("vizexport", cache_dir=None)  # nothing written into the tree
    assert len(graph.modules) > 80
    assert _cycles(graph) == []


def _loaded(*statements: str) -> list[str]:
    """The modules a fresh interpreter holds after the statements."""
    code = "; ".join([*statements, "import sys, json", "print(json.dumps(sorted(sys.modules)))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)


def _ours(mods: list[str]) -> set[str]:
    return {m for m in mods if m == "vizexport" or m.startswith("vizexport.")}


def _heavy(mods: list[str]) -> set[str]:
    return {m for m in mods for h in HEAVY if m == h or m.startswith(h + ".")}


@pytest.mark.parametrize(("module", "expected"), [
    ("vizexport", {"vizexport", "vizexport._version", "vizexport.lazy"}),
    ("vizexport.timeline", {"vizexport", "vizexport._version", "vizexport.lazy", "vizexport.timeline",
                            # leaves: the name cap (text: surrogates)
                            "vizexport.limits", "vizexport.errors", "vizexport.text",
                            "vizexport.launchtable"}),  # the model's launch table
    ("vizexport.records", {"vizexport", "vizexport._version", "vizexport.lazy", "vizexport.records",
                           "vizexport.devices"}),  # a leaf: which device strings are copy engines
])
def test_model_imports_alone(module: str, expected: set[str]):
    mods = _loaded(f"import {module}")
    assert _ours(mods) == expected
    assert _heavy(mods) == set()


def test_whole_model_loads_no_reader_writer_or_heavy_dependency():
    mods = _loaded(*(f"import vizexport.{m}" for m in MODEL))
    assert {f"vizexport.{m}" for m in MODEL} <= _ours(mods)
    assert {m for m in _ours(mods) if m.startswith(READERS + WRITERS)} == set()
    assert _heavy(mods) == set()


# what `vizexport top` never needs: the other commands' writers, the SQTT decoder, the replay, the report and diff
NOT_FOR_TOP = ("vizexport.site", "vizexport.report", "vizexport.graphs.export", "vizexport.graphs.render",
               "vizexport.history", "vizexport.sqtt", "vizexport.tinygrad.replay", "vizexport.analysis.report",
               "vizexport.analysis.diff", "vizexport.info", "vizexport.api")


@pytest.mark.parametrize("args", [["top", "{sample}/profile.pkl", "{sample}/rewrites.pkl", "--json"],
                                  ["top", "{sample}/profile.pkl", "--between", "jit step 1", "jit step 3"]])
def test_top_loads_only_its_own_modules(args: list[str]):
    """`vizexport top` is mostly its profile's load (issue 37): the parser defines the command given, and the Run and
    the writer registry import what they write with when they write; the table is the same as ever (test_top)."""
    sample = ROOT / "vizexport" / "data" / "sample"
    argv = [a.format(sample=sample) for a in args]
    mods = _loaded("import io, sys", "from vizexport import cli", "out, sys.stdout = sys.stdout, io.StringIO()",
                   f"code = cli.main({argv!r})", "table, sys.stdout = sys.stdout.getvalue(), out", "assert code == 0",
                   "assert 'E_' in table")
    assert {m for m in _ours(mods) if m.startswith(NOT_FOR_TOP)} == set()
    assert _heavy(mods) == set()
    assert {"vizexport.cli", "vizexport.run", "vizexport.writers", "vizexport.tinygrad.timeline"} <= _ours(mods)


def test_a_command_s_parser_defines_it_alone():
    """main parses with the given command's parser alone (its options name no other command's modules); --help has
    them all, in the same order."""
    from vizexport import cli
    assert list(cli.parser("top").commands) == ["top"]
    assert list(cli.parser().commands) == list(cli.SUBPARSERS) == ["convert", "info", "top", "show", "open", "report",
                                                                 "diff", "history", "demo"]
    assert set(cli.SUBPARSERS) == set(cli.COMMANDS)
    mods = _loaded("from vizexport import cli", "cli.parser('top').parse_args(['top', 'x.pkl', '--by', 'name'])")
    assert {m for m in _ours(mods) if m.startswith(("vizexport.history", "vizexport.site"))} == set()


def test_face_loads_a_name_s_module_on_first_use():
    mods = _loaded("import vizexport", "vizexport.Timeline", "from vizexport import InputError")
    assert _ours(mods) == {"vizexport", "vizexport._version", "vizexport.lazy", "vizexport.timeline",
                           "vizexport.errors", "vizexport.limits", "vizexport.text", "vizexport.launchtable"}
    mods = _loaded("import vizexport", "vizexport.load_profile")
    assert {"vizexport.api", "vizexport.tinygrad", "vizexport.perfetto"} <= _ours(mods)
    mods = _loaded("import vizexport", "vizexport.Run")
    assert {"vizexport.run", "vizexport.tinygrad"} <= _ours(mods) and "vizexport.writers" not in _ours(mods)


def test_face_names():
    assert set(vizexport.__all__) <= set(dir(vizexport))
    assert vizexport.summarize is vizexport.api.summarize and vizexport.Profile is vizexport.records.Profile
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        vizexport.nothing_here  # noqa: B018
    star: dict = {}
    exec("from vizexport import *", star)
    assert set(star) - {"__builtins__"} == set(vizexport.__all__)


def test_version_has_one_home():
    """Writers stamp the version from the leaf; pyproject.toml reads it from there (no second copy)."""
    from vizexport._version import __version__
    assert vizexport.__version__ == __version__ and __version__.count(".") == 2
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and 'attr = "vizexport._version.__version__"' in text
    assert f'"{__version__}"' not in text
