"""The resource budget, held against crafted input and signals: objects a pickle's memo shares are read once (a
context listed 200 times, a traceback behind 1,000 spans, a name on 200 events); names are capped in traces; the
output has a bound (a clean refusal past it, in this process or its workers); the memory cap is the whole command's
(workers and Graphviz share it); and no worker outlives the command, nor writes after its last line."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vizexport
from vizexport import forks, limits
from vizexport.errors import InputError
from vizexport.output import write_atomic

from . import tinyfake as tf
from .conftest import ROOT, needs_dot, run_cli
from .trace_rules import check

SAMPLE = ROOT / "vizexport" / "data" / "sample"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
ADD, CONST, SINK = 33, 59, 12  # tinygrad 0.14's Ops


# ---- crafted inputs ----

def chains(contexts: int, chain: int, matches: int, listed: int = 0) -> bytes:
    """A 0.14-shaped rewrites trace: contexts `ctx<c>` of one rewrite each, a chain of `chain` UOps whose leaf each of
    `matches` matches swaps for another (a replay rebuilds the chain at each); the first context's key and rewrite
    list are listed `listed` times more (the same objects: memo references of a few bytes)."""
    uops = {k: (CONST, None, (), k, None) for k in range(matches + 2)}
    keys, ctxs = [], []
    for c in range(contexts):
        prev = 0
        for _ in range(chain):
            uops[len(uops)] = (ADD, None, (prev, matches + 1), None, None)
            prev = len(uops) - 1
        uops[len(uops)] = (SINK, None, (prev,), None, None)
        ctxs.append([tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=len(uops) - 1, name=f"r{c}", depth=0,
                             bottom_up=False, matches=[(k, k + 1, ("p.py", 2), 0.0) for k in range(matches)])])
        keys.append(tf.Fake("TracingKey", display_name=f"ctx{c}", keys=(f"ctx{c}",), ret=None))
    return tf.dumps((keys + keys[:1] * listed, ctxs + ctxs[:1] * listed, uops))


def shared_traceback(spans: int, frames: int) -> bytes:
    """`spans` host spans, each its own TracingKey, all sharing one `frames`-frame traceback."""
    tb = tuple((f"/src/m{i}.py", i, f"f{i}", "x") for i in range(frames))
    return tf.profile(*(tf.span(device="TINY", st=float(10 * i), en=float(10 * i + 5),
                                name=tf.Fake("TracingKey", display_name=f"k{i}", keys=(f"k{i}",), ret=None, tb=tb))
                        for i in range(spans)))


def shared_name(events: int, size: int) -> tuple[str, bytes]:
    name = "E_" + "x" * (size - 2)
    return name, tf.profile(*(tf.span(name=name, st=float(10 * i), en=float(10 * i + 5)) for i in range(events)))


# ---- memo-shared objects are read once ----

@needs_dot
def test_a_context_listed_200_times_is_one_context(tmp_path: Path):
    (tmp_path / "once.pkl").write_bytes(chains(2, 5, 3))
    (tmp_path / "many.pkl").write_bytes(data := chains(2, 5, 3, listed=200))
    assert len(data) < (tmp_path / "once.pkl").stat().st_size + 1000  # 200 listings cost a few bytes each
    with pytest.warns(UserWarning, match="200 rewrite contexts listed more than once"):
        log = vizexport.load_rewrites(tmp_path / "many.pkl")
    assert [c.key.name for c in log.contexts] == ["ctx0", "ctx1"]
    outs = {}
    for name in ("once", "many"):
        r = run_cli(tmp_path / f"{name}.pkl", "-o", tmp_path / f"{name}-out", "--jobs", "2")
        assert r.returncode == 0, r.stderr
        outs[name] = sorted(str(p.relative_to(tmp_path / f"{name}-out")) for p in (tmp_path / f"{name}-out").rglob("*"))
    assert outs["many"] == outs["once"] and sum(p.endswith(".svg") for p in outs["once"]) == 2 * (3 + 1)
    assert r.stderr.count("\n") == 1 and "listed more than once (the same object) shown once" in r.stderr


def test_a_rewrite_listed_again_is_one_rewrite(tmp_path: Path):
    rw = tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=1, matches=[], name="r", depth=0, bottom_up=False)
    uops = {0: (CONST, None, (), 1, None), 1: (SINK, None, (0,), None, None)}
    key = tf.Fake("TracingKey", display_name="k", keys=("k",), ret=None)
    (f := tmp_path / "r.pkl").write_bytes(tf.dumps(([key], [[rw] * 1000], uops)))
    with pytest.warns(UserWarning, match="999 rewrites listed more than once"):
        log = vizexport.load_rewrites(f)
    assert len(log.contexts[0].rewrites) == 1


def test_a_match_list_shared_by_many_rewrites_is_refused(tmp_path: Path):
    """Distinct rewrites sharing one 10,000-match list: 20 million matches from a few KB, each a replay step."""
    matches = [(0, 1, ("p.py", 2), 0.0)] * 10_000
    rws = [tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=2, matches=matches, name=f"r{i}", depth=0,
                   bottom_up=False) for i in range(2000)]
    uops = {0: (CONST, None, (), 1, None), 1: (CONST, None, (), 2, None), 2: (SINK, None, (0,), None, None)}
    (f := tmp_path / "m.pkl").write_bytes(tf.dumps(([tf.Fake("TracingKey", display_name="k", keys=("k",))],
                                                    [rws], uops)))
    with pytest.raises(InputError, match="more rewrite matches than the file has bytes"):
        vizexport.load_rewrites(f)


def test_a_traceback_shared_by_1000_spans_is_read_and_written_once(tmp_path: Path):
    """1,000 spans sharing one 100,000-frame traceback (3 MB of pickle): read once, its stack written once (the
    Chrome JSON's stackFrames, each span's `sf`), its text capped."""
    (f := tmp_path / "tb.pkl").write_bytes(shared_traceback(1000, 100_000))
    prof = vizexport.load_profile(f)
    assert len(prof.spans) == 1000 and len({id(s.key.tb) for s in prof.spans}) == 1
    t0 = time.monotonic()
    r = run_cli(f, "-o", out := tmp_path / "t.json")
    assert r.returncode == 0 and time.monotonic() - t0 < 60, r.stderr
    doc = json.loads(out.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 1000 and len(doc["stackFrames"]) == 100_000 and len({e["sf"] for e in spans}) == 1
    tb = spans[0]["args"]["tb"]
    assert tb.startswith("/src/m0.py:0 f0\n    x\n/src/m1.py:1 f1\n") and len(tb) <= limits.TEXT_CAP + 100
    assert tb.endswith("more frames (the slice's callstack holds them all)")
    assert out.stat().st_size < 40 * limits.MIB  # before: every span wrote the 100,000 frames (2.9 GB)


def test_a_megabyte_name_on_200_events_is_capped(tmp_path: Path):
    name, data = shared_name(200, 1 << 20)
    (f := tmp_path / "name.pkl").write_bytes(data)
    assert len(data) < 2 * len(name)
    shown = limits.capped(name)
    assert shown == name[:limits.NAME_CAP] + f"…[{len(name) - limits.NAME_CAP:,} more characters]"
    assert limits.capped(shown) is shown  # capped where it is read, kept as it is where it is written
    assert run_cli(f, "-o", tmp_path / "t.json").returncode == 0
    names = [e["name"] for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "X"]
    assert names == [shown] * 200 and (tmp_path / "t.json").stat().st_size < 1 << 20  # before: 201 MB
    assert run_cli(f, "-o", tmp_path / "t.pftrace").returncode == 0
    slices = check((tmp_path / "t.pftrace").read_bytes()).slices
    assert [s[2] for t in slices.values() for s in t] == [shown] * 200


def test_short_names_are_kept_whole():
    name = "r_32_16_4_4n1" * 300  # 3,900 characters: under the cap
    assert limits.capped(name) is name


# ---- the output's bound ----

def test_output_past_its_bound_is_refused_cleanly(tmp_path: Path):
    """20,000 events with a name at the cap: a few hundred KB of pickle, 84 MB of Chrome JSON."""
    _, data = shared_name(20_000, limits.NAME_CAP)
    (f := tmp_path / "names.pkl").write_bytes(data)
    (out := tmp_path / "t.json").write_text("keep me")
    t0 = time.monotonic()
    r = run_cli(f, "-o", out)
    assert r.returncode == 1 and time.monotonic() - t0 < 120
    bound = max(limits.OUTPUT_BASE, 64 * f.stat().st_size) / limits.MIB
    assert r.stderr == (f"vizexport: error: {f}: the output passed its limit of {bound:,.0f} MiB (max(64 MiB, 64 × "
                        "the inputs' size)); nothing was written (--output-limit GIB sets another)\n")
    assert out.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["names.pkl", "t.json"]


def test_a_folder_past_its_bound_is_refused_and_left_out(tmp_path: Path):
    r = run_cli(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", tmp_path / "site", "--output-limit", "0.001")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "the output passed its limit of 1 MiB (--output-limit)" in r.stderr
    assert list(tmp_path.iterdir()) == []


def _write_file(folder: Path, i: int) -> int:
    write_atomic(folder / f"{i}.bin", bytes(600))
    return os.getpid()


@pytest.mark.skipif(not forks.can_fork(), reason="no fork")
def test_workers_bytes_count_in_the_commands_output(tmp_path: Path):
    limits.limit_output(None, 6000)
    try:
        with forks.ForkExecutor() as ex:
            pids = set(ex.map(lambda i: _write_file(tmp_path, i), range(8), jobs=2))
            assert os.getpid() not in pids and limits.output_written() == 8 * 600
            with pytest.raises(limits.OutputLimitError, match="passed its limit"):
                list(ex.map(lambda i: _write_file(tmp_path, 100 + i), range(8), jobs=2))
    finally:
        limits.limit_output(None)
    assert len(list(tmp_path.glob("1??.bin"))) < 8


# ---- the memory cap is the whole command's ----

SHARES = """
import json, os, resource, time
from vizexport import forks, limits
cap = limits.limit_memory(1 << 30)
before = limits.data_size()
ex = forks.ForkExecutor()
sleeping = ex.started_map(time.sleep, [30] * 4, jobs=4)
workers = ex.pids()
def field(pid, name):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(name):
            return int(line.split()[1]) * 1024
def soft(pid):
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max data size"):
            return int(line.split()[3])
time.sleep(0.5)
print(json.dumps({"cap": cap, "parent": [soft(os.getpid()), before], "lent": limits._lent,
                  "workers": [[soft(w), field(w, "VmData:")] for w in workers]}))
sleeping.close()  # stops them
print(json.dumps({"after": soft(os.getpid()), "left": ex.pids()}))
"""


@needs_linux
def test_workers_are_lent_shares_of_the_cap():
    r = subprocess.run([sys.executable, "-c", SHARES], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 0, r.stderr
    got, after = map(json.loads, r.stdout.splitlines())
    cap, (parent_soft, parent_used), workers = got["cap"], got["parent"], got["workers"]
    each = got["lent"] // len(workers)
    assert len(workers) == 4 and each >= limits.MIN_WORKER_MEMORY
    assert parent_soft == cap - 4 * each  # this process keeps the rest
    assert parent_used + 5 * each <= cap  # each worker and this one may grow by one share
    assert all(abs(soft - (used + each)) < 16 * limits.MIB for soft, used in workers)  # inherited + its share
    assert after["after"] == cap and after["left"] == []  # given back once the workers ended


FAKE_DOT = """#!/bin/sh
sleep 0.5
grep "Max data size" /proc/self/limits > "$VIZEXPORT_TEST_LIMITS"
cat > /dev/null
echo '<svg xmlns="http://www.w3.org/2000/svg"></svg>'
"""


@needs_linux
def test_graphviz_gets_what_its_process_has_left(tmp_path: Path):
    (bin_dir := tmp_path / "bin").mkdir()
    (dot := bin_dir / "dot").write_text(FAKE_DOT)
    dot.chmod(0o755)
    code = "from vizexport import limits; from vizexport.graphs import render; limits.limit_memory(1 << 30); " \
           "print(limits.child_memory()); render._run(b'digraph{}', 10)"
    env = {**ENV, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VIZEXPORT_TEST_LIMITS": str(tmp_path / "limits")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    soft, hard = (int(x) for x in (tmp_path / "limits").read_text().split()[3:5])
    assert soft == hard and abs(soft - int(r.stdout)) < 16 * limits.MIB and soft < 1 << 30


def _children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += map(int, f.read().split())
    return out


def _private(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) * 1024 for line in f if line.startswith(("Private_", "Swap:")))


def _tree_private(pid: int) -> int:
    """Private memory (resident or swapped) of a process and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += _private(p)
            todo += _children(p)
        except (OSError, ValueError):  # it ended meanwhile
            pass
    return total


@needs_dot
@needs_linux
def test_jobs_4_under_a_1_gib_cap_stay_under_1_5_gib(tmp_path: Path):
    """Workers that each would use gigabytes replaying (before: 3.4 GiB in all under a "1.0 GiB" cap)."""
    (f := tmp_path / "replay.pkl").write_bytes(chains(8, 20_000, 200))
    p = subprocess.Popen([sys.executable, "-m", "vizexport", f, "-o", tmp_path / "out", "--jobs", "4",
                          "--memory-limit", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    peak = 0
    while p.poll() is None:
        peak = max(peak, _tree_private(p.pid))
        time.sleep(0.02)
    err = p.stderr.read()
    assert p.returncode == 1 and err == (f"vizexport: error: {f}: needs more memory than its limit of 1.0 GiB "
                                         "(--memory-limit GIB raises it)\n")
    assert 100 * limits.MIB < peak <= 1.5 * limits.GIB


# ---- workers die with the command, quietly ----

def _group(pgid: int) -> list[int]:
    """Live processes of a process group."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state, _, group = f.read().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue
        if int(group) == pgid and state != "Z":
            out.append(int(pid))
    return out


def _start(tmp_path: Path, *args: object, **kw: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vizexport", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "stderr", "w"), env=ENV, start_new_session=True, **kw)


def _ended_alone(p: subprocess.Popen, tmp_path: Path, wait: float = 2.0) -> str:
    """stderr once the command has ended and `wait` seconds more (a worker left behind would write there); no
    process of its group may be left."""
    p.wait(timeout=120)
    time.sleep(wait)
    assert _group(p.pid) == []
    return (tmp_path / "stderr").read_text()


@needs_linux
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_site_build_stops_everything(tmp_path: Path, sig: int):
    p = _start(tmp_path, SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", tmp_path / "site", "--jobs", "2")
    for _ in range(3000):  # until its workers run and its folder is being written
        if len(_group(p.pid)) >= 3 and list(tmp_path.glob(".site.*.part")):
            break
        time.sleep(0.01)
    assert list(tmp_path.glob(".site.*.part"))
    p.send_signal(sig)
    err = _ended_alone(p, tmp_path)
    end, code = ("terminated", 143) if sig == signal.SIGTERM else ("interrupted", 130)
    assert p.returncode == code, err
    assert err == f"vizexport: {end} (no output written)\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["stderr"]


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (800_000, 800_000))


@needs_linux
def test_a_failed_write_is_one_line_and_then_nothing(tmp_path: Path):
    """The site's trace (1 MB) cannot be written (a file size limit stands in for a full disk) while the report's
    plots are drawn in a helper: before, the helper wrote a 35-line BrokenPipeError traceback 10 s after the error."""
    spans = (tf.span(name=f"E_{i % 3000}", st=float(10 * i), en=float(10 * i + 5)) for i in range(100_000))
    (f := tmp_path / "big.pkl").write_bytes(tf.profile(*spans))
    p = _start(tmp_path, f, "-o", tmp_path / "site", preexec_fn=_small_files)
    err = _ended_alone(p, tmp_path, wait=3)
    assert p.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("vizexport: error: ") and err.endswith(": File too large\n")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["big.pkl", "stderr"]


ORPHAN = """
import os, sys, time
from vizexport import forks
ex = forks.ForkExecutor()
ex.prepare(lambda: None)  # a helper, waiting for its task
print(*ex.pids(), flush=True)
time.sleep(60)
"""


@needs_linux
def test_a_worker_dies_with_its_parent():
    p = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True, env=ENV)
    worker = int(p.stdout.readline())
    p.kill()  # no clean-up runs: the kernel tells the worker
    p.wait()
    for _ in range(200):
        if not Path(f"/proc/{worker}").exists() or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the worker outlived its parent")
