"""One run, one registry (docs/architecture.md): a Run derives each thing once and builds only what is read (the
device-only timeline stage gives `top` and the diff the same figures as the full build); the writer registry
classifies an output once and picks its writer."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest

import vizexport
from vizexport import cli, sqtt
from vizexport import run as run_mod
from vizexport.analysis import kernel_table
from vizexport.analysis.diff import diff_runs
from vizexport.errors import InputError
from vizexport.gcpause import keep_all, release
from vizexport.records import to_json
from vizexport.run import DIFF_STAGES, AnswerOptions, Run
from vizexport.timeline import Role
from vizexport.tinygrad import timeline as tl_mod
from vizexport.writers import FILE, FOLDER, STDOUT, WRITERS, Demo, Site, StepSvgs, Top, Trace, classify, writer_for

from .conftest import FIXTURES, run_cli

SAMPLE = Path(vizexport.__file__).parent / "data" / "sample"
PROFILES = [SAMPLE / "profile.pkl", *(FIXTURES / "tinygrad" / v / "profile.pkl" for v in
                                      ("0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.14.0-hcq2"))]
SQTT = FIXTURES / "sqtt" / "gfx1100" / "profile_gemm_run_0.pkl"
DEVICE_ROLES = {Role.DEVICE, Role.QUEUE, Role.COPY, Role.GRAPH}


def _inputs(profile: Path) -> tuple[vizexport.Profile, vizexport.RewriteLog | None]:
    if not profile.exists():
        pytest.skip(f"{profile} not present")
    rewrites = profile.with_name("rewrites.pkl")
    return vizexport.load_profile(profile), vizexport.load_rewrites(rewrites) if rewrites.exists() else None


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.parent.name)
def test_top_from_device_tracks_alone_is_the_full_builds(profile: Path):
    prof, log = _inputs(profile)
    full = vizexport.build_timeline(prof, log)
    run = Run.of(prof, log)
    assert to_json(run.kernel_table) == to_json(kernel_table(full))
    assert "timeline" not in run.__dict__  # the full timeline was never built
    stage = run.stage(run_mod.TOP_STAGES)
    assert {t.role for t in stage.tracks} <= DEVICE_ROLES and stage.n_events() < full.n_events()
    assert not any(t.flows_out or t.flows_in or t.stacks for t in stage.tracks) and not stage.stacks
    # the args slices show are not made (the table reads the launch table's columns)
    assert not any(t.args for t in stage.tracks) and any(t.args for t in full.tracks if t.role in DEVICE_ROLES)
    queues = [(t.name, list(t.ts), list(t.dur)) for t in stage.tracks if t.role in (Role.QUEUE, Role.COPY, Role.GRAPH)]
    assert queues == [(t.name, list(t.ts), list(t.dur)) for t in full.tracks
                      if t.role in (Role.QUEUE, Role.COPY, Role.GRAPH)]
    for device in sorted({k.device for k in run.kernel_table.kernels})[:2]:
        one = Run.of(prof, log, answers=AnswerOptions(device=device)).kernel_table
        assert to_json(one) == to_json(kernel_table(full, device=device)) and one.kernels


def test_between_adds_only_the_markers():
    prof, log = _inputs(SAMPLE / "profile.pkl")
    pair = ("jit step 1", "jit step 3")
    run = Run.of(prof, log, answers=AnswerOptions(between=pair))
    table = run.kernel_table
    assert to_json(table) == to_json(kernel_table(vizexport.build_timeline(prof, log), pair))
    assert sum(k.launches for k in table.kernels + table.batches) == 12
    (stage,) = run._stages.values()
    assert {t.role for t in stage.tracks} == DEVICE_ROLES | {Role.MARKERS}


@pytest.mark.parametrize("profile", PROFILES[:4], ids=lambda p: p.parent.name)
def test_diff_from_its_stage_is_the_full_builds(profile: Path):
    prof, log = _inputs(profile)
    base, base_log = _inputs(SAMPLE / "profile.pkl")
    full = diff_runs(vizexport.build_timeline(base, base_log), vizexport.build_timeline(prof, log),
                     releases=(base.release.name, prof.release.name))
    run = Run.of(prof, log, baseline=Run.of(base, base_log))
    assert to_json(run.diff) == to_json(full) and full.kernels
    assert list(run._stages) == [DIFF_STAGES] and "timeline" not in run.__dict__


def test_unknown_stage_is_refused():
    prof, _ = _inputs(SAMPLE / "profile.pkl")
    with pytest.raises(ValueError, match="no timeline stage spans"):
        tl_mod.build_timeline(prof, stages=frozenset({"spans"}))


def test_each_part_is_derived_once(monkeypatch: pytest.MonkeyPatch):
    """The site's parts from one Run: one full timeline (the report reuses it), the SQTT launches decoded once for
    the timeline, the summary and the listings."""
    if not SQTT.exists():
        pytest.skip(f"{SQTT} not present")
    calls = {"build": 0, "decode": 0}

    def counted(name: str, fn):
        def wrapper(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)
        return wrapper
    monkeypatch.setattr(run_mod, "build_timeline", counted("build", run_mod.build_timeline))
    # the decoder is imported where it is first needed: counted where every caller finds it
    monkeypatch.setattr(sqtt, "load_launches", counted("decode", sqtt.load_launches))
    run = Run((SQTT,))
    run.derive(Site.reads)
    run.derive(Demo.reads)
    assert calls == {"build": 1, "decode": 1}
    assert run.summaries[0] is run.summary and run.summary.sqtt
    assert run.report.file == str(SQTT) and run.timeline is run.stage(run_mod.TOP_STAGES)


def test_classify_once_per_output(tmp_path: Path):
    assert classify("top", None, "json").kind == STDOUT
    for name in (f"{tmp_path}/new/", str(tmp_path), f"{tmp_path}/site"):
        assert classify("convert", name).kind == FOLDER
    t = classify("convert", str(tmp_path / "t.PFTRACE.gz"))
    assert (t.kind, t.suffix, t.gz) == (FILE, ".pftrace.gz", True)
    assert classify("demo", str(tmp_path / "demo.txt")).kind == FOLDER  # demo writes folders only
    with pytest.raises(InputError, match=r"x\.txt: unknown output format \(name a trace \*\.pftrace, \*\.pftrace\.gz, "
                                         r"\*\.json, \*\.json\.gz, or a folder .*x\.txt/\)"):
        classify("convert", str(tmp_path / "x.txt"))
    with pytest.raises(InputError, match=r"unknown output format \(name a \*\.html, \*\.json, \*\.md file\)"):
        classify("report", tmp_path / "r.pftrace")
    (tmp_path / "d.json").mkdir()
    with pytest.raises(InputError, match="is not a regular file"):
        classify("diff", tmp_path / "d.json")


def test_registry_declares_every_output():
    assert {w.command for w in WRITERS} == {"convert", "report", "diff", "top", "info", "show", "demo"}
    for w in WRITERS:
        assert w.reads and all(hasattr(Run, part) for part in w.reads), w
        assert (w.kind == FILE) == bool(w.suffixes), w
    traces = [s for w in WRITERS if isinstance(w, Trace) for s in w.suffixes]
    assert traces == [".pftrace", ".pftrace.gz", ".json", ".json.gz"]
    assert [w.binary for w in WRITERS if isinstance(w, Trace)] == [True, False]
    assert {(w.command, s) for w in WRITERS if w.kind == FILE and w.command != "convert" for s in w.suffixes} == {
        (c, s) for c in ("report", "diff") for s in (".html", ".json", ".md")}


def test_a_folder_s_writer_is_picked_by_the_inputs(tmp_path: Path):
    prof, log = _inputs(SAMPLE / "profile.pkl")
    target = classify("convert", f"{tmp_path}/out/")
    assert isinstance(writer_for("convert", target, Run.of(prof, log)), Site)
    assert isinstance(writer_for("convert", target, Run.of(rewrites=log)), StepSvgs)


def test_info_takes_any_files():
    r = run_cli("info", SAMPLE / "profile.pkl", SAMPLE / "profile.pkl", "--json")
    assert r.returncode == 0 and r.stdout.count('"kind": "profile"') == 2
    r = run_cli("top", SAMPLE / "profile.pkl", SAMPLE / "profile.pkl")
    assert r.returncode == 1 and "need one profile.pkl and at most one rewrites.pkl" in r.stderr


def test_messages_quote_the_output_as_before(tmp_path: Path):
    """A trace's messages name it as a path (`./` dropped), option refusals as typed, as the command always has."""
    out = f"{tmp_path}/./x.pftrace"
    r = run_cli(SAMPLE / "profile.pkl", "-o", out, "--flavor", "kineto")
    assert r.returncode == 1 and f"{tmp_path}/x.pftrace: --flavor kineto writes Chrome JSON" in r.stderr
    r = run_cli(SAMPLE / "profile.pkl", "-o", out, "--peak-gbs", "3")
    assert r.returncode == 2 and r.stderr == (f"vizexport convert: --peak-gbs shapes a site (-o OUTDIR/ with a "
                                              f"profile), not {out}, a trace (see vizexport convert --help)\n")
    r = run_cli(SAMPLE / "profile.pkl", "-o", out)
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {tmp_path}/x.pftrace: 673 events on 19 tracks")
    assert not list(tmp_path.glob("*.windows"))


def test_what_a_command_read_is_left_out_of_collections_while_it_writes(monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture):
    """emit leaves what the command read and derived out of the GC's collections (gc.freeze) before the GC resumes,
    and lets it look at them again once written: its first collection no longer walks the whole profile (0.3 s of
    `top` on 1M events). Objects the program froze itself stay frozen."""
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    seen = []

    def spy(self: Top, run: Run, target: object, progress: object = None) -> str:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return write(self, run, target, progress)
    write = Top.write
    monkeypatch.setattr(Top, "write", spy)
    # in this process: the command's memory cap (RLIMIT_DATA) would stay on the test worker and every program it
    # starts later (a headless Chromium under it cannot reserve its WebAssembly memory, and hangs)
    monkeypatch.setattr(cli, "limit_memory", lambda limit: None)
    assert cli.main(["top", str(SAMPLE / "profile.pkl")]) == 0 and "E_4_4" in capsys.readouterr().out
    (enabled, frozen), = seen
    assert enabled and frozen > 10_000  # the profile's records, the stage, the modules
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        assert not keep_all() and gc.get_freeze_count() == mine
        release(False)
        assert gc.get_freeze_count() == mine
    finally:
        gc.unfreeze()
