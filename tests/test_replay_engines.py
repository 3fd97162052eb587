"""The replay engines against the reference: every step of every rewrite replayed with the default engine (its
speed-ups: replay.Engine) and with the reference (replay.substitute_reference, each step substituted into the
whole graph, no speed-up) gives the same step graphs, on every fixture, every corpus set and the sample. Both replay
into one node session, so equal graphs are the very same nodes: a step's root, its created and rebuilt sets and its
size compare as they are."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import vizexport
from vizexport.records import RewriteLog
from vizexport.tinygrad.replay import (
    FAST,
    REFERENCE,
    Engine,
    Nodes,
    Replayer,
    ReplayError,
    Sub,
    substitute_fixed,
    substitute_reference,
)

from .answers import CORPUS, unpack
from .conftest import ROOT, fixture_params
from .test_graphs import tiny_log

FULL = bool(os.environ.get("VIZEXPORT_FULL_TESTS"))  # every context of the largest fixture, too
BIG = "0.14.0-hcq2"
ENGINES = [FAST, Engine(clean=False), Engine(memo=False), Engine(fast_path=False)]
SETS = sorted(d.name for d in CORPUS.iterdir() if (d / "rewrites.pkl.gz").exists()) if CORPUS.is_dir() else []


def differences(log: RewriteLog, every: int = 1) -> tuple[int, list]:
    """(steps compared, the rewrites whose steps differ between an engine and the reference)."""
    steps, bad = 0, []
    for ci in range(0, len(log.contexts), every):
        nodes = Nodes(log, budget=1 << 62)  # two replays (and more) in one session: no budget to run out of
        ref, fast = Replayer(nodes, REFERENCE), [Replayer(nodes, e) for e in ENGINES]
        for ri, rw in enumerate(log.contexts[ci].rewrites):
            want = ref.replay(rw).steps
            steps += len(want)
            bad += [(ci, ri, rw.name, r.engine) for r in fast if r.replay(rw).steps != want]
    return steps, bad


@pytest.mark.parametrize("path", fixture_params("tinygrad/*/rewrites.pkl"))
def test_fixture_engines_equal_reference(path: Path):
    every = 1 if FULL or path.parent.name != BIG else 6  # the largest: every 6th context (as test_graphs)
    steps, bad = differences(vizexport.load_rewrites(path), every)
    assert steps > 300 and not bad, bad[:5]


@pytest.mark.parametrize("name", SETS)
def test_corpus_engines_equal_reference(name: str, tmp_path: Path):
    steps, bad = differences(vizexport.load_rewrites(unpack(name, tmp_path)[1]))
    assert steps > 100 and not bad, bad[:5]


def test_sample_engines_equal_reference():
    steps, bad = differences(vizexport.load_rewrites(ROOT / "vizexport" / "data" / "sample" / "rewrites.pkl"))
    assert steps == 1717 and not bad, bad[:5]


@pytest.mark.parametrize("engine", [substitute_reference, substitute_fixed], ids=["reference", "fixed"])
def test_replacement_holding_its_node_never_settles(engine):
    """Replacing x by MUL(x, y) never settles (tinygrad's graph_rewrite would rewrite forever): both engines say so."""
    log = tiny_log([])
    nodes = Nodes(log)
    x, mul = nodes.load(0), nodes.load(5)
    with pytest.raises(ReplayError, match="did not finish"):
        engine(Sub(nodes, {x: mul}, None, lambda n: False, False), mul)
