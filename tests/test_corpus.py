"""Pickles never seen before (tests/data/corpus, made by tools/make_corpus.py with every release that writes
profiles: JIT'd symbolic functions, multi-device copies, markers, DEBUG_GC/TRACEMETA=2, an Adam training step):
vizexport shows every figure that release's own viewer shows. tools/compare_corpus.py does the comparing."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from .conftest import ROOT

CORPUS = ROOT / "tests" / "data" / "corpus"
SETS = sorted(d for d in CORPUS.iterdir() if (d / "figures.json.gz").exists()) if CORPUS.is_dir() else []


def _tool():
    spec = importlib.util.spec_from_file_location("compare_corpus", ROOT / "tools" / "compare_corpus.py")
    mod = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


COMPARE = _tool()


def test_every_release_is_in_the_corpus():
    releases = {d.name.split("-")[0] for d in SETS}
    assert releases == {"0.11.0", "0.12.0", "0.13.0", "0.14.0", "master"} and len(SETS) >= 25


@pytest.mark.parametrize("folder", SETS, ids=[d.name for d in SETS])
def test_figures_equal_the_release_viewer(folder):
    """Events per track, names, starts (±1 µs), durations, FLOPS and B/s (0.2 %), memory peaks, markers, contexts,
    op names and dtype text, each program's UOp list (0.12+; all but the ranges column): compared one by one, none may
    differ."""
    tally, note = COMPARE.compare_set(folder, examples=3)
    assert not note, note
    assert sum(tally.n.values()) > 3000 and tally.n["op"] > 1000  # really compared
    assert tally.n["uops"] > 200 or folder.name.startswith("0.11.0")  # 0.11's viewer has no UOp list
    assert not sum(tally.d.values()), {c: e for c, e in tally.ex.items() if e}
