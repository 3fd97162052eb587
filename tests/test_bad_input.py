"""Bad input: one line on stderr naming the file and the problem, exit code 1, no partial output, no traceback."""
from __future__ import annotations

import pickle
from decimal import Decimal
from pathlib import Path

import pytest

import vizexport
from vizexport.pickles import InputError

from .conftest import FIXTURES, ROOT, fixture_files, on_terminal, run_cli

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"


def check_error(path: Path, *needles: str, command: tuple[str, ...] = ("info",)) -> None:
    r = run_cli(*command, path)
    assert r.returncode == 1, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(path) in lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


def test_empty(tmp_path: Path):
    (f := tmp_path / "empty.pkl").write_bytes(b"")
    check_error(f, "empty file")


def test_text_file(tmp_path: Path):
    (f := tmp_path / "notes.pkl").write_text("hello, this is not a pickle\n")
    check_error(f, "not a pickle")


def test_missing_file(tmp_path: Path):
    check_error(tmp_path / "nope.pkl", "cannot open")


@pytest.mark.parametrize("cut", [3, 100, 0.5, 0.9, -1])
def test_truncated(tmp_path: Path, cut: float):
    data = (SAMPLE / "profile.pkl").read_bytes()
    n = int(len(data) * cut) if isinstance(cut, float) else cut if cut > 0 else len(data) + cut
    (f := tmp_path / "cut.pkl").write_bytes(data[:n])
    check_error(f, "truncated")


def test_garbage_after_header(tmp_path: Path):
    (f := tmp_path / "garbage.pkl").write_bytes(b"\x80\x04" + bytes(range(7, 250)) * 3)
    check_error(f, "corrupt pickle")


def test_rewrites_where_profile_needed():
    with pytest.raises(InputError, match="not a tinygrad profile \\(a rewrites trace"):
        vizexport.load_profile(SAMPLE / "rewrites.pkl")


def test_profile_where_rewrites_needed():
    with pytest.raises(InputError, match="not a tinygrad rewrites trace"):
        vizexport.load_rewrites(SAMPLE / "profile.pkl")


@pytest.mark.parametrize("obj", [{"a": 1}, [1, 2, 3], (1, 2, 3, 4), "text"])
def test_wrong_kind_of_pickle(tmp_path: Path, obj):
    (f := tmp_path / "other.pkl").write_bytes(pickle.dumps(obj, protocol=4))
    check_error(f, "not a tinygrad")


def test_unknown_release(tmp_path: Path):
    """Events of a layout no release used (a future ProfileEvent2 class): refused with a clear reason."""
    stream = (b"\x80\x04]\x94(ctinygrad.helpers\nProfileEvent2\n)\x81}(\x8c\x02ts" + pickle.dumps(Decimal(1))[2:-1]
              + b"ube.")
    (f := tmp_path / "future.pkl").write_bytes(stream)
    check_error(f, "unknown tinygrad release")


def test_unknown_version_flag():
    r = run_cli("info", "--tinygrad-version", "0.99", SAMPLE / "profile.pkl")
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.skipif(not fixture_files("tinygrad/*/profile.pkl"), reason="../shared/fixtures not present")
def test_random_cuts_of_every_fixture(tmp_path: Path):
    """Every fixture cut at several offsets fails cleanly (never a traceback, never a hang)."""
    for src in fixture_files("tinygrad/*/*.pkl"):
        data = src.read_bytes()
        for frac in (0.13, 0.5, 0.77):
            f = tmp_path / "cut.pkl"
            f.write_bytes(data[: int(len(data) * frac)])
            with pytest.raises(InputError) as e:
                vizexport.load_any(f)
            assert str(f) in str(e.value), (src.relative_to(FIXTURES), frac)


def test_progress_bar_only_on_a_terminal(tmp_path: Path):
    """On a terminal the conversion draws a tqdm bar on stderr; through a pipe (CI logs) stderr stays empty."""
    sample = ROOT / "vizexport" / "data" / "sample" / "profile.pkl"
    piped = run_cli(sample, "-o", tmp_path / "a.pftrace")
    assert piped.returncode == 0 and piped.stderr == ""
    _, seen, code = on_terminal(sample, "-o", tmp_path / "b.pftrace", columns=100)  # a terminal 100 columns wide
    assert code == 0 and b"writing" in seen and b"events" in seen


@pytest.mark.parametrize(("args", "line"), [
    (("diff", "a.pkl"), "vizexport diff: missing PR.pkl (see vizexport diff --help)"),
    (("top", "-n"), "vizexport top: argument -n: expected one argument (see vizexport top --help)"),
    (("x.pkl", "-o", "t.pftrace", "--max-nodes", "9"), "vizexport convert: --max-nodes shapes the SVG export of a "
     "rewrites trace alone (-o OUTDIR/) or a site (-o OUTDIR/ with a profile), not t.pftrace, a trace (see vizexport "
     "convert --help)"),
    (("report", "--bogus", "x.pkl"), "vizexport report: unrecognized arguments: --bogus (see vizexport report --help)"),
    (("x.pkl",), "vizexport convert: missing -o/--output (see vizexport convert --help)"),
    (("history", "check", "s.db"), "vizexport history check: missing --branch (see vizexport history check --help)"),
    ((), "vizexport: missing command (see vizexport --help)"),
])
def test_usage_errors_are_one_line_naming_the_command(args: tuple[str, ...], line: str):
    r = run_cli(*args)
    assert r.returncode == 2 and r.stderr == line + "\n" and r.stdout == ""


def test_every_command_has_a_clean_help():
    for command in ("convert", "info", "top", "show", "report", "diff", "open", "demo", "history"):
        r = run_cli(command, "--help")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: vizexport {command}"), (command, r.stdout[:200])
