"""What a newcomer meets first (issue #34): commands named no pickle read tinygrad's latest where tinygrad writes them,
`open PROFILE.pkl` serves a trace, `info` lists markers, words on a terminal within a second with honest bars, and
options that do not apply are usage errors."""
from __future__ import annotations

import fcntl
import getpass
import json
import os
import pty
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import termios
import time
import urllib.request
from pathlib import Path

import pytest

from vizexport import progress
from vizexport.latest import age_text, latest_inputs
from vizexport.tinygrad import locations

from . import tinyfake as tf
from .conftest import ROOT, on_terminal, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"
USER = getpass.getuser()
UI = "https://ui.perfetto.dev"
HOUR = 3600


def cli(tmp: Path, *args: object) -> subprocess.CompletedProcess:
    """The command with its temp folder (TMPDIR) at `tmp`: where it looks for tinygrad's pickles."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "vizexport", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)


def plant(folder: Path, kind: str, name: str, age: float = 0) -> Path:
    """A copy of the bundled sample's `kind` ("profile" or "rewrites") as tinygrad names it, written `age` s ago."""
    path = folder / name
    shutil.copyfile(SAMPLE / f"{kind}.pkl", path)
    t = time.time() - age
    os.utime(path, (t, t))
    return path


def taken(command: str, *paths: Path) -> re.Pattern:
    files = ", ".join(re.escape(str(p)) + r" \(written \d+ s ago\)" for p in paths)
    return re.compile(f"vizexport {command}: tinygrad's latest: {files}\n")


# ---- where tinygrad writes ----

def test_names_per_release():
    """0.10.2 to master: NAME.pkl.<getpass.getuser()>; 0.10.0 wrote rewrites.pkl without the user (and no profile
    pickle)."""
    assert locations.names(locations.PROFILE)[0] == f"profile.pkl.{USER}"
    assert locations.names(locations.REWRITES)[0] == f"rewrites.pkl.{USER}"
    assert locations.names(locations.REWRITES)[-1] == "rewrites.pkl"
    assert "profile.pkl" not in locations.names(locations.PROFILE)


def test_the_newest_of_a_kind_is_taken(tmp_path: Path):
    plant(tmp_path, "rewrites", f"rewrites.pkl.{USER}", age=HOUR)
    new = plant(tmp_path, "rewrites", "rewrites.pkl", age=10)  # a 0.10.0 run, newer
    found = locations.latest(locations.REWRITES, tmp_path)
    assert found is not None and found.path == new and abs(found.mtime - (time.time() - 10)) < 5
    assert locations.latest(locations.PROFILE, tmp_path) is None
    paths, line = latest_inputs("show", tmp_path)
    assert paths == [new] and line.startswith(f"vizexport show: tinygrad's latest: {new} (written 1")


def test_a_link_or_someone_elses_file_is_not_taken(tmp_path: Path):
    """The temp folder is shared: a name planted there by another user, or a link, is not read."""
    (tmp_path / f"profile.pkl.{USER}").symlink_to(SAMPLE / "profile.pkl")
    assert locations.latest(locations.PROFILE, tmp_path) is None
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    other = plant(tmp_path, "rewrites", f"rewrites.pkl.{USER}")
    os.chown(other, os.geteuid() + 1, -1)
    assert locations.latest(locations.REWRITES, tmp_path) is None


def test_age_text():
    assert [age_text(s) for s in (0, 59, 60, 3599, 7200, 3 * 86400)] == ["0 s", "59 s", "1 min", "59 min", "2 h",
                                                                        "3 days"]


# ---- commands named no pickle ----

def test_top_reads_the_latest_pickles_and_says_which(tmp_path: Path):
    prof = plant(tmp_path, "profile", f"profile.pkl.{USER}")
    old = plant(tmp_path, "rewrites", "rewrites.pkl", age=2 * HOUR)  # 0.10.0's name, older: not the latest
    rw = plant(tmp_path, "rewrites", f"rewrites.pkl.{USER}", age=5)
    r = cli(tmp_path, "top", "-n", "3")
    named = run_cli("top", "-n", "3", prof, rw)
    assert r.returncode == 0 and r.stdout == named.stdout and "8 kernels, 24 launches" in r.stdout
    assert taken("top", prof, rw).fullmatch(r.stderr), r.stderr
    assert f"{old} (" not in r.stderr


def test_the_line_shows_a_hostile_temp_path_escaped(tmp_path: Path):
    """The temp folder's name is the environment's: shown with its control characters escaped (text.shown)."""
    folder = tmp_path / "t\x1b]0;owned\x07\u202e"
    folder.mkdir()
    plant(folder, "profile", f"profile.pkl.{USER}")
    r = cli(folder, "info")
    assert r.returncode == 0, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"vizexport info: tinygrad's latest: {tmp_path}/t\\x1b]0;owned\\x07\\u202e/profile.pkl.")
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and "\u202e" not in r.stderr


@pytest.mark.parametrize(("args", "kinds"), [
    (("info", "--json"), ("profile", "rewrites")), (("show", "--json"), ("rewrites",)),
    (("report", "-o", "r.json"), ("profile", "rewrites")),
])
def test_each_command_takes_the_kinds_it_reads(tmp_path: Path, args: tuple[str, ...], kinds: tuple[str, ...]):
    paths = {k: plant(tmp_path, k, f"{k}.pkl.{USER}") for k in ("profile", "rewrites")}
    r = cli(tmp_path, *[str(tmp_path / a) if a.endswith(".json") else a for a in args])
    assert r.returncode == 0, r.stderr
    assert taken(args[0], *(paths[k] for k in kinds)).fullmatch(r.stderr), r.stderr
    if args[0] == "info":
        assert [s["file"] for s in json.loads(r.stdout)] == [str(paths["profile"]), str(paths["rewrites"])]
    if args[0] == "show":
        assert len(json.loads(r.stdout)["contexts"]) == 20  # the sample's 20 contexts


def test_convert_and_history_take_the_latest(tmp_path: Path):
    prof = plant(tmp_path, "profile", f"profile.pkl.{USER}")
    r = cli(tmp_path, "-o", tmp_path / "t.pftrace")
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {tmp_path}/t.pftrace: 673 events")
    assert taken("convert", prof).fullmatch(r.stderr), r.stderr
    r = cli(tmp_path, "history", "add", tmp_path / "runs.db", "--commit", "abc", "--branch", "main")
    assert r.returncode == 0 and taken("history", prof).fullmatch(r.stderr), r.stderr
    assert "abc" in cli(tmp_path, "history", "list", tmp_path / "runs.db").stdout


@pytest.mark.parametrize("args", [("top",), ("report",), ("info",), ("show",), ("open", "--no-browser"),
                                  ("-o", "t.pftrace"), ("history", "add", "s.db", "--commit", "a", "--branch", "b")])
def test_no_pickles_is_one_line(tmp_path: Path, args: tuple[str, ...]):
    plant(tmp_path, "profile", f"profile.pkl.{USER}x")  # another user's name: not ours
    r = cli(tmp_path, *args)
    command = "convert" if args[0] == "-o" else args[0]
    example = "REWRITES.pkl" if command == "show" else "PROFILE.pkl"
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"vizexport: error: {tmp_path}: no tinygrad pickle to read (looked for ")
    assert r.stderr.endswith(f"); name one: vizexport {command} {example}\n")
    assert (f"profile.pkl.{USER}, which tinygrad writes with PROFILE=1 or VIZ=1" in r.stderr) == (command != "show")
    assert (f"rewrites.pkl.{USER} or rewrites.pkl, which tinygrad writes with VIZ=1" in r.stderr) == \
        (command in ("show", "info", "convert"))
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "t.pftrace").exists()


def test_a_needed_kind_missing_is_named(tmp_path: Path):
    """Rewrites alone: `show` reads them, `top` needs a profile and says so."""
    plant(tmp_path, "rewrites", f"rewrites.pkl.{USER}")
    r = cli(tmp_path, "top")
    assert r.returncode == 1 and r.stderr == (f"vizexport: error: {tmp_path}: no tinygrad pickle to read (looked "
                                              f"for profile.pkl.{USER}, which tinygrad writes with PROFILE=1 or "
                                              "VIZ=1); name one: vizexport top PROFILE.pkl\n")


# ---- open PROFILE.pkl ----

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_open_a_profile_serves_a_trace_of_it(tmp_path: Path):
    """Was: the pickle itself served (ui.perfetto.dev cannot read it). Now its trace, from a private temporary folder
    that is gone when the command ends."""
    expected = tmp_path / "expected.pftrace"
    assert run_cli(SAMPLE / "profile.pkl", "-o", expected).returncode == 0
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "vizexport", "open", str(SAMPLE / "profile.pkl"), "--no-browser",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        folder = Path(re.fullmatch(r"serving (\S+)/profile\.pftrace on .*\n", line).group(1))
        assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0  # private
        assert f"{UI}/#!/?url=http://127.0.0.1:{port}/profile.pftrace" in proc.stdout.readline()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/profile.pftrace", headers={"Origin": UI})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.read() == expected.read_bytes()
        assert proc.wait(timeout=30) == 0 and proc.stderr.read() == ""
        assert not folder.exists()
    finally:
        proc.kill()


def test_open_a_profile_on_a_busy_port_converts_nothing(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli(tmp_path, "open", SAMPLE / "profile.pkl", "--no-browser", "--port", port)
    assert r.returncode == 1 and r.stderr == (f"vizexport: error: port {port} on 127.0.0.1 is busy (another "
                                              "`vizexport open` or a trace processor? stop it: the Perfetto UI "
                                              "fetches from port 9001 only)\n")
    assert list(tmp_path.iterdir()) == []  # no temporary folder made, none left


def test_open_a_profile_reads_the_latest_and_refuses_windows(tmp_path: Path):
    prof = plant(tmp_path, "profile", f"profile.pkl.{USER}")
    r = cli(tmp_path, "open", "--no-browser", "--port", _free_port(), "--timeout", "0.5")
    lines = r.stderr.splitlines(keepends=True)
    assert r.returncode == 1 and len(lines) == 2 and taken("open", prof).fullmatch(lines[0]), r.stderr
    assert lines[1] == (f"vizexport: error: {prof}: the Perfetto UI did not fetch it within 0.5 s (nothing served; "
                        "--timeout SEC waits longer)\n")  # named by the pickle, not the temporary trace
    assert [p.name for p in tmp_path.iterdir()] == [prof.name]  # the temporary trace's folder is gone
    r = run_cli("open", SAMPLE / "profile.pkl", "--at", "1s")
    assert r.returncode == 2 and r.stderr == ("vizexport open: --at picks a window of a trace written as windows; a "
                                              "profile.pkl is opened whole (see vizexport open --help)\n")


# ---- info lists markers ----

def test_info_lists_markers(tmp_path: Path):
    """Names (shown safely as text, exact in JSON), counts, and the first time from the profile's first event."""
    f = tmp_path / "p.pkl"
    f.write_bytes(tf.profile(tf.span(st=1.0, en=2.0), tf.point("marker", 1.5, arg={"name": "step"}),
                             tf.point("marker", 2.5, arg={"name": "eval\x1b[2J"}),
                             tf.point("marker", 3.0, arg={"name": "step"}),
                             tf.point("marker", 4.25, arg={"name": "step"})))
    r = run_cli("info", "--json", f)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["markers"] == [{"name": "step", "count": 3, "first_ns": 500},
                                                   {"name": "eval\x1b[2J", "count": 1, "first_ns": 1500}]
    text = run_cli("info", f).stdout.splitlines()
    at = text.index("  markers: 4 (2 names)")
    assert text[at + 1:] == ["    step         ×3    first at 500 ns", "    eval\\x1b[2J  ×1    first at 1.500 µs"]


def test_info_without_markers_says_nothing_of_them(tmp_path: Path):
    f = tmp_path / "p.pkl"
    f.write_bytes(tf.profile(tf.span(st=1.0, en=2.0)))
    r = run_cli("info", "--json", f)
    assert r.returncode == 0 and "markers" not in json.loads(r.stdout)[0]
    assert "  markers:" not in run_cli("info", f).stdout


def test_info_lists_the_samples_markers():
    r = run_cli("info", SAMPLE / "profile.pkl", "--json")
    marks = json.loads(r.stdout)[0]["markers"]
    assert [(m["name"], m["count"]) for m in marks] == [("jit step 0", 1), ("jit step 1", 1), ("jit step 2", 1),
                                                        ("jit step 3", 1), ("matmul done", 1), ("symbolic done", 1)]
    assert [m["first_ns"] for m in marks] == sorted(m["first_ns"] for m in marks) and marks[0]["first_ns"] > 0


# ---- words on a terminal ----

def test_first_words_within_a_second_and_whole_counts(tmp_path: Path):
    """Was: nothing on the terminal until the writing began (2 to 10 s for 1M events), then `1.00/20.0` on the
    site's bar. Now a status line first (within a second: benchmarks/bench_first_words.py times it; a timed test
    would fail on a busy runner), and bars that count whole contexts."""
    first, seen, code = on_terminal(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", tmp_path / "site")
    assert code == 0 and first is not None
    text = seen.decode()
    assert text.startswith("\rvizexport: starting · 0 s\x1b[K")
    assert "\rreading profile.pkl, rewrites.pkl (318.0 KiB) · 0 s\x1b[K" in text
    # whole counts of the 20 contexts (tqdm draws at most every 0.1 s: the last count shown varies with the load)
    assert "writing rewrite contexts:" in text and re.search(r"\| \d+/20 contexts \[", text)
    assert not re.search(r"\d\.\d+/\d", text)  # no float counts
    piped = run_cli(SAMPLE / "profile.pkl", "-o", tmp_path / "t.pftrace")
    assert piped.returncode == 0 and piped.stderr == ""  # nothing of this in pipes or logs


def test_usage_error_on_a_terminal_is_one_clean_line(tmp_path: Path):
    """The status line is erased before argparse prints: the line reads as it does in a pipe."""
    _, seen, code = on_terminal("top", "-n")
    assert code == 2 and seen.decode().endswith(
        "\r\x1b[Kvizexport top: argument -n: expected one argument (see vizexport top --help)\r\n")


def test_bars_one_per_phase(monkeypatch: pytest.MonkeyPatch):
    """The SVG export reports its drawing (rough work: a percentage), then its contexts: a bar each, the second made
    at the first report after the first is complete; a repeated last report stays in its phase."""
    made = []

    class Bar:
        def __init__(self, label: str, unit: str, total: int) -> None:
            self.label, self.unit, self.total, self.n, self.closed = label, unit, total, 0, False
            made.append(self)

        def update(self, k: int) -> None:
            self.n += k

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(progress, "_bar", Bar)
    bars = progress.Bars([("drawing step SVGs", progress.PERCENT), ("writing rewrite contexts", " contexts")])
    for done in (50, 120, 120):
        bars(done, 120)
    for done in (1, 2, 3):
        bars(done, 3)
    bars.close()
    assert [(b.label, b.unit, b.n, b.total, b.closed) for b in made] == [
        ("drawing step SVGs", "%", 120, 120, True), ("writing rewrite contexts", " contexts", 3, 3, True)]


# ---- options that do not apply ----

@pytest.mark.parametrize(("args", "line"), [
    (("--ctx", "E_"), "--ctx shapes the SVG export of a rewrites trace alone (-o OUTDIR/), not a site (-o OUTDIR/ "
                      "with a profile)"),
    (("--steps", "all"), "--steps shapes the SVG export of a rewrites trace alone (-o OUTDIR/), not a site (-o "
                         "OUTDIR/ with a profile)"),
])
def test_svg_options_on_a_site_are_usage_errors(tmp_path: Path, args: tuple[str, ...], line: str):
    """Were silently ignored. Refused once the inputs tell a site from the SVG export; nothing is written."""
    r = run_cli(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", tmp_path / "site", *args)
    assert r.returncode == 2 and r.stdout == "" and r.stderr == f"vizexport convert: {line} (see vizexport convert " \
        "--help)\n"
    assert not (tmp_path / "site").exists()


def test_options_on_a_trace_are_refused_before_reading(tmp_path: Path):
    """A trace output refuses every folder option at once, before its input is read (here: there is none)."""
    for option, value in (("--ctx", "x"), ("--rewrite", "x"), ("--all-steps", None), ("--jobs", "0"),
                          ("--baseline", "b.pkl"), ("--peak-gflops", "9")):
        r = run_cli(tmp_path / "missing.pkl", "-o", tmp_path / "t.pftrace", option, *([value] if value else []))
        assert r.returncode == 2 and r.stderr.startswith(f"vizexport convert: {option} shapes "), r.stderr
        assert r.stderr.endswith(f", not {tmp_path}/t.pftrace, a trace (see vizexport convert --help)\n")


def test_status_draws_while_the_unpickler_holds_stderr(monkeypatch: pytest.MonkeyPatch):
    """pickles.load swaps sys.stderr for a buffer while it loads: the status line still reaches the terminal (it
    stayed at `· 0 s` for the first 6 s of a 71 MiB profile)."""
    import io
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 30, 0, 0))
    term = os.fdopen(follower, "w")
    monkeypatch.setattr(sys, "stderr", term)
    s = progress.Status()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    s.say("reading p.pkl (71.3 MiB)")
    s.since -= 7
    s._draw()
    s.stop()
    term.close()
    seen = b""
    while select.select([leader], [], [], 1)[0]:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    lines = seen.decode().split("\r")
    assert lines[1] == "reading p.pkl (71.3 MiB) · 0 \x1b[K"  # cut to the terminal's 30 columns, less one
    assert "reading p.pkl (71.3 MiB) · 7 \x1b[K" in lines and lines[-1] == "\x1b[K"  # erased at the end
