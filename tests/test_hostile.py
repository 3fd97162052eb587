"""Hostile and broken input through the command: never a traceback, a hang or gigabytes. Each case runs in a forked
child judged by tools/fuzz.py (exit code, one error line naming the file, time, peak memory against the bound,
nothing left behind); the crafted cases reproduce every attack of the issue that asked for this, the seeded
mutations cover what nobody thought of."""
from __future__ import annotations

import http.client
import importlib.util
import json
import os
import pickle
import random
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

import vizexport
import vizexport.cli
from vizexport import pickles
from vizexport.sqtt.launches import decode_blob, find_launches

from . import repickle
from . import tinyfake as tf
from .conftest import FIXTURES, ROOT, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"
TIMEOUT = 20.0


def _tool():
    spec = importlib.util.spec_from_file_location("fuzz", ROOT / "tools" / "fuzz.py")
    mod = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


FUZZ = _tool()


def judged(tmp_path: Path, data: bytes, mode: str = "convert", *needles: str) -> object:
    """Run one case; it must pass every check, and an error line must contain the needles."""
    folder = tmp_path / "case"
    folder.mkdir(exist_ok=True)
    o = FUZZ.run_case(data, mode, folder, "crafted", TIMEOUT)
    assert not o.problems(TIMEOUT), (o.problems(TIMEOUT), o.stderr)
    for n in needles:
        assert n in o.stderr, o.stderr
    return o


# ---- the unpickler ----

def test_one_byte(tmp_path: Path):
    o = judged(tmp_path, b"\x80", "info", "not a pickle")
    assert o.rc == 1


def test_build_on_a_class_is_refused(tmp_path: Path):
    """BUILD with slot state on a stand-in class would set attributes every later load shares."""
    data = b"\x80\x02ctinygrad.helpers\nProfileRangeEvent\nN}X\x10\x00\x00\x00__getattribute__K\x01s\x86b."
    judged(tmp_path, data, "info", "refused: the pickle sets '__getattribute__' on the class ProfileRangeEvent")
    assert not hasattr(vizexport.pickles.stub_class("tinygrad.helpers", "ProfileRangeEvent"), "__getattribute__x")


class _Call:
    def __init__(self, fn: object, *args: object) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple:
        return self.fn, self.args


def test_allocating_constructor_is_capped(tmp_path: Path):
    """bytearray(3 GiB) is 38 bytes of pickle: refused before anything is allocated."""
    o = judged(tmp_path, pickle.dumps([_Call(bytearray, 3 << 30)], protocol=4), "info", "refused bytearray(…)")
    assert o.peak < 400 << 20


def test_billion_laughs_through_decimal(tmp_path: Path):
    """A Decimal of shared nested lists would be turned to text (10^9 leaves): only a text is accepted."""
    laughs: list = ["ha"] * 10
    for _ in range(8):
        laughs = [laughs] * 10
    o = judged(tmp_path, pickle.dumps([_Call(Decimal, laughs)], protocol=4), "info", "corrupt pickle")
    assert o.seconds < 5 and o.peak < 400 << 20


def test_huge_declared_length(tmp_path: Path):
    """BYTEARRAY8 declaring 3 GiB in a 15-byte file: one line (no CPython 'deallocated bytearray' message)."""
    judged(tmp_path, b"\x80\x05\x96" + (3 << 30).to_bytes(8, "little") + b"abc.", "info")


def test_ten_million_marks_then_an_empty_list(tmp_path: Path):
    o = judged(tmp_path, b"\x80\x04" + b"(" * 10_000_000 + b"].", "convert", "the profile holds no events")
    assert o.rc == 1


# ---- the readers: loads, but with fields no tinygrad writes ----

def _nested_name(depth: int) -> bytes:
    """A profile whose one range is named by a list nested `depth` deep (made by the opcodes, not by recursion)."""
    data = tf.profile(tf.span(name="PLACEHOLDER"))
    placeholder = b"\x8c\x0bPLACEHOLDER\x94"
    assert data.count(placeholder) == 1
    return data.replace(placeholder, b"]" * depth + b"a" * (depth - 1) + b"\x94")


def test_deeply_nested_name(tmp_path: Path):
    o = judged(tmp_path, _nested_name(200_000), "convert")
    assert o.rc == 0 and o.seconds < 10  # converted, the name shown as a short text


@pytest.mark.parametrize("field,value", [("device", 5), ("device", ["NULL"]), ("st", [1, 2]), ("en", "soon"),
                                         ("st", Decimal("1e999999")), ("profile_key", 7), ("name", {"a": 1}),
                                         ("is_copy", "yes")])
def test_wrong_typed_fields(tmp_path: Path, field: str, value: object):
    """A flipped byte can make a field any type: converted or one clear line, never a traceback."""
    ev = tf.span()
    ev.__dict__[field] = value
    judged(tmp_path, tf.profile(ev, tf.span(name="E_2", st=2.0, en=3.0)), "convert")


@pytest.mark.parametrize("field,value,needle", [
    ("st", None, "ProfileRangeEvent.st: None, not a timestamp"),
    ("st", [1, 2], "ProfileRangeEvent.st: not a timestamp: [1, 2]"),
    ("en", "soon", "ProfileRangeEvent.en: not a timestamp: 'soon'"),
    ("en", "sNaN", "ProfileRangeEvent.en: not a timestamp: sNaN"),
    ("st", float("nan"), "ProfileRangeEvent.st: not a timestamp: nan"),
    ("en", float("inf"), "ProfileRangeEvent.en: not a timestamp: inf"),
    ("st", 1e308, "ProfileRangeEvent.st: not a timestamp: 1e+308"),
    ("st", Decimal("1e999999"), "ProfileRangeEvent.st: timestamp out of range: '1E+999999' µs"),
    ("st", -(2**70), "ProfileRangeEvent.st: timestamp out of range: -1180591620717411303424 µs")])
def test_times_that_are_no_times_are_named(tmp_path: Path, field: str, value: object, needle: str):
    """A range's start that is None (a range tinygrad never writes) or any other non-time: one line naming the field
    (it ended in 'TypeError: int() argument must be … not NoneType' and the bug wording)."""
    ev = tf.span()
    ev.__dict__[field] = value
    o = judged(tmp_path, tf.profile(ev, tf.span(name="E_2", st=2.0, en=3.0)), "convert", needle)
    assert o.rc == 1


def test_point_and_graph_times_are_named(tmp_path: Path):
    judged(tmp_path, tf.profile(tf.point("marker", 1.5), tf.point("marker", float("inf"))), "convert",
           "ProfilePointEvent.ts: not a timestamp: Infinity")
    graph = tf.Fake("ProfileGraphEvent", ents=[tf.Fake("ProfileGraphEntry", device="NULL", name="E_1", st_id=0,
                                                         en_id=5, is_copy=False)], deps=[[]], sigs=[tf.us(1.0)])
    judged(tmp_path, tf.profile(graph), "convert", "ProfileGraphEntry.en_id is 5, not one of the graph's 1 signals")
    graph.sigs = [tf.us(1.0), None]
    judged(tmp_path, tf.profile(graph), "convert", "ProfileGraphEvent.sigs: None, not a timestamp")


HUGE = 10**5000  # 16,610 bits: Python refuses to write out more than 4,300 digits


def test_huge_int_names_are_shown_by_their_size(tmp_path: Path):
    """A 5,000-digit device and kernel name (ValueError: Exceeds the limit (4300 digits) …, as a layout error) are
    a name like any other non-text: a short text."""
    data = tf.profile(tf.span(device=HUGE, name=HUGE), tf.point("marker", 1.5, device=HUGE, arg={"name": -HUGE}))
    o = judged(tmp_path, data, "convert")
    assert o.rc == 0
    prof = vizexport.load_profile(tmp_path / "case" / "case.pkl")
    assert prof.spans[0].device == "<int of 16,610 bits>" and prof.spans[0].key.name == "<int of 16,610 bits>"
    assert prof.points[0].arg.name == "<-int of 16,610 bits>"


def _alloc(sz: object = 1000, bits: object = 32, nbytes: object = None) -> tf.Fake:
    arg = {"sz": sz, "dtype": tf.Fake("DType", 0, bits, "float", "f"), "device": "NULL"}
    return tf.point("alloc", 1.5, key=1, arg=arg | ({} if nbytes is None else {"nbytes": nbytes}))


def test_alloc_sizes_past_int64(tmp_path: Path):
    """A DType of 2**62 bits made a 5.8e20-byte buffer that no int64 counter holds (OverflowError: int too big to
    convert, and the bug wording): a size no dtype has is an unknown size (0 bytes); a count or byte size past int64,
    or allocations adding up past it, one line naming the field."""
    free = tf.point("free", 1.8, key=1, arg={})
    o = judged(tmp_path, tf.profile(tf.span(), _alloc(bits=2**62), free), "convert")
    assert o.rc == 0
    (alloc, _) = vizexport.load_profile(tmp_path / "case" / "case.pkl").points
    assert (alloc.arg.nbytes, alloc.arg.count, alloc.arg.dtype) == (0, 1000, "float")
    judged(tmp_path, tf.profile(_alloc(sz=10**30)), "convert",
           "ProfilePointEvent alloc: its sz is 1000000000000000000000000000000, not a count")
    judged(tmp_path, tf.profile(_alloc(nbytes=2**70)), "convert",
           "ProfilePointEvent alloc: its nbytes is 1180591620717411303424, not a count")
    judged(tmp_path, tf.profile(*[_alloc(nbytes=2**62) for _ in range(2)]), "convert",
           "its allocations (ProfilePointEvent alloc) add up to 9,223,372,036,854,775,808 bytes, past int64")


def _one_rewrite(seconds: object, op: object = 3) -> bytes:
    uops = {0: (op, None, (), 1, None), 1: (4, None, (0,), None, None)}
    rw = tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=1, matches=[(0, 1, ("p.py", 2), seconds)], name="r",
                 depth=0, bottom_up=False)
    return tf.dumps(([tf.Fake("TracingKey", display_name="k", keys=("k",), ret=None)], [[rw]], uops))


def _strict_json(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), -1.0])
def test_match_time_that_is_no_time(tmp_path: Path, seconds: float):
    """An infinite or NaN match time went out as `Infinity`/`NaN` in `show --json` and the SVG export's manifest,
    which JSON has not: the time is unknown (null)."""
    judged(tmp_path, _one_rewrite(seconds), "graphs")
    case = tmp_path / "case" / "case.pkl"
    assert vizexport.load_rewrites(case).contexts[0].rewrites[0].matches[0].seconds is None
    r = run_cli("show", case, "-s", "0", "-i", "0", "--json")
    assert r.returncode == 0 and [s["seconds"] for s in _strict_json(r.stdout)["steps"]] == [None]


def test_estimates_that_are_no_numbers(tmp_path: Path):
    """The sample's kernel estimates (KernelInfo.estimates of each View Program) made infinite, NaN and 10**400:
    the rates of those kernels are not shown ('int too large to convert to float' and the bug wording); the JSON
    stays JSON."""
    tree, _ = pickles.load(SAMPLE / "rewrites.pkl")
    found = [a.__dict__["estimates"] for f in tree.uop_fields.values() if isinstance(a := f[3], pickles.Stub) and
             a.__dict__.get("estimates") is not None]
    for est in found:
        est.ops, est.lds, est.mem = float("inf"), float("nan"), 10**400
    (bad := tmp_path / "rewrites.pkl").write_bytes(repickle.dumps(tree))
    rates = {}
    for rewrites in (SAMPLE / "rewrites.pkl", bad):
        r = run_cli("top", SAMPLE / "profile.pkl", rewrites, "--json")
        assert r.returncode == 0, r.stderr
        rates[rewrites] = {(k["name"], k["gflops"], k["gbs"]) for k in _strict_json(r.stdout)["kernels"]}
    assert len(found) == 6 and any(g for _, g, _ in rates[SAMPLE / "rewrites.pkl"])
    assert {(n, None, None) for n, _, _ in rates[SAMPLE / "rewrites.pkl"]} == rates[bad]


def test_uop_op_that_is_no_op(tmp_path: Path):
    """An op of inf in the UOp table (OverflowError: cannot convert float infinity to integer, and the bug wording)."""
    judged(tmp_path, _one_rewrite(0.5, float("inf")), "graphs", "UOp 0: its op is inf, not an Ops number")
    judged(tmp_path, _one_rewrite(0.5, HUGE), "graphs", "UOp 0: its op is <int of 16,610 bits>, not an Ops number")


def _rewrites_trace(uops: object = None, rewrites: object = None, match: object = (0, 1, ("p.py", 2), 0.5)) -> bytes:
    rw = tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=1, matches=[match], name="r", depth=0, bottom_up=False)
    uops = {0: (3, None, (), 1, None), 1: (4, None, (0,), None, None)} if uops is None else uops
    return tf.dumps(([tf.Fake("TracingKey", display_name="k", keys=("k",), ret=None)],
                     [[rw]] if rewrites is None else rewrites, uops))


@pytest.mark.parametrize("data,needle", [
    (_rewrites_trace(uops={0: 5, 1: (4, None, (0,), None, None)}), "uop_fields[0] is 5, not (op, dtype, sources, arg"),
    (_rewrites_trace(uops={0: (3, None, None, 1), 1: (4, None, (0,), None)}), "uop_fields[0] is (3, None, None, 1)"),
    (_rewrites_trace(uops=[1, 2]), "its uop_fields are [1, 2], not a table of UOps"),
    (_rewrites_trace(rewrites=[[7]]), "rewrite 0 of context 0 is 7, not a tinygrad rewrite"),
    (_rewrites_trace(rewrites=[None]), "the rewrites of context 0 are None, not a list"),
    (_rewrites_trace(match=0.5), "a match is 0.5, not (before, after, pattern, seconds)"),
    (tf.dumps([("kernel", [tf.Fake("TrackedRewriteContext", loc=("x.py", 1), matches=[],
                                   sink=tf.Fake("UOp", 1, None, "src", None))])]),
     "a UOp of the trace is <tinygrad.uop.ops.UOp(1, None, 'src', None)>"),
    (tf.profile(tf.Fake("ProfileGraphEvent", ents=[1.5], deps=[], sigs=[])),
     "ProfileGraphEvent.ents holds 1.5, not a tinygrad record"),
    (tf.profile(tf.Fake("ProfilePointEvent", device="NULL", name="marker", arg={})),
     "an event without its field 'ts'; unknown tinygrad release?")])
def test_containers_of_the_wrong_kind_are_named(tmp_path: Path, data: bytes, needle: str):
    """A record, list or table where another belongs: named, not a Python error about subscripts and `_args`."""
    judged(tmp_path, data, "graphs" if b"Rewrite" in data else "convert", needle)


def test_wrong_typed_points_and_keys(tmp_path: Path):
    tb = (("a.py", 1, "f", "x"), "not a frame", ("b.py", "two", None, 3))
    events = [tf.span(device="USER", name=tf.Fake("TracingKey", display_name="call", keys=("k", 5), ret=[1], tb=tb)),
              tf.point("alloc", 1.5, key=[1], arg={"sz": "lots", "dtype": None}),
              tf.point("exec", 1.6, key=object.__new__(tf._fake_class("UOp", False)),
                       arg={"name": 3, "var_vals": {"n": "x", 1: 2}, "bufs": 5, "metadata": [None]}),
              tf.point("marker", 1.7, arg={"name": ["m"], "color": 9}), tf.point(7, 1.8)]
    judged(tmp_path, tf.profile(*events), "convert")


def test_exponential_name(tmp_path: Path):
    """A name made of shared nested tuples (10^12 leaves when printed or hashed): shown briefly, fast."""
    name: tuple = ("x",)
    for _ in range(40):
        name = (name, name)
    tb = (name,) * 3
    key = tf.Fake("TracingKey", display_name="k", keys=(name,), ret=name, tb=tb)
    o = judged(tmp_path, tf.profile(tf.span(name=name), tf.span(device="USER", name=key)), "convert")
    assert o.rc == 0 and o.seconds < 10


def _uop(op: int, src: tuple = (), arg: object = None) -> object:
    return tf.Fake("UOp", op, tf.Fake("DType", 0, 4, "float", "f"), src, arg)


def test_uop_that_is_its_own_source(tmp_path: Path):
    """A 0.10.x sink listing itself among its sources (set by BUILD): an error, not an endless walk."""
    sink = tf.Fake("UOp")
    sink.__dict__["_args"] = (1, None, (sink,), None)
    ctx = tf.Fake("TrackedRewriteContext", loc=("x.py", 1), sink=sink, matches=[])
    judged(tmp_path, tf.dumps([("kernel", [ctx])]), "graphs", "its own ancestor")


def test_shared_source_lists(tmp_path: Path):
    """20,000 UOps sharing one 20,000-long source tuple: 4e8 references from 100 KB. Refused up front."""
    leaves = tuple(_uop(2, (), i) for i in range(20_000))
    users = [_uop(3, leaves) for _ in range(20_000)]
    ctx = tf.Fake("TrackedRewriteContext", loc=("x.py", 1), sink=_uop(4, tuple(users)), matches=[])
    o = judged(tmp_path, tf.dumps([("kernel", [ctx])]), "graphs", "more source references than the file has bytes")
    assert o.seconds < 10


def test_argument_nested_deeply(tmp_path: Path):
    arg: object = 1
    for _ in range(100):  # deeper than tinygrad.args.MAX_NESTING
        arg = (arg,)
    uops = {0: (3, None, (), arg, None), 1: (4, None, (0,), None, None)}
    rw = tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=1, matches=[(0, 0, ("p.py", 2), 0.0)], name="r",
                 depth=0, bottom_up=False)
    judged(tmp_path, tf.dumps(([tf.Fake("TracingKey", display_name="k", keys=("k",), ret=None)], [[rw]], uops)),
           "graphs")


# ---- vizexport open: what it serves, and to whom ----

UI = "https://ui.perfetto.dev"


@pytest.fixture(scope="module")
def windows_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample written as an overview and two windows."""
    out = tmp_path_factory.mktemp("open") / "run"
    r = run_cli(SAMPLE / "profile.pkl", "-o", out / "t.pftrace", "--window-events", "500")
    assert r.returncode == 0 and "2 windows" in r.stdout, r.stderr
    return out


@pytest.fixture
def run_copy(windows_run: Path, tmp_path: Path) -> Path:
    """A copy of the windowed run the test may change: its overview's path."""
    shutil.copytree(windows_run, tmp_path / "run")
    return tmp_path / "run" / "t.pftrace"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(port: int, path: str, host: str | None = None, origin: str | None = UI, method: str = "GET",
             **headers: str) -> tuple[int, bytes, http.client.HTTPMessage]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sent = {"Host": host or f"127.0.0.1:{port}", **({"Origin": origin} if origin else {}), **headers}
    try:
        conn.request(method, path, headers=sent)
        r = conn.getresponse()
        return r.status, r.read(), r.headers
    finally:
        conn.close()


def _index(trace: Path) -> Path:
    return trace.parent / "t.windows" / "index.json"


def test_open_answers_the_ui_only(run_copy: Path):
    """Served on loopback: a request by another name (a rebound domain), from no or another origin, or for any other
    path is refused and leaves the one download to the UI; the UI's request gets the trace, and the command ends."""
    (run_copy.parent / "secret.txt").write_text("not for the web")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "vizexport", "open", run_copy, "--no-browser", "--port", str(port),
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "serving" in proc.stdout.readline()  # printed once it listens
        assert _request(port, "/t.pftrace", host=f"rebound.example:{port}")[0] == 403
        assert _request(port, "/t.pftrace", host="127.0.0.1:1")[0] == 403
        assert _request(port, "/t.pftrace", origin=None)[0] == 403  # another page's <img>, or curl
        assert _request(port, "/t.pftrace", origin="https://evil.example")[0] == 403
        for path in ("/secret.txt", "/../secret.txt", "/%2e%2e/secret.txt", "/etc/passwd", "/t.windows/index.json",
                     "/"):
            assert _request(port, path)[0] == 404, path
        pre = _request(port, "/t.pftrace", method="OPTIONS", **{"Access-Control-Request-Private-Network": "true"})
        assert pre[0] == 204 and pre[2]["Access-Control-Allow-Private-Network"] == "true"
        code, body, headers = _request(port, "/t.pftrace", host=f"localhost:{port}")
        assert code == 200 and body == run_copy.read_bytes() and headers["Access-Control-Allow-Origin"] == UI
        assert proc.wait(timeout=10) == 0 and proc.stderr.read() == ""
    finally:
        proc.kill()
        proc.wait()


def _open(trace: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("open", trace, "--no-browser", "--port", _free_port(), "--timeout", "5", *args)


@pytest.mark.parametrize("name", ["../secret.pftrace", "/etc/passwd", "sub/w.pftrace", "..", "", 7])
def test_open_refuses_index_names_leading_out(run_copy: Path, name: object):
    """index.json comes with the trace: a window named outside its folder was served (/etc/passwd included)."""
    (run_copy.parent / "secret.pftrace").write_bytes(b"secret")
    index = _index(run_copy)
    data = json.loads(index.read_text())
    data["windows"][1]["file"] = name
    index.write_text(json.dumps(data))
    r = _open(run_copy, "--window", "1")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"vizexport: error: {index}: window 1 names {name!r}, not a file in t.windows{os.sep} " \
                       "(refused)\n"


def test_open_refuses_links_out_of_the_folder(run_copy: Path, tmp_path: Path):
    """A window (or the trace) that is a link to a file elsewhere is not served, nor given to a trace processor."""
    (outside := tmp_path / "private.pftrace").write_bytes(b"private")
    window = run_copy.parent / "t.windows" / json.loads(_index(run_copy).read_text())["windows"][0]["file"]
    window.unlink()
    window.symlink_to(outside)
    for extra in ((), ("--trace-processor", "/bin/true")):
        r = _open(run_copy, "--window", "0", *extra)
        assert r.returncode == 1 and r.stderr == (f"vizexport: error: {window}: leads to {outside.resolve()}, outside "
                                                  f"the trace's folder {run_copy.parent} (not served)\n"), r.stderr


@pytest.mark.parametrize("text,needle", [
    ("{not json", "not a windows index (not JSON: Expecting property name enclosed in double quotes: line 1 column 2"),
    ("\udcff", "not a windows index (not JSON: 'utf-8' codec can't decode byte 0xff in position 0"),
    ("[1, 2]", "not a windows index (no list of windows)"),
    ('{"windows": 5}', "not a windows index (no list of windows)"),
    ('{"windows": [], "t0_ns": 0}', "lists no windows"),
    ('{"windows": [7], "t0_ns": 0}', "window 0 is 7, not a window"),
    ('{"windows": [{"file": "w"}], "t0_ns": "0"}', "t0_ns is '0', not a time in ns"),
    ('{"windows": [{"file": "w", "start_ns": 0, "end_ns": 9223372036854775808, "events": 1, "start_s": 0, '
     '"end_s": 1}], "t0_ns": 0}', "window 0's end_ns is 9223372036854775808, not a number of its kind"),
    ('{"windows": [{"file": "w", "start_ns": 0, "end_ns": 1, "events": 1, "start_s": 0, "end_s": NaN}], "t0_ns": 0}',
     "window 0's end_s is nan, not a number of its kind")])
def test_open_refuses_a_malformed_index(run_copy: Path, text: str, needle: str):
    """Each ended in the bug wording (a TypeError or JSONDecodeError)."""
    index = _index(run_copy)
    index.write_bytes(text.encode(errors="surrogateescape"))
    r = _open(run_copy, "--at", "0.1s")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"vizexport: error: {index}: {needle}"), r.stderr


def test_open_gives_up_when_nothing_fetches(run_copy: Path):
    """It served until something fetched the trace: forever, when nothing did."""
    t0 = time.monotonic()
    r = _open(run_copy, "--timeout", "0.5")
    assert r.returncode == 1 and time.monotonic() - t0 < 30
    assert r.stderr == (f"vizexport: error: {run_copy}: the Perfetto UI did not fetch it within 0.5 s (nothing "
                        "served; --timeout SEC waits longer)\n")


def test_open_on_a_busy_port(run_copy: Path):
    """Was `vizexport: error: out/t.pftrace: Address already in use`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli("open", run_copy, "--no-browser", "--port", port, "--timeout", "5")
    assert r.returncode == 1 and r.stderr == (f"vizexport: error: port {port} on 127.0.0.1 is busy (another "
                                              "`vizexport open` or a trace processor? stop it: the Perfetto UI "
                                              "fetches from port 9001 only)\n")


# ---- files and outputs ----

def test_fifo_is_refused(tmp_path: Path):
    os.mkfifo(fifo := tmp_path / "fifo.pkl")
    r = run_cli("info", fifo)
    assert r.returncode == 1 and r.stderr == f"vizexport: error: {fifo}: is a fifo, not a pickle file\n"


@pytest.mark.parametrize("output", ["/dev/full", "existing", "existing.txt"])
def test_outputs_that_are_not_trace_files(tmp_path: Path, output: str):
    target = Path(output) if output.startswith("/") else tmp_path / output
    if not target.exists():
        target.write_text("keep me")
    before = target.read_bytes() if target.is_file() else None
    r = run_cli(SAMPLE / "profile.pkl", "-o", target)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and str(target) in r.stderr and "Traceback" not in r.stderr
    assert before is None or target.read_bytes() == before


def test_folder_name_with_dots(tmp_path: Path):
    r = run_cli(SAMPLE / "profile.pkl", "-o", f"{tmp_path}/site.v1.2/")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "site.v1.2" / "index.html").exists() and (tmp_path / "site.v1.2" / "trace.pftrace").exists()


def test_folder_that_is_not_ours_is_left_alone(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("mine")
    r = run_cli(SAMPLE / "profile.pkl", "-o", f"{tmp_path}/docs/")
    assert r.returncode == 1 and "not an empty folder or an earlier vizexport output" in r.stderr
    assert [p.name for p in (tmp_path / "docs").iterdir()] == ["notes.md"]


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (8_000, 8_000))


@pytest.mark.parametrize("output", ["t.pftrace", "site/"])
def test_full_disk(tmp_path: Path, output: str):
    """Writing fails part-way (a file size limit stands in for a full disk): one line, nothing left, an earlier
    output untouched."""
    if output == "site/":
        assert run_cli(SAMPLE / "profile.pkl", "-o", tmp_path / "site").returncode == 0  # an earlier good site
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = subprocess.run([sys.executable, "-m", "vizexport", SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o",
                        tmp_path / output], capture_output=True, text=True, preexec_fn=_small_files, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "File too large" in r.stderr, r.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_reader_closes_the_pipe():
    """`vizexport info … | head`: the rest is not wanted; no traceback, the pipe's exit status."""
    many = " ".join([str(SAMPLE / "profile.pkl")] * 200)  # more JSON than a pipe buffers
    cmd = f"{sys.executable} -m vizexport info --json {many} | head -c 10"
    r = subprocess.run(["bash", "-c", f"{cmd}; exit ${{PIPESTATUS[0]}}"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 141 and r.stderr == "" and len(r.stdout) == 10


# ---- AMD thread traces ----

GEMM = FIXTURES / "sqtt" / "gfx1100" / "profile_gemm_run_0.pkl"


def _flipped(blob: bytes, seed: int, flips: int = 5) -> bytes:
    rng, out = random.Random(seed), bytearray(blob)
    for _ in range(flips):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


@pytest.mark.skipif(not GEMM.exists(), reason="sqtt fixtures not present")
@pytest.mark.parametrize("how", ["empty", "doubled", "flipped"])
def test_corrupt_sqtt_blobs_are_reported(how: str):
    """One warning naming the launch and SE. (A flip that breaks the packet stream, as this one does, is found; SQTT
    has no checksum, so a flip inside a value, e.g. a time delta, cannot be told from a real one.)"""
    (la, *_) = find_launches(vizexport.load_profile(GEMM))
    blob = la.sqtt[0].blob
    bad = {"empty": b"", "doubled": blob + blob, "flipped": _flipped(blob, seed=1)}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        decode_blob(replace(la.sqtt[0], blob=bad[how]), la)
    assert len(seen) == 1 and f"{la.label} SE 0" in str(seen[0].message)


@pytest.mark.skipif(not GEMM.exists(), reason="sqtt fixtures not present")
def test_doubled_blob_through_the_command(tmp_path: Path):
    data = GEMM.read_bytes()
    (la, *_) = find_launches(vizexport.load_profile(GEMM))
    blob = la.sqtt[0].blob
    framed = b"B" + struct.pack("<I", len(blob)) + blob
    assert data.count(framed) == 1
    o = judged(tmp_path, data.replace(framed, b"B" + struct.pack("<I", 2 * len(blob)) + blob + blob), "convert")
    assert o.rc == 0 and "vizexport: warning: SQTT" in o.stderr and "earlier than the one before" in o.stderr


# ---- seeded mutations of real pickles ----

def test_seeded_mutations(tmp_path: Path):
    """Mutations of the bundled sample (and, where present, of the smallest fixtures): none fails a check. CI runs a
    few hundred; `python tools/fuzz.py --cases N` runs thousands."""
    files = [SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl"]
    files += [f for f in (FIXTURES / "tinygrad" / "0.10.3" / "profile.pkl", FIXTURES / "tinygrad" / "0.11.0" /
                          "rewrites.pkl", FIXTURES / "sqtt" / "gfx1200" / "profile_gemm_run_0.pkl") if f.exists()]
    outcomes, failures = FUZZ.fuzz(files, FUZZ.Settings(80, seed=16, timeout=TIMEOUT, log=False))
    assert len(outcomes) == 80 * len(files)
    assert not failures, [(o.case, p, o.stderr[-300:]) for o, p in failures[:5]]
    assert {o.rc for o in outcomes} == {0, 1}  # some mutations still convert, most are refused


def _small_inputs() -> list[Path]:
    """The sample, and the smallest fixtures of each kind where present."""
    return [SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl"] + [
        f for f in (FIXTURES / "tinygrad" / "0.10.3" / "profile.pkl", FIXTURES / "tinygrad" / "0.11.0" / "rewrites.pkl")
        if f.exists()]


def test_seeded_object_mutations():
    """Pickles that load but hold what no tinygrad writes (any type anywhere, ints past int64 and past 4,300 digits,
    NaN and infinity, None, shared and deeply nested values) through every command: none fails a check; none ends
    in the wording of an unanticipated error."""
    files = _small_inputs()
    run = FUZZ.Settings(OBJECT_CASES, seed=33, timeout=TIMEOUT, kinds=("objects",), log=False)
    outcomes, failures = FUZZ.fuzz(files, run)
    assert len(outcomes) == OBJECT_CASES * len(files)
    assert not failures, [(o.case, o.mode, p, o.stderr[-300:]) for o, p in failures[:5]]
    assert {o.rc for o in outcomes} == {0, 1}  # some still convert (shown as data), some are refused (named)
    assert {o.mode for o in outcomes} == {*FUZZ.PROFILE_MODES, *FUZZ.REWRITES_MODES}


OBJECT_CASES = 12  # per file: 48 cases, about 20 s for the four small inputs


def test_object_mutations_make_loadable_pickles(tmp_path: Path):
    """The object mutator does what it says: every kind occurs, each result loads with vizexport's unpickler and
    differs from the input."""
    path, case = SAMPLE / "profile.pkl", tmp_path / "case.pkl"
    rng, original, kinds = random.Random(5), FUZZ.repickle(pickles.load(path)[0]), set()
    for _ in range(40):
        what, tree = FUZZ.mutate_tree(pickles.load(path)[0], rng)
        with FUZZ._recursion(FUZZ.PICKLE_RECURSION):
            case.write_bytes(data := FUZZ.repickle(tree))
        assert data != original and type(pickles.load(case)[0]) is list, what
        kinds.update(k for k, word in KIND_WORDS.items() if word in what)
    assert kinds == set(FUZZ.OBJECT_MUTATIONS)


KIND_WORDS = {"type": " → ", "huge": "an int of", "float": "float(", "none": ": None", "shared": "references to one",
              "deep": "nested", "text": "text '"}


def test_output_checks():
    """A case that succeeds is judged by what it prints too (terminal escapes, CI workflow commands, size), and an
    error in the wording of an unanticipated one fails."""
    def outcome(stdout: str = "", stderr: str = "", rc: int = 0, written: int = 100, size: int = 100) -> object:
        return FUZZ.Outcome("crafted", "info", rc, stderr, 0.1, 0, 1 << 30, [], stdout, written, size)

    assert outcome("kernel E_4\ttook 1 µs\n").problems(TIMEOUT) == []
    for text in ("name \x1b[31mred", "\x9b31m", "nul\x00", "cr\r"):
        assert outcome(text).output_problems() == ["control character in output"], text
    assert outcome("ok\n::error file=x::pwned\n").output_problems() == ["workflow command in output"]
    assert outcome("a :: b\n").output_problems() == []
    assert outcome(written=64 << 20).output_problems() == []
    assert outcome(written=(64 << 20) + 1).output_problems() == ["output over the size bound"]
    assert outcome(written=64 * (2 << 20), size=2 << 20).output_problems() == []
    assert outcome(written=64 * (2 << 20) + 1, size=2 << 20).output_problems() == ["output over the size bound"]
    bug = outcome(stderr=f"vizexport: error: /x/case.pkl: ValueError: boom ({vizexport.cli.BUG})\n", rc=1)
    assert bug.problems(TIMEOUT) == ["unanticipated error"]
    assert outcome("\x1b[2J").problems(TIMEOUT) == ["control character in output"]


def test_every_cut_of_a_small_profile(tmp_path: Path):
    """Cut at every offset: 0.10.3's 281-byte profile, or the first 2 KB of the sample without fixtures."""
    small = FIXTURES / "tinygrad" / "0.10.3" / "profile.pkl"
    data = small.read_bytes() if small.exists() else (SAMPLE / "profile.pkl").read_bytes()[:2048]
    folder = tmp_path / "cut"
    folder.mkdir()
    for n in range(len(data)):
        o = FUZZ.run_case(data[:n], "convert", folder, f"cut {n}", TIMEOUT)
        assert o.rc == 1 and not o.problems(TIMEOUT), (n, o.stderr)
