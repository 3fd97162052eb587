"""The history store on both backends: a SQLite file and PostgreSQL (the server named by $VIZEXPORT_TEST_PG, which
.ci/run starts; skipped cleanly without it). The same schema and answers on each; runs added by many processes at
once are all kept; migrations; stores that are not ours are refused and left untouched."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

from vizexport.errors import InputError
from vizexport.history import schema
from vizexport.history.records import DeviceRecord, KernelRecord, RunMeta, RunRecord
from vizexport.history.store import normal_time, open_store, shown

from .conftest import run_cli

PG = os.environ.get("VIZEXPORT_TEST_PG")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(not PG, reason="VIZEXPORT_TEST_PG unset"))]
WRITERS, RUNS_EACH = 6, 4


@contextmanager
def fresh_store(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new, empty store: a file, or a schema of its own in the test database (dropped after)."""
    if backend == "sqlite":
        yield str(tmp_path / "runs.db")
        return
    import psycopg
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in PG else "?"
    try:
        yield f"{PG}{sep}options={quote(f'-csearch_path={name}')}"
    finally:
        with psycopg.connect(PG, autocommit=True) as c:
            c.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_store(request.param, tmp_path) as url:
        yield url


def record(commit: str, branch: str = "main", time: str | None = None, seed: int = 0) -> RunRecord:
    rng = np.random.default_rng(seed)
    kernels = [KernelRecord("NULL", f"E_{i}", "elementwise", [f"{i:02x}" * 16, f"{i + 1:02x}" * 16],
                            rng.integers(900, 5000, 3 + i).astype(np.int64), np.arange(3 + i) % 2) for i in range(4)]
    kernels.append(KernelRecord("NULL:1", "copy", "copy", [""], np.array([70], np.int64), np.zeros(1, np.int64)))
    devices = [DeviceRecord("NULL", sum(k.launches for k in kernels[:4]), sum(k.total_ns for k in kernels[:4]), 123),
               DeviceRecord("NULL:1", 1, 70, 70)]
    meta = RunMeta(commit, branch, normal_time(time), {"runner": "a", "seed": str(seed)}, "profile.pkl", "0.14.0",
                   sum(k.launches for k in kernels), sum(k.total_ns for k in kernels), 10_000)
    return RunRecord(meta, kernels, devices)


def test_a_run_reads_back_as_it_was_added(store_url: str):
    added = [record(f"c{i}", time=f"2025-03-0{i + 1}T12:00:00+02:00", seed=i) for i in range(3)]
    added.append(record("other", branch="feature", time="2025-03-05T00:00:00Z", seed=9))
    with open_store(store_url, create=True) as s:
        ids = [s.add(r) for r in added]
        assert ids == sorted(ids) and len(set(ids)) == 4
        assert [m.commit for m in s.runs()] == ["c0", "c1", "c2", "other"]
        main = s.runs("main")
        assert [m.commit for m in main] == ["c0", "c1", "c2"] and [m.commit for m in s.runs("main", 2)] == ["c1", "c2"]
        assert main[0].time == "2025-03-01T10:00:00.000000Z" and main[0].labels == {"runner": "a", "seed": "0"}
        back = s.load(main)
    for a, b in zip(added, back, strict=False):
        assert b.meta == a.meta  # ids were set on add
        assert [(k.device, k.name, k.category, k.programs) for k in b.kernels] == \
               [(k.device, k.name, k.category, k.programs) for k in a.kernels]
        for x, y in zip(a.kernels, b.kernels, strict=True):
            assert x.durations.tolist() == y.durations.tolist() and x.pattern.tolist() == y.pattern.tolist()
        assert b.devices == a.devices


def _add_many(url: str, writer: int) -> list[int]:
    out = []
    for i in range(RUNS_EACH):
        with open_store(url, create=True) as s:  # a connection per add, as separate CI jobs make them
            out.append(s.add(record(f"w{writer}-{i}", time=f"2025-01-01T00:00:{writer * RUNS_EACH + i:02d}Z",
                                    seed=writer * 100 + i)))
    return out


def test_concurrent_adds_keep_every_run(store_url: str):
    """Several processes add at once into a store none of them has made yet (so they also race to create its
    schema): every run is kept, whole, with its own id."""
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no connection shared by a fork
    with ctx.Pool(WRITERS) as pool:
        ids = [i for got in pool.starmap(_add_many, [(store_url, w) for w in range(WRITERS)]) for i in got]
    assert len(ids) == len(set(ids)) == WRITERS * RUNS_EACH
    with open_store(store_url) as s:
        runs = s.runs()
        assert sorted(m.id for m in runs) == sorted(ids)
        assert {m.commit for m in runs} == {f"w{w}-{i}" for w in range(WRITERS) for i in range(RUNS_EACH)}
        loaded = s.load(runs)
    assert all(len(r.kernels) == 5 and len(r.devices) == 2 for r in loaded)
    for r in loaded:  # each run has the launches its writer made
        w, i = map(int, r.meta.commit[1:].split("-"))
        assert r.kernels[0].durations.tolist() == record("", seed=w * 100 + i).kernels[0].durations.tolist()


def test_cli_add_list_and_errors(store_url: str, tmp_path: Path):
    from .answers import unpack
    prof, rewrites = unpack("0.14.0-null-multi", tmp_path)
    r = run_cli("history", "add", store_url, prof, rewrites, "--commit", "abc123", "--branch", "main", "--time",
                "1700000000", "--label", "runner=ci-2", "--label", "gpu=")
    assert r.returncode == 0, r.stderr
    # per name and device: the 11 programs and copies of `diff` are 6 kernels, programs kept
    assert r.stdout.startswith("added run 1 to ") and "abc123 on main, 6 kernels, 21 launches" in r.stdout
    with open_store(store_url) as s:
        (run,) = s.load(s.runs())
    e16 = next(k for k in run.kernels if k.key == ("NULL", "E_16_4"))
    # numbered by first launch: two programs launched once, then the JIT'd one 4 times (diff's E_16_4 [89077105])
    assert e16.pattern.tolist() == [0, 1, 2, 2, 2, 2] and e16.programs[2].startswith("89077105")
    r = run_cli("history", "list", store_url, "--json")
    import json
    (m,) = json.loads(r.stdout)
    assert (m["commit"], m["branch"], m["time"], m["labels"], m["release"], m["launches"]) == \
           ("abc123", "main", "2023-11-14T22:13:20.000000Z", {"gpu": "", "runner": "ci-2"}, "0.14.0", 21)
    r = run_cli("history", "add", store_url, prof, "--commit", "x", "--branch", "main", "--label", "novalue")
    assert r.returncode == 1 and r.stderr == "vizexport: error: --label novalue: not KEY=VALUE\n"
    r = run_cli("history", "add", store_url, prof, "--commit", "x", "--branch", "main", "--time", "yesterday")
    assert r.returncode == 1 and "--time yesterday: not a time" in r.stderr
    r = run_cli("history", "add", store_url, rewrites, "--commit", "x", "--branch", "main")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "need one profile.pkl" in r.stderr
    assert len(json.loads(run_cli("history", "list", store_url, "--json").stdout)) == 1  # nothing half-added


def test_migrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A new store is made at the latest schema; an older one gets the migrations it lacks; a newer one is refused
    (and left as it is)."""
    db = tmp_path / "s.db"
    with open_store(str(db), create=True) as s:
        s.add(record("a"))
    version = sqlite3.connect(db).execute("SELECT version FROM vizexport_schema").fetchone()[0]
    assert version == len(schema.MIGRATIONS) == 1
    extra = ["ALTER TABLE runs ADD COLUMN note TEXT", "UPDATE runs SET note = 'migrated'"]
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, extra])
    with open_store(str(db)) as s:
        assert [m.commit for m in s.runs()] == ["a"]
    con = sqlite3.connect(db)
    assert con.execute("SELECT version FROM vizexport_schema").fetchone()[0] == 2
    assert con.execute("SELECT note FROM runs").fetchall() == [("migrated",)]
    con.close()
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
    before = db.read_bytes()
    with pytest.raises(InputError, match="schema 2, newer than this vizexport's \\(1\\): upgrade vizexport"), \
            open_store(str(db)):
        pass
    assert db.read_bytes() == before


def test_what_is_not_a_store_is_refused_and_left_alone(tmp_path: Path):
    foreign = tmp_path / "app.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE runs (x)")
    con.commit()
    con.close()
    junk = tmp_path / "profile.pkl"
    junk.write_bytes(b"\x80\x04not a database at all" * 100)
    cases = {foreign: "holds tables named runs but is not a vizexport history store",
             junk: "not a usable history store (file is not a database)"}
    for path, problem in cases.items():
        before = path.read_bytes()
        r = run_cli("history", "list", path)
        assert r.returncode == 1 and r.stderr == f"vizexport: error: {path}: {problem}\n"
        assert path.read_bytes() == before
    r = run_cli("history", "list", tmp_path / "missing.db")
    assert r.returncode == 1 and "no such history store (`vizexport history add` makes one)" in r.stderr
    assert not (tmp_path / "missing.db").exists()
    r = run_cli("history", "list", tmp_path)
    assert r.returncode == 1 and "is not a file" in r.stderr


def test_a_server_that_is_not_there(tmp_path: Path):
    """A URL's password is never shown; an unreachable server is one line."""
    url = "postgresql://ci:s3cret@127.0.0.1:1/runs"
    assert shown(url) == "postgresql://ci:***@127.0.0.1:1/runs"
    r = run_cli("history", "list", url)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "s3cret" not in r.stderr
    assert r.stderr.startswith("vizexport: error: postgresql://ci:***@127.0.0.1:1/runs: ")


def test_check_refuses_before_it_reads(tmp_path: Path):
    """An output of an unknown format, or --last below 1: one line, exit 1, nothing written, no store made."""
    from .answers import unpack
    prof, _ = unpack("0.14.0-null-multi", tmp_path)
    db = tmp_path / "s.db"
    r = run_cli("history", "check", db, prof, "--branch", "main", "-o", tmp_path / "c.txt")
    assert r.returncode == 1 and "c.txt: unknown output format" in r.stderr and r.stderr.count("\n") == 1
    r = run_cli("history", "check", db, prof, "--branch", "main", "--last", "0")
    assert r.returncode == 1 and r.stderr == "vizexport: error: --last 0: must be at least 1\n"
    r = run_cli("history", "check", db, prof, "--branch", "main")
    assert r.returncode == 1 and "no such history store" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.14.0-null-multi"]
    r = run_cli("history", "site", db, "-o", tmp_path / "site")
    assert r.returncode == 1 and not (tmp_path / "site").exists()
