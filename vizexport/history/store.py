"""The run store: a SQLite file (stdlib sqlite3) or a PostgreSQL database (`postgresql://…`, psycopg 3, the
`[postgres]` extra), one schema (schema.MIGRATIONS). Every add is one transaction, so runs added at once from many
processes are all kept (SQLite: the write lock, waited for up to BUSY_S; PostgreSQL: row inserts need no lock; a
first open's migrations take an advisory lock). Failures are InputErrors naming the store (a password never shown)."""
from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..errors import InputError
from . import schema
from .records import DeviceRecord, KernelRecord, RunMeta, RunRecord
from .schema import POSTGRES, SQLITE, TABLES, VERSION_TABLE, Dialect, statements

BUSY_S = 120  # how long a SQLite writer waits for another's lock before it gives up
MIGRATION_LOCK = 0x76697A35  # PostgreSQL advisory lock key held while migrating ("viz5")
URL = re.compile(r"postgres(ql)?://", re.IGNORECASE)
RUN_COLUMNS = "id, commit_sha, branch, run_time, labels, file, tinygrad_release, launches, launch_ns, span_ns"


def is_url(where: str) -> bool:
    return bool(URL.match(where))


def shown(where: str) -> str:
    """The store as messages name it: a URL without its password."""
    if not is_url(where):
        return where
    u = urlsplit(where)
    if u.password is None:
        return where
    host = f"{u.username}:***@{u.hostname}" + (f":{u.port}" if u.port else "")
    return urlunsplit((u.scheme, host, u.path, u.query, u.fragment))


def normal_time(text: str | None) -> str:
    """ISO 8601 (a time without zone is UTC) or Unix seconds → ISO 8601 UTC with microseconds; None: now."""
    if text is None:
        t = datetime.now(timezone.utc)
    else:
        try:
            t = (datetime.fromtimestamp(float(text), timezone.utc) if re.fullmatch(r"\d+(\.\d*)?", text.strip())
                 else datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00")))
        except (ValueError, OverflowError, OSError):
            raise InputError(f"--time {text}: not a time (ISO 8601, e.g. 2025-01-31T12:00:00Z, or Unix seconds)"
                             ) from None
        t = t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Store:
    """SQL with `?` placeholders over a DB-API connection; the backends give the transactions."""

    dialect: Dialect

    def __init__(self, where: str) -> None:
        self.where = shown(where)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the backends'
    conn: Any

    @contextmanager
    def write(self, migrating: bool = False) -> Iterator[Any]:
        raise NotImplementedError

    @contextmanager
    def read(self) -> Iterator[Any]:
        raise NotImplementedError

    def tables(self, cur: Any) -> set[str]:
        raise NotImplementedError

    def q(self, sql: str) -> str:
        return sql

    # -- the schema
    def migrate(self) -> None:
        """Bring the store to the latest schema; refuse a database that is not a store, or a newer store."""
        with self.write(migrating=True) as cur:
            present = self.tables(cur)
            if VERSION_TABLE not in present:
                if present & set(TABLES):
                    raise InputError(f"{self.where}: holds tables named {', '.join(sorted(present & set(TABLES)))} "
                                     "but is not a vizexport history store")
                cur.execute(f"CREATE TABLE {VERSION_TABLE} (version INTEGER NOT NULL)")
                cur.execute(self.q(f"INSERT INTO {VERSION_TABLE} (version) VALUES (?)"), (0,))
            cur.execute(f"SELECT version FROM {VERSION_TABLE}")
            (version,) = cur.fetchone()
            migrations = schema.MIGRATIONS
            if version > len(migrations):
                raise InputError(f"{self.where}: a history store of schema {version}, newer than this vizexport's "
                                 f"({len(migrations)}): upgrade vizexport")
            for n in range(version, len(migrations)):
                for sql in statements(migrations[n], self.dialect):
                    cur.execute(sql)
            if version != len(migrations):
                cur.execute(self.q(f"UPDATE {VERSION_TABLE} SET version = ?"), (len(migrations),))

    # -- runs
    def add(self, run: RunRecord) -> int:
        """Keep `run` (one transaction); returns its id."""
        m = run.meta
        added = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.write() as cur:
            cur.execute(self.q(f"INSERT INTO runs ({RUN_COLUMNS.split(', ', 1)[1]}, added_at) VALUES "
                               "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"),
                        (m.commit, m.branch, m.time, json.dumps(m.labels, sort_keys=True), m.file, m.release,
                         m.launches, m.launch_ns, m.span_ns, added))
            (run_id,) = cur.fetchone()
            cur.executemany(self.q("INSERT INTO kernels (run_id, device, name, category, programs, launches, total_ns, "
                                   "durations, pattern) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                            [(run_id, k.device, k.name, k.category, json.dumps(k.programs), k.launches, k.total_ns,
                              k.durations.astype("<i8").tobytes(),
                              k.pattern.astype("<i8").tobytes() if k.pattern.any() else None) for k in run.kernels])
            cur.executemany(self.q("INSERT INTO devices (run_id, device, launches, total_ns, busy_ns) VALUES "
                                   "(?, ?, ?, ?, ?)"),
                            [(run_id, d.device, d.launches, d.total_ns, d.busy_ns) for d in run.devices])
        m.id = int(run_id)
        return m.id

    def runs(self, branch: str | None = None, last: int | None = None) -> list[RunMeta]:
        """The runs (of `branch`), oldest first; `last`: only the newest that many."""
        where, params = ("WHERE branch = ?", [branch]) if branch is not None else ("", [])
        limit = f" LIMIT {int(last)}" if last is not None else ""
        with self.read() as cur:
            cur.execute(self.q(f"SELECT {RUN_COLUMNS} FROM runs {where} ORDER BY run_time DESC, id DESC{limit}"),
                        params)
            rows = cur.fetchall()
        return [_meta(r, self.where) for r in reversed(rows)]

    def load(self, metas: Sequence[RunMeta]) -> list[RunRecord]:
        """The runs' kernels and devices."""
        out = []
        with self.read() as cur:
            for m in metas:
                cur.execute(self.q("SELECT device, name, category, programs, durations, pattern FROM kernels "
                                   "WHERE run_id = ? ORDER BY device, name"), (m.id,))
                kernels = [_kernel(r, self.where) for r in cur.fetchall()]
                cur.execute(self.q("SELECT device, launches, total_ns, busy_ns FROM devices WHERE run_id = ? "
                                   "ORDER BY device"), (m.id,))
                out.append(RunRecord(m, kernels, [DeviceRecord(*r) for r in cur.fetchall()]))
        return out


def _meta(row: Sequence[Any], where: str) -> RunMeta:
    run_id, commit, branch, t, labels, file, release, launches, launch_ns, span_ns = row
    try:
        tags = json.loads(labels)
    except ValueError:
        raise InputError(f"{where}: run {run_id}'s labels are not JSON (a damaged store)") from None
    return RunMeta(commit, branch, t, tags, file, release, launches, launch_ns, span_ns, int(run_id))


def _kernel(row: Sequence[Any], where: str) -> KernelRecord:
    device, name, category, programs, durations, pattern = row
    blobs = [bytes(durations), bytes(pattern) if pattern is not None else None]
    if any(b is not None and len(b) % 8 for b in blobs) or not blobs[0]:
        raise InputError(f"{where}: kernel {name} on {device}: its launches are damaged (not int64 columns)")
    d = np.frombuffer(blobs[0], "<i8").astype(np.int64)
    p = np.frombuffer(blobs[1], "<i8").astype(np.int64) if blobs[1] is not None else np.zeros(len(d), np.int64)
    if len(p) != len(d) or (d <= 0).any():
        raise InputError(f"{where}: kernel {name} on {device}: its launches are damaged")
    return KernelRecord(device, name, category, json.loads(programs), d, p)


class SqliteStore(Store):
    dialect = SQLITE

    def __init__(self, path: str, create: bool) -> None:
        super().__init__(path)
        p = Path(path)
        if p.exists() and not p.is_file():
            raise InputError(f"{path}: is not a file (a history store is a SQLite file or a postgresql:// URL)")
        if not create and not p.is_file():
            raise InputError(f"{path}: no such history store (`vizexport history add` makes one)")
        self.conn = sqlite3.connect(path, timeout=BUSY_S, isolation_level=None)
        self.conn.execute("PRAGMA foreign_keys = ON")

    @contextmanager
    def write(self, migrating: bool = False) -> Iterator[Any]:
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")  # the write lock now, not at the first write: no deadlock between writers
        try:
            yield cur
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    @contextmanager
    def read(self) -> Iterator[Any]:
        cur = self.conn.cursor()
        cur.execute("BEGIN")
        try:
            yield cur
        finally:
            self.conn.commit()

    def tables(self, cur: Any) -> set[str]:
        cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {r[0] for r in cur.fetchall()}


class PostgresStore(Store):
    dialect = POSTGRES

    def __init__(self, url: str) -> None:
        super().__init__(url)
        try:
            import psycopg
        except ImportError:
            raise InputError(f"{self.where}: a PostgreSQL store needs psycopg 3 (pip install 'vizexport[postgres]')"
                             ) from None
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=30)

    def q(self, sql: str) -> str:
        return sql.replace("?", "%s")

    @contextmanager
    def write(self, migrating: bool = False) -> Iterator[Any]:
        with self.conn.transaction(), self.conn.cursor() as cur:
            if migrating:  # concurrent first opens: one migrates, the others then find it done
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            yield cur

    @contextmanager
    def read(self) -> Iterator[Any]:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot for a run's rows
            yield cur

    def tables(self, cur: Any) -> set[str]:
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        return {r[0] for r in cur.fetchall()}


@contextmanager
def _errors(where: str) -> Iterator[None]:
    """Database failures as one-line InputErrors naming the store."""
    try:
        yield
    except sqlite3.DatabaseError as e:
        raise InputError(f"{where}: not a usable history store ({e})") from None
    except Exception as e:
        if type(e).__module__.startswith("psycopg"):
            raise InputError(f"{shown(where)}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
                             ) from None
        raise


@contextmanager
def open_store(where: str, create: bool = False) -> Iterator[Store]:
    """The store at `where` (a file path or a postgresql:// URL), migrated to the latest schema; `create`: a
    missing SQLite file is made (a PostgreSQL database must exist; its tables are made)."""
    with _errors(where):
        store: Store = PostgresStore(where) if is_url(where) else SqliteStore(where, create)
        try:
            store.migrate()
            yield store
        finally:
            store.close()
