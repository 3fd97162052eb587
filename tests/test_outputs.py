"""Outputs on the file system, safe against what a pull request's profile (or a careless `-o`) could do: a folder
is replaced only if it is empty or a stamped vizexport output holding nothing else, and then only the files its stamp
lists go; temporaries are never followed through a planted symlink; names from a pickle make files that every OS
can hold; `-o` naming a symlink, `.` or `..` ends cleanly."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import vizexport
from vizexport.graphs.export import TAKEN, unique_slugs
from vizexport.output import (
    RESERVED,
    STALE_SECONDS,
    STAMP,
    atomic_file,
    atomic_folder,
    clean_stale,
    remove_leftovers,
    slug,
    write_atomic,
)

from . import tinyfake as tf
from .conftest import ROOT, needs_dot, run_cli

SAMPLE = ROOT / "vizexport" / "data" / "sample"
DEAD_PID = 2**22 + 1  # above Linux's largest pid: no process has it


def snapshot(root: Path) -> dict[str, bytes | str | None]:
    """Every entry under `root` (hidden ones too): file bytes, a symlink's target, None for a folder."""
    out: dict[str, bytes | str | None] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = os.readlink(p) if p.is_symlink() else None if p.is_dir() else p.read_bytes()
    return out


def one_line_error(r, rc: int = 1) -> str:
    assert r.returncode == rc and r.stderr.count("\n") == 1 and r.stderr.startswith("vizexport: error: "), r.stderr
    assert "Traceback" not in r.stderr and "a corrupt input or a bug" not in r.stderr
    return r.stderr


def stamp_of(folder: Path) -> dict:
    return json.loads((folder / STAMP).read_text())


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture(scope="module")
def timeline() -> vizexport.Timeline:
    return vizexport.build_timeline(vizexport.load_profile(SAMPLE / "profile.pkl"))


def build(folder: Path, files: dict[str, bytes]) -> None:
    """An output folder made as vizexport makes one (stamped), holding `files`."""
    with atomic_folder(folder) as tmp:
        for rel, data in files.items():
            write_atomic(tmp / rel, data)


# ---- replacing folders ----

def test_folder_with_our_file_names_and_user_files_is_refused(tmp_path: Path):
    """The issue's case: docs/ with an index.html among the user's files was taken for an earlier output and
    deleted whole. Now: one line, exit 1, every byte as it was, nothing beside it."""
    docs = tmp_path / "docs"
    (docs / "src").mkdir(parents=True)
    (docs / "NOTES.txt").write_text("mine\n")
    (docs / "src" / "app.py").write_text("print('hi')\n")
    (docs / "index.html").write_text("<p>my page</p>\n")
    (docs / "manifest.json").write_text("{}\n")
    before = snapshot(tmp_path)
    err = one_line_error(run_cli(SAMPLE / "profile.pkl", "-o", f"{docs}/"))
    assert f"{docs}: exists and is not an empty folder or an earlier vizexport output (it has no {STAMP}" in err
    assert snapshot(tmp_path) == before


def test_site_is_stamped_and_a_rerun_replaces_only_what_it_lists(tmp_path: Path):
    """A site lists every file it wrote in its stamp; a re-run replaces it (files of the first run that the second
    does not write are gone); a file the user added, or the stamp removed, make the next run refuse untouched."""
    site = tmp_path / "site"
    assert run_cli(SAMPLE / "profile.pkl", SAMPLE / "rewrites.pkl", "-o", f"{site}/").returncode == 0
    first = stamp_of(site)
    assert first["vizexport"] == vizexport.__version__ and sorted(first["files"]) == first["files"]
    assert first["files"] == [f for f in files_under(site) if f != STAMP]
    assert sum(f.startswith("rewrites/packs/") for f in first["files"]) > 10
    r = run_cli(SAMPLE / "profile.pkl", "-o", f"{site}/")  # no rewrites: no packs, no context pages
    assert r.returncode == 0, r.stderr
    second = stamp_of(site)["files"]
    assert second == [f for f in files_under(site) if f != STAMP] and not (site / "rewrites").exists()
    assert not any((site / f).exists() for f in set(first["files"]) - set(second))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]

    (site / "kernel" / "my-notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    err = one_line_error(run_cli(SAMPLE / "profile.pkl", "-o", f"{site}/"))
    assert f"{site}: holds kernel/my-notes.txt, which vizexport did not write (nothing was changed" in err
    assert snapshot(tmp_path) == before

    (site / "kernel" / "my-notes.txt").unlink()
    (site / STAMP).unlink()  # an output of a vizexport before stamps: not told from the user's own folder
    before = snapshot(tmp_path)
    assert f"(it has no {STAMP} stamp" in one_line_error(run_cli(SAMPLE / "profile.pkl", "-o", f"{site}/"))
    assert snapshot(tmp_path) == before


def test_empty_folder_is_used(tmp_path: Path):
    (tmp_path / "out").mkdir()
    build(tmp_path / "out", {"a.txt": b"a"})
    assert snapshot(tmp_path) == {"out": None, f"out/{STAMP}": (tmp_path / "out" / STAMP).read_bytes(),
                                  "out/a.txt": b"a"}
    assert stamp_of(tmp_path / "out")["files"] == ["a.txt"]


def test_symlink_inside_a_stamped_folder_is_not_followed(tmp_path: Path):
    """A listed folder swapped for a symlink to the user's folder holding files of the listed names: refused (the
    link is not ours), and the files it points to are never deleted."""
    out, mine = tmp_path / "out", tmp_path / "mine"
    build(out, {"static/site.css": b"ours", "index.html": b"ours"})
    mine.mkdir()
    (mine / "site.css").write_text("the user's")
    shutil.rmtree(out / "static")
    (out / "static").symlink_to(mine)
    before = snapshot(tmp_path)
    with pytest.raises(vizexport.InputError, match=r"holds static, which vizexport did not write"):
        build(out, {"index.html": b"new"})
    assert snapshot(tmp_path) == before


def test_a_stamp_listing_paths_outside_deletes_nothing_outside(tmp_path: Path):
    """A stamp is only a list of names to delete among the files found in the folder: `../x` or an absolute path
    in it is never followed."""
    out = tmp_path / "out"
    build(out, {"index.html": b"ours"})
    (tmp_path / "victim.txt").write_text("keep")
    (out / STAMP).write_text(json.dumps({"vizexport": "0", "files": ["index.html", "../victim.txt",
                                                                     str(tmp_path / "victim.txt")]}))
    build(out, {"new.html": b"new"})
    assert (tmp_path / "victim.txt").read_text() == "keep" and files_under(out) == [STAMP, "new.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "victim.txt"]


def test_error_leaves_the_old_output_as_it_was(tmp_path: Path):
    out = tmp_path / "out"
    build(out, {"index.html": b"old", "sub/a.svg": b"old"})
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), atomic_folder(out) as tmp:
        write_atomic(tmp / "index.html", b"new")
        raise RuntimeError("half-way")
    assert snapshot(tmp_path) == before


def test_file_added_during_the_run_is_kept(tmp_path: Path):
    """A file the user puts into the old folder while the new one is built is not deleted with the old output: the
    new output is in place, the file is kept (where a warning says)."""
    out = tmp_path / "out"
    build(out, {"index.html": b"old"})
    with pytest.warns(UserWarning, match="kept files vizexport did not write") as w, atomic_folder(out) as tmp:
        write_atomic(tmp / "index.html", b"new")
        (out / "late.txt").write_text("mine")
    kept = Path(str(w[0].message).rsplit(" ", 1)[1])
    assert (out / "index.html").read_bytes() == b"new" and not (out / "late.txt").exists()
    assert (kept / "late.txt").read_text() == "mine" and sorted(p.name for p in kept.iterdir()) == ["late.txt"]


def test_windows_folder_is_stamped_and_a_user_folder_of_its_name_refused(tmp_path: Path,
                                                                         timeline: vizexport.Timeline):
    split = vizexport.write_windows(timeline, tmp_path / "run.pftrace", 100)
    listed = stamp_of(split.folder)["files"]
    assert listed == ["index.json", *sorted(f"{w['file']}" for w in json.loads(
        (split.folder / "index.json").read_text())["windows"])] and len(listed) > 3
    (split.folder / "mine.txt").write_text("mine")
    before = snapshot(tmp_path)
    with pytest.raises(vizexport.InputError, match=r"holds mine\.txt"):
        vizexport.write_windows(timeline, tmp_path / "run.pftrace", 100)
    assert snapshot(tmp_path) == before


# ---- temporaries ----

class Names:
    """Stands in for the random parts of temporary names: the planted ones first (`again`: before every other
    name), then fresh ones (hex: good for both os.urandom's and tempfile's names)."""

    def __init__(self, *planted: str, again: bool = False) -> None:
        self.planted, self.queue, self.again = planted, list(planted), again
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        self.n += 1
        if not self.queue:
            self.queue = list(self.planted) if self.again else []
            return f"{self.n:08x}"
        return self.queue.pop(0)

    def urandom(self, k: int) -> bytes:
        return bytes.fromhex(next(self))


def test_planted_symlink_at_a_temporary_file_name_is_not_followed(tmp_path: Path, timeline: vizexport.Timeline,
                                                                  monkeypatch: pytest.MonkeyPatch):
    """Symlinks to a precious file at every name the trace's temporary could have (the old per-process name, and
    the random names the next writes draw, made predictable here): the target keeps its bytes, the output is a
    regular file, the planted links are left as they were."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    pid = os.getpid()
    names = Names("00000001", "00000002")
    planted = [f".t.pftrace.{pid}.part", f".t.pftrace.{pid}.00000001.part", f".t.pftrace.{pid}.00000002.part"]
    for name in planted:
        (tmp_path / name).symlink_to(victim)
    monkeypatch.setattr(os, "urandom", names.urandom)
    size = vizexport.write_trace(timeline, tmp_path / "t.pftrace")
    monkeypatch.undo()
    out = tmp_path / "t.pftrace"
    assert victim.read_bytes() == b"precious" and not out.is_symlink() and out.is_file() and size > 10_000
    assert all(os.readlink(tmp_path / n) == str(victim) for n in planted) and names.n == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*planted, "t.pftrace", "victim"])


def test_planted_symlink_at_a_temporary_folder_name_is_not_followed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    """The same for a folder: symlinks to the user's folder at the build folder's and the old output's holder's
    names (and the old fixed `.NAME.PID.old`): nothing written through them, nothing deleted through them."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("the user's")
    pid = os.getpid()
    planted = [f".out.{pid}.old", f".out.{pid}.aaaaaaaa.part", f".out.{pid}.aaaaaaaa.old"]
    for name in planted:
        (tmp_path / name).symlink_to(mine)
    build(tmp_path / "out", {"index.html": b"first"})
    names = Names("aaaaaaaa", again=True)  # the build folder's name, then the old output's holder's
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    build(tmp_path / "out", {"index.html": b"second"})
    monkeypatch.undo()
    assert snapshot(mine) == {"index.html": b"the user's"} and names.n == 4
    assert (tmp_path / "out" / "index.html").read_bytes() == b"second" and not (tmp_path / "out").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*planted, "mine", "out"])


def test_atomic_file_keeps_the_usual_permissions(tmp_path: Path):
    with atomic_file(tmp_path / "a.bin") as f:
        f.write(b"x")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o666 & ~mask


def test_stale_temporaries_are_cleaned_only_when_ours_old_and_dead(tmp_path: Path):
    """A killed run's temporaries (a file, a build folder, a holder of a replaced output) go on the next run into
    that folder; a live process's, a fresh one, a name not quite ours and a symlink's target stay."""
    (tmp_path / "victim").write_text("keep")
    dead, live = DEAD_PID, os.getpid()
    stale = [f".t.pftrace.{dead}.abcdefgh.part", f".site.{dead}.abc_1234.part", f".site.{dead}.zzzzzzzz.old",
             f".site.{dead}.linklink.part"]
    kept = [f".t.pftrace.{live}.abcdefgh.part", f".t.pftrace.{dead}.fresh123.part", ".t.pftrace.notes.part",
            f".t.pftrace.{dead}.ABCDEFGH.part", f"t.pftrace.{dead}.abcdefgh.part", f".other.{dead}.abcdefgh.part"]
    for name in stale[:1] + kept:
        (tmp_path / name).write_text("x")
    for name in stale[1:3]:
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "f.svg").write_text("x")
    (tmp_path / stale[3]).symlink_to(tmp_path / "victim")
    (tmp_path / "site").mkdir()
    old = time.time() - STALE_SECONDS - 60
    for name in stale + kept:
        if name != f".t.pftrace.{dead}.fresh123.part":
            os.utime(tmp_path / name, (old, old), follow_symlinks=False)
    clean_stale(tmp_path / "t.pftrace")
    clean_stale(tmp_path / "site")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "site", "victim"])
    assert (tmp_path / "victim").read_text() == "keep"


def test_command_cleans_a_killed_runs_trace_temporary(tmp_path: Path):
    left = tmp_path / f".t.pftrace.{DEAD_PID}.abcdefgh.part"
    left.write_bytes(b"half a trace")
    old = time.time() - STALE_SECONDS - 60
    os.utime(left, (old, old))
    assert run_cli(SAMPLE / "profile.pkl", "-o", tmp_path / "t.pftrace").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.pftrace"]


def test_leftovers_of_interrupted_workers_are_only_ours(tmp_path: Path):
    (tmp_path / "a").mkdir()
    ours = tmp_path / "a" / f".0000.svg.{DEAD_PID}.0a1b2c3d.part"
    ours.write_text("x")
    theirs = [tmp_path / ".notes.part", tmp_path / "a" / ".draft.1.part", tmp_path / "a" / "keep.part"]
    for p in theirs:
        p.write_text("mine")
    remove_leftovers(tmp_path)
    assert not ours.exists() and all(p.read_text() == "mine" for p in theirs)


# ---- names ----

@pytest.mark.parametrize(("name", "want"), [
    ("CON", "_CON"), ("con", "_con"), ("nul.txt", "_nul.txt"), ("Aux.tar.gz", "_Aux.tar.gz"), ("COM1", "_COM1"),
    ("lpt9.x", "_lpt9.x"), ("com0", "_com0"), ("prn..", "_prn"), ("CONSOLE", "CONSOLE"), ("com10", "com10"),
    ("x.con", "x.con"), ("name. . ", "name"), ("  a b  ", "a-b"), ("...", "unnamed"), ("a" * 300, "a" * 48),
    ("r_32 (x)", "r_32-x"), ("..\\..\\etc/passwd", "etc-passwd"),
])
def test_slug(name: str, want: str):
    assert slug(name) == want


def test_unique_slugs_avoid_case_collisions_and_our_own_names():
    got = unique_slugs(["Foo", "foo", "FOO", "index.html", "Manifest.JSON", "static", "foo-2", "CON", "con"])
    assert got == ["Foo", "foo-2", "FOO-3", "index.html-2", "Manifest.JSON-2", "static-2", "foo-2-2", "_CON",
                   "_con-2"]


def _rewrites(names: list[str]) -> bytes:
    """A 0.14-shaped rewrites trace: one context per name, each with one rewrite of one CONST under a SINK."""
    keys = [tf.Fake("TracingKey", display_name=n, keys=(n,), ret=None) for n in names]
    rws = [[tf.Fake("TrackedGraphRewrite", loc=("x.py", 1), sink=1, matches=[], name="r", depth=0,
                    bottom_up=False)] for _ in names]
    return tf.dumps((keys, rws, {0: (3, None, (), 1, None), 1: (4, None, (0,), None, None)}))


HOSTILE = ["CON", "nul.txt", "Aux", "com1", "LPT9.tar.gz", "Foo", "foo", "FOO", "index.html", "manifest.json",
           "static", "ctx", "packs", "trailing. . ", "x" * 300, "../../up", ".hidden", ".vizexport.json"]


def extractable(root: Path) -> list[str]:
    """The names under `root` that some OS could not hold (each with why), and any case collision in a folder."""
    bad = []
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        names = [p.name for p in d.iterdir()]
        if len({n.lower() for n in names}) != len(names):
            bad.append(f"{d}: names differing only by case")
        for n in names:
            if n.split(".", 1)[0].lower() in RESERVED or n.endswith((".", " ")) or len(n) > 80 or \
                    not all(c.isascii() and (c.isalnum() or c in "._-") for c in n):
                bad.append(f"{d / n}")
    return bad


@needs_dot
def test_context_names_make_files_every_os_can_hold(tmp_path: Path):
    """Contexts named as Windows devices, as our own files, alike but for case, with trailing dots, very long:
    the SVG export and the site (rewrites alone: one folder) write every one, under names any OS can hold."""
    pkl = tmp_path / "rewrites.pkl"
    pkl.write_bytes(_rewrites(HOSTILE))
    out = tmp_path / "out"
    r = run_cli(pkl, "-o", f"{out}/")
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    paths = [c["path"] for c in m["contexts"]]
    assert paths == ["_CON", "_nul.txt", "_Aux", "_com1", "_LPT9.tar.gz", "Foo", "foo-2", "FOO-3", "index.html-2",
                     "manifest.json-2", "static-2", "ctx-2", "packs-2", "trailing", "x" * 48, "up", "hidden",
                     "vizexport.json"]
    assert all((out / p / "000-r" / "0000.svg").is_file() for p in paths)
    assert extractable(out) == []
    assert sorted(p.name for p in (out / "ctx").iterdir())[:3] == ["0-_CON.html", "1-_nul.txt.html", "10-static.html"]
    own = {p.name for p in out.iterdir()} - set(paths)
    assert own == {STAMP, "manifest.json", "index.html", "static", "ctx", "packs"} and own <= set(TAKEN)


# ---- -o naming a symlink, the current folder or one above ----

def test_output_through_a_symlink_builds_its_folder(tmp_path: Path):
    """-o LINK/ with LINK a symlink to an earlier output: that folder is replaced, the link stays, nothing else
    appears (the old code left `.LINK.<pid>.old`)."""
    real = tmp_path / "real"
    build(real, {"index.html": b"old", "old-only.txt": b"old"})
    (tmp_path / "LINK").symlink_to("real")
    r = run_cli(SAMPLE / "profile.pkl", "-o", f"{tmp_path / 'LINK'}/")
    assert r.returncode == 0, r.stderr
    assert os.readlink(tmp_path / "LINK") == "real" and sorted(p.name for p in tmp_path.iterdir()) == ["LINK", "real"]
    assert "trace.pftrace" in stamp_of(real)["files"] and not (real / "old-only.txt").exists()


def test_symlink_to_a_user_folder_or_to_nothing_is_refused(tmp_path: Path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (tmp_path / "LINK").symlink_to(mine)
    (tmp_path / "DANGLING").symlink_to(tmp_path / "nowhere")
    before = snapshot(tmp_path)
    err = one_line_error(run_cli(SAMPLE / "profile.pkl", "-o", f"{tmp_path}/LINK/"))
    assert "LINK: exists and is not an empty folder" in err
    err = one_line_error(run_cli(SAMPLE / "profile.pkl", "-o", f"{tmp_path}/DANGLING/"))
    assert "DANGLING: is a symbolic link to something other than a folder" in err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("args", [["-o", "."], ["-o", "./"], ["-o", ".."], ["-o", "../.."], ["-o", "here/.."],
                                  ["-o", "/"], ["demo", "-o", "."]], ids=lambda a: " ".join(a))
def test_current_folder_and_those_above_are_refused(tmp_path: Path, args: list[str]):
    here = tmp_path / "a" / "here"
    here.mkdir(parents=True)
    before = snapshot(tmp_path)
    cli = [*args[:-2], str(SAMPLE / "profile.pkl"), *args[-2:]] if args[0] != "demo" else args
    err = one_line_error(run_cli(*cli, cwd=here))
    assert err.endswith(f" {Path(args[-1])}: cannot replace the current folder or one holding it (name another "
                        "folder)\n")
    assert snapshot(tmp_path) == before
