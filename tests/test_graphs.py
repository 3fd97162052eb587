"""Rewrite traces → replayed step graphs (vizexport.tinygrad.replay) → DOT → SVG step sequences + manifest
(vizexport.graphs).

Replay is checked against tinygrad's own viewer replay (tests/data/replay_figures.json, made by
tools/replay_figures.py with each real release); rendering runs the real Graphviz `dot` on a subset.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import itertools
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import vizexport
from vizexport.graphs import export as export_mod
from vizexport.graphs.diff import match_diff
from vizexport.graphs.dot import Drawer, quote
from vizexport.graphs.render import DotMissing, captioned, notice_svg
from vizexport.pickles import InputError, stub_class
from vizexport.records import Context, Key, Match, Release, Rewrite, RewriteLog, UOpRec, to_json
from vizexport.tinygrad.args import ArgText, arg_key
from vizexport.tinygrad.replay import Nodes, Replayer, ReplayError, real_matches

from .conftest import FIXTURES, ROOT, needs_dot

SAMPLE = ROOT / "vizexport" / "data" / "sample"
REFERENCE = json.loads((ROOT / "tests" / "data" / "replay_figures.json").read_text())
SVG = "{http://www.w3.org/2000/svg}"
FULL = bool(os.environ.get("VIZEXPORT_FULL_TESTS"))  # every context of the largest fixture, too
BIG = "tinygrad/0.14.0-hcq2/rewrites.pkl"


def render_rewrites(*args, **kw) -> dict:
    """The manifest, as manifest.json holds it."""
    return to_json(vizexport.render_rewrites(*args, **kw))


def _tool():
    spec = importlib.util.spec_from_file_location("replay_figures", ROOT / "tools" / "replay_figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()  # digests computed exactly as the reference tool computes them from real UOps


def path_of(key: str) -> Path:
    return SAMPLE / key.split("/", 1)[1] if key.startswith("sample/") else FIXTURES / key


def params(keys: list[str]) -> list:
    return [pytest.param(k, id=k, marks=[] if path_of(k).exists() else [pytest.mark.skip(reason="fixture absent")])
            for k in keys]


KEYS = params(sorted(REFERENCE))


@functools.cache
def log_of(key: str) -> RewriteLog:
    return vizexport.load_rewrites(path_of(key))


def contexts_of(key: str) -> list[int]:
    n = len(log_of(key).contexts)
    return list(range(n)) if key != BIG or FULL else list(range(0, n, 6))  # the largest: every 6th context


@functools.cache
def replays_of(key: str) -> dict[int, tuple[Replayer, list]]:
    """context index → (its replayer, the replays of its rewrites in order)."""
    log = log_of(key)
    out = {}
    for ci in contexts_of(key):
        r = Replayer(Nodes(log))
        out[ci] = (r, [r.replay(rw) for rw in log.contexts[ci].rewrites])
    return out


def digest(nodes: Nodes, root: int) -> tuple[str, int]:
    order = list(nodes.toposort(root))
    pos = {n: i for i, n in enumerate(order)}
    lines = [f"{nodes.op[n]}|{','.join(str(pos[s]) for s in nodes.src[n])}|{TOOL.arg_text(nodes.arg_of(n))}|"
             f"{TOOL.arg_text(nodes.tag_of(n))}" for n in order]
    return TOOL.digest(lines), len(order)


def figures(nodes: Nodes, steps: list) -> list:
    """[steps, final digest, steps digest] as tools/replay_figures.py records them."""
    rows = []
    for s in steps:
        d, n = digest(nodes, s.sink)
        change = 0 if s.after is None else len(set(nodes.toposort(s.after)) & set(nodes.toposort(s.sink)))
        rows.append(f"{d}:{n}:{change}")
    return [len(rows), rows[-1].split(":")[0], TOOL.digest(rows)]


# ---- replay: tinygrad's own figures ----

@pytest.mark.parametrize("key", KEYS)
def test_replay_matches_tinygrad(key: str):
    """Every step of every rewrite: the same graph (structure, args) and highlight count as tinygrad's viewer."""
    ref = {(c, r): rest for c, r, *rest in REFERENCE[key]["rewrites"]}
    bad = []
    for ci, (rp, reps) in replays_of(key).items():
        for ri, rep in enumerate(reps):
            assert not any(s.error for s in rep.steps), (ci, ri, [s.error for s in rep.steps if s.error])
            if figures(rp.nodes, rep.steps) != ref[(ci, ri)]:
                bad.append((ci, ri, rep.rewrite.name))
    assert not bad, f"{len(bad)} rewrites differ from tinygrad's replay: {bad[:5]}"


def plain(x) -> bool:
    """An argument the digest shows in full (objects show only their class name)."""
    return x is None or isinstance(x, (bool, int, float, str)) or (type(x) is tuple and all(map(plain, x)))


@pytest.mark.parametrize("key", KEYS)
def test_chained_rewrites(key: str):
    """Where tinygrad feeds a rewrite's result into the next rewrite (its viewer's final graph has the digest of
    the next input), our final graph *is* that next input: the very same hash-consed node. The only exceptions are
    graphs differing in an object argument the digest cannot see (0.10.1/0.10.2 linearizer BasicBlocks, whose order
    the viewer's replay does not reproduce): same structure, and every differing node has an object argument."""
    ref = {(c, r): rest for c, r, *rest in REFERENCE[key]["rewrites"]}
    identical = 0
    for ci, (rp, reps) in replays_of(key).items():
        nodes = rp.nodes
        for ri, (a, b) in enumerate(itertools.pairwise(reps)):
            nxt = nodes.load(b.rewrite.sink)
            if ref[(ci, ri)][1] != digest(nodes, nxt)[0] or not a.rewrite.matches:
                continue  # tinygrad does not chain this pair (or nothing happened in between)
            if a.final == nxt:
                identical += 1
                continue
            mine, theirs = list(nodes.toposort(a.final)), list(nodes.toposort(nxt))
            differ = [x for x, y in zip(mine, theirs, strict=True) if x != y and nodes.src[x] == nodes.src[y]]
            assert differ and not any(plain(nodes.arg_of(x)) for x in differ), (ci, ri, a.rewrite.name)
    assert identical >= 20


@pytest.mark.parametrize("key", KEYS)
def test_step_counts(key: str):
    """One step per match that replaced something, plus the input graph; steps carry their match's data."""
    log = log_of(key)
    for ci, (_, reps) in replays_of(key).items():
        for rw, rep in zip(log.contexts[ci].rewrites, reps, strict=True):
            real = real_matches(rw)
            assert len(rep.steps) == len(real) + 1
            assert [s.match for s in rep.steps[1:]] == [i for i, _ in real]
            for s in rep.steps[1:]:
                assert s.created <= set(rep_nodes_of(key, ci).toposort(s.sink))
                assert not (s.created & s.rebuilt)


def rep_nodes_of(key: str, ci: int) -> Nodes:
    return replays_of(key)[ci][0].nodes


@pytest.mark.parametrize("key", KEYS)
def test_dot_every_step(key: str):
    """DOT for every step: ids follow toposort order, created nodes are drawn and highlighted, text is stable."""
    for rp, reps in replays_of(key).values():
        drawer = Drawer(rp.nodes, 400)
        for rep in reps:
            chosen = export_mod.policy(rep.steps, key != BIG or FULL)  # the largest: the default policy's steps
            for s in (s for s in rep.steps if s.index in chosen):
                d = drawer.draw(s)
                assert d.nodes <= 400 and (d.nodes == d.total) != d.capped
                classes = dict(re.findall(r'^(n\d+) \[.*?class="(\w+)"', d.text, re.M))
                created = {d.ids[n] for n in s.created if n in d.ids}
                assert {i for i, c in classes.items() if c == "created"} == created
                if not d.capped:
                    assert len(created) == len(s.created)
        if not reps:
            continue
        last = reps[-1].steps[-1]
        assert Drawer(rp.nodes, 400).draw(last).text == drawer.draw(last).text  # cache-independent


# ---- rendering with dot ----

RENDERED = [("sample/rewrites.pkl", r"^(E_64_4|Schedule 1 Kernel n5|Callify 1 Buffer n5)$"),
            ("tinygrad/0.10.0/rewrites.pkl", r"^(E_4|E_10|create_schedule_with_vars_4)$"),
            ("tinygrad/0.12.0/rewrites.pkl", r"^(E_4|Schedule 1 Kernel n6)$")]


@functools.cache
def rendered(key: str, ctx: str, out: str) -> dict:
    return render_rewrites(log_of(key), Path(out), ctx=ctx, jobs=2)


@pytest.fixture(scope="module")
def outroot(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("graphs")


@needs_dot
@pytest.mark.parametrize(("key", "ctx"), [pytest.param(k, c, id=k, marks=params([k])[0].marks) for k, c in RENDERED])
def test_render(key: str, ctx: str, outroot: Path):
    out = outroot / key.replace("/", "_")
    m = rendered(key, ctx, str(out))
    assert json.loads((out / "manifest.json").read_text()) == m
    assert m["summary"]["rendered"] == m["summary"]["svg_files"] > 0
    log = log_of(key)
    for c in m["contexts"]:
        assert re.search(ctx, c["name"]) and c["path"] == export_mod.unique_slugs(
            [x.key.name for x in log.contexts])[c["index"]]
        for r in c["rewrites"]:
            rw = log.contexts[c["index"]].rewrites[r["index"]]
            assert r["matches"] == len(real_matches(rw)) and len(r["steps"]) == r["matches"] + 1
            assert r["path"] == f"{c['path']}/{r['index']:03d}-{export_mod.slug(rw.name)}"
            drawn = [s for s in r["steps"] if s["svg"]]
            assert len(drawn) == (len(r["steps"]) if r["matches"] <= 50 else 2)
            for s in drawn:
                assert s["svg"] == f"{r['path']}/{s['index']:04d}.svg"
                ET.parse(out / s["svg"])  # valid XML
                if s["index"]:
                    assert (out / s["diff"]).read_text().startswith("# ")
            for s in r["steps"][1:]:
                m_ = rw.matches[s["match"]]
                assert s["pattern"]["line"] == m_.loc[1]
                assert s["seconds"] == (None if m_.seconds is None else pytest.approx(m_.seconds))


@needs_dot
@pytest.mark.parametrize(("key", "ctx"), [pytest.param(k, c, id=k, marks=params([k])[0].marks) for k, c in RENDERED])
def test_highlighted_are_created(key: str, ctx: str, outroot: Path):
    """In each SVG, the nodes with class "created" are exactly the nodes the match created."""
    out = outroot / key.replace("/", "_")
    m = rendered(key, ctx, str(out))
    log = log_of(key)
    checked = 0
    for c in m["contexts"]:
        rp = Replayer(Nodes(log))
        drawer = Drawer(rp.nodes, 400)
        for r in c["rewrites"]:
            rep = rp.replay(log.contexts[c["index"]].rewrites[r["index"]])
            for s, e in zip(rep.steps, r["steps"], strict=True):
                if not e["svg"]:
                    continue
                svg = ET.parse(out / e["svg"]).getroot()
                marked = {g.get("id") for g in svg.iter(f"{SVG}g") if "created" in (g.get("class") or "").split()}
                d = drawer.draw(s, rep.steps[1].before if s.index == 0 and len(rep.steps) > 1 else None)
                assert marked == {d.ids[n] for n in s.created}, e["svg"]
                assert e["created"] == len(s.created) and e["drawn"] == d.nodes
                checked += bool(marked)
    assert checked > 0


@needs_dot
def test_rerun_identical(outroot: Path, tmp_path: Path):
    """Same input, same options → byte-identical files (also with another number of processes)."""
    key, ctx = RENDERED[0]
    if not path_of(key).exists():
        pytest.skip("sample absent")
    first = outroot / key.replace("/", "_")
    rendered(key, ctx, str(first))
    render_rewrites(log_of(key), tmp_path, ctx=ctx, jobs=1)
    names = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    for n in names:
        assert (first / n).read_bytes() == (tmp_path / n).read_bytes(), n


@needs_dot
def test_all_steps_and_cap(tmp_path: Path):
    """--all-steps renders every step of a long rewrite; graphs above max_nodes show the change's neighbourhood."""
    log = log_of("sample/rewrites.pkl")
    ci, ri = next((ci, ri) for ci, c in enumerate(log.contexts) for ri, rw in enumerate(c.rewrites)
                  if 50 < len(rw.matches) < 80)
    name = log.contexts[ci].key.name
    rw_name = log.contexts[ci].rewrites[ri].name
    m = render_rewrites(log, tmp_path, ctx=f"^{re.escape(name)}$", rewrite=f"^{re.escape(rw_name)}$",
                        all_steps=True, max_nodes=25, jobs=2)
    rws = [r for c in m["contexts"] for r in c["rewrites"] if r["index"] == ri and c["index"] == ci]
    assert rws and all(s["svg"] for s in rws[0]["steps"])
    capped = [s for r in rws for s in r["steps"] if s["capped"]]
    assert capped and all(s["drawn"] <= 25 < s["nodes"] for s in capped)
    text = "".join(ET.parse(tmp_path / capped[0]["svg"]).getroot().itertext())
    assert "showing 25 of" in text and "--max-nodes 25" in text
    assert m["summary"]["capped"] >= len(capped)


# ---- bad input, failures, limits ----

def tiny_log(matches: list[Match], uops: dict[int, UOpRec] | None = None, sink: int = 3,
             extra: list[Rewrite] = ()) -> RewriteLog:
    table = {0: UOpRec(1, "CONST", "int", (), 1), 1: UOpRec(1, "CONST", "int", (), 2),
             2: UOpRec(2, "ADD", "int", (0, 1), None), 3: UOpRec(3, "SINK", "void", (2,), None),
             4: UOpRec(1, "CONST", "int", (), 3), 5: UOpRec(4, "MUL", "int", (0, 1), None)}
    table.update(uops or {})
    rws = [Rewrite("fold", ("/x/tinygrad/uop/symbolic.py", 10), sink, matches), *extra]
    return RewriteLog("tiny.pkl", Release("0.14.0", "certain", "test"), [Context(Key("k"), rws)], table)


def test_tiny_replay_and_diff():
    log = tiny_log([Match(2, 4, ("/x/tinygrad/uop/symbolic.py", 20), 1e-6)])
    r = Replayer(Nodes(log))
    rep = r.replay(log.contexts[0].rewrites[0])
    nodes = r.nodes
    assert [nodes.op[n] for n in nodes.toposort(rep.final)] == ["CONST", "SINK"]
    assert {nodes.op[n] for n in rep.steps[1].created} == {"CONST"} and rep.steps[1].rebuilt == {rep.final}
    diff = match_diff(nodes, rep.steps[1].before, rep.steps[1].after)
    assert diff[:2] == ["--- before", "+++ after"] and "+CONST int 3" in diff
    d = Drawer(nodes, 400).draw(rep.steps[1])
    assert 'class="created"' in d.text and 'id="replaced"' in d.text  # the created CONST is drawn, not folded


def test_hash_consing():
    """Two table entries for the same UOp are one node; a rebuilt node equal to an existing one is that node."""
    log = tiny_log([], {6: UOpRec(2, "ADD", "int", (0, 1), None), 7: UOpRec(1, "CONST", "int", (), 1)})
    nodes = Nodes(log)
    assert nodes.load(6) == nodes.load(2) and nodes.load(7) == nodes.load(0)
    assert nodes.rebuild(nodes.load(5), (nodes.load(0), nodes.load(1))) == nodes.load(5)


@needs_dot
def test_missing_uop_is_a_step_error(tmp_path: Path):
    log = tiny_log([Match(2, 99, None, None), Match(2, 4, None, None)])
    m = render_rewrites(log, tmp_path, jobs=1)
    steps = m["contexts"][0]["rewrites"][0]["steps"]
    assert "UOp 99 is not in the trace's UOp table" in steps[1]["error"]
    assert "error" not in steps[2] and steps[2]["svg"] and m["summary"]["replay_errors"] == 1
    assert all(ET.parse(tmp_path / s["svg"]) for s in steps if s["svg"])


@needs_dot
def test_cycles(tmp_path: Path):
    """A cycle in the UOp table fails that rewrite's input; a cycle of replacements ends that rewrite with an
    error node (tinygrad: REWRITE_ERROR); the other rewrites still render."""
    cyc = {10: UOpRec(2, "ADD", "int", (11, 0), None), 11: UOpRec(2, "ADD", "int", (10, 0), None),
           12: UOpRec(3, "SINK", "void", (10,), None)}
    loop = [Match(2, 5, None, None), Match(5, 2, None, None), Match(2, 4, None, None)]
    extra = [Rewrite("broken", None, 12, []), Rewrite("ok", None, 3, [Match(2, 4, None, None)])]
    log = tiny_log(loop, cyc, extra=extra)
    m = render_rewrites(log, tmp_path, jobs=1)
    a, b, c = m["contexts"][0]["rewrites"]
    assert "fixed_point_rewrite" in a["steps"][2]["error"] and a["steps"][2]["svg"]
    assert "REWRITE_ERROR" in "".join(ET.parse(tmp_path / a["steps"][2]["svg"]).getroot().itertext())
    assert a["steps"][3]["error"] == "not replayed: step 2 failed" and not a["steps"][3]["svg"]
    assert "cycle in the UOp table" in b["steps"][0]["error"] and not b["steps"][0]["svg"]
    assert all(s["svg"] and "error" not in s for s in c["steps"])
    with pytest.raises(ReplayError, match="cycle"):
        Nodes(log).load(12)


def test_profile_and_empty_input(tmp_path: Path):
    with pytest.raises(InputError, match="not a rewrites trace"):
        render_rewrites(vizexport.load_profile(SAMPLE / "profile.pkl"), tmp_path)
    empty = RewriteLog("e.pkl", Release("0.14.0", "certain", "t"), [], {})
    with pytest.raises(InputError, match="empty rewrites trace"):
        render_rewrites(empty, tmp_path)
    with pytest.raises(InputError, match="no rewrite matches"):
        render_rewrites(tiny_log([]), tmp_path, rewrite="nothing-like-this")
    with pytest.raises(InputError, match="bad --ctx regular expression"):
        render_rewrites(tiny_log([]), tmp_path, ctx="(")
    assert not (tmp_path / "manifest.json").exists()


@needs_dot
def test_timeout_becomes_a_note(tmp_path: Path):
    m = render_rewrites(tiny_log([Match(2, 4, None, None)]), tmp_path, jobs=1, timeout=1e-6)
    steps = m["contexts"][0]["rewrites"][0]["steps"]
    assert all(s["timeout"] for s in steps) and m["summary"]["timeouts"] == 2
    text = "".join(ET.parse(tmp_path / steps[0]["svg"]).getroot().itertext())
    assert "did not finish within" in text


def test_dot_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import graphviz

    def missing():
        raise graphviz.ExecutableNotFound(["dot"])
    monkeypatch.setattr(graphviz, "version", missing)
    with pytest.raises(DotMissing, match="apt-get install graphviz"):
        render_rewrites(tiny_log([]), tmp_path)


@needs_dot
def test_interrupt_leaves_no_partial_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real = export_mod.render_batch
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(export_mod, "render_batch", interrupted)
    monkeypatch.setattr(export_mod, "BATCH_SIZE", 1)
    log = log_of("sample/rewrites.pkl")
    (tmp_path / "manifest.json").write_text("{}")  # a previous run's manifest must not survive
    with pytest.raises(KeyboardInterrupt):
        render_rewrites(log, tmp_path, ctx="^E_64_4$", jobs=1)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not (tmp_path / "manifest.json").exists()
    assert files and all(p.suffix in (".svg", ".diff") for p in files)
    for p in files:
        if p.suffix == ".svg":
            ET.parse(p)
    shutil.rmtree(tmp_path)


# ---- labels and small pieces ----

def test_arg_labels():
    text = ArgText("0.14.0", str)
    dtype = stub_class("tinygrad.dtype", "DType")(14, 32, "float", "f")
    param = stub_class("tinygrad.uop.ops", "ParamArg")()
    param.__dict__.update(slot=3, dtype=dtype, name="x", device="CPU", vmin_vmax=None)
    axis = stub_class("tinygrad.uop.ops", "AxisType")(5)
    cf = stub_class("tinygrad.dtype", "ConstFloat")(0.5)
    assert text.short(param) == "#3 x CPU"
    assert text.short(dtype) == "float"
    assert text.short((1, axis)) == "(1, AxisType.WEAK)"
    assert text.short(cf) == "0.5" and text.short(b"abc") == "<3 bytes>"
    assert text.lines("line1\nline2\nline3\nline4\nline5\nline6")[-1] == "… (6 lines)"
    neg, pos = stub_class("tinygrad.dtype", "ConstFloat")(-0.0), stub_class("tinygrad.dtype", "ConstFloat")(0.0)
    assert arg_key(neg, id) != arg_key(pos, id) and arg_key(-0.0, id) == arg_key(0.0, id)  # as tinygrad compares


def test_quote_and_svg_helpers():
    assert quote('a"b\\c\nd\x1b') == '"a\\"b\\\\c\\nd?"'
    note = notice_svg(["title", "why <&>"])
    ET.fromstring(note)
    ET.fromstring(captioned(note, "ctx · rewrite · step 1/2 <&>"))


def test_semantics_per_release():
    from vizexport.tinygrad.releases import traits
    assert traits("0.10.0").replay.always_walk and traits("0.10.1").replay.advance == "never"
    assert traits("0.13.0").replay.call_bodies == "skip" and traits("master").replay.walk_flag
    assert not traits("0.10.3").replay.tags and traits("0.11.0").replay.tags


def test_policy():
    from vizexport.graphs.export import policy
    from vizexport.records import GraphStep as Step
    steps = [Step(i, sink=1) for i in range(60)]
    assert policy(steps, "default") == {0, 59} and len(policy(steps, "all")) == 60
    assert policy(steps[:51], "default") == set(range(51)) and policy(steps[:51], "ends") == {0, 50}
    assert policy([Step(0, sink=1), dataclasses.replace(Step(1), error="x")], "default") == {0}


@needs_dot
def test_progress_reaches_total(tmp_path: Path):
    """render_rewrites reports rough work done, rising to its total, from forked workers too."""
    calls: list[tuple[int, int]] = []
    render_rewrites(log_of("sample/rewrites.pkl"), tmp_path, jobs=2, progress=lambda d, t: calls.append((d, t)))
    dones = [d for d, _ in calls]
    assert dones == sorted(dones) and calls[-1][0] == calls[-1][1] > 0 and len({t for _, t in calls}) == 1
