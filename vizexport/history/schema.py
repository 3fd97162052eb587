"""The store's schema, one for SQLite and PostgreSQL, as numbered migrations: a store records the number it is at
(table vizexport_schema) and opening it applies the ones it lacks, in one transaction that holds the store's write
lock (concurrent first opens wait for each other). Never edit a released migration: add the next one."""
from __future__ import annotations

from dataclasses import dataclass

VERSION_TABLE = "vizexport_schema"
TABLES = ("runs", "kernels", "devices")  # a database holding these but no version table is not ours to change


@dataclass(frozen=True)
class Dialect:
    name: str
    id_column: str  # an auto-numbered primary key
    blob: str


SQLITE = Dialect("sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB")
POSTGRES = Dialect("postgresql", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA")

# durations: int64 little-endian ns in time order; pattern: int64 little-endian program index per launch (NULL where
# every launch is the first program); programs and labels: JSON texts; run_time: ISO 8601 UTC, text order = time order
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE runs (id {id_column}, commit_sha TEXT NOT NULL, branch TEXT NOT NULL, run_time TEXT NOT NULL,
           labels TEXT NOT NULL, file TEXT NOT NULL, tinygrad_release TEXT NOT NULL, launches BIGINT NOT NULL,
           launch_ns BIGINT NOT NULL, span_ns BIGINT NOT NULL, added_at TEXT NOT NULL)""",
        "CREATE INDEX runs_by_branch ON runs (branch, run_time, id)",
        """CREATE TABLE kernels (run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE, device TEXT NOT NULL,
           name TEXT NOT NULL, category TEXT NOT NULL, programs TEXT NOT NULL, launches BIGINT NOT NULL,
           total_ns BIGINT NOT NULL, durations {blob} NOT NULL, pattern {blob}, PRIMARY KEY (run_id, device, name))""",
        """CREATE TABLE devices (run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE, device TEXT NOT NULL,
           launches BIGINT NOT NULL, total_ns BIGINT NOT NULL, busy_ns BIGINT NOT NULL,
           PRIMARY KEY (run_id, device))""",
    ],
]


def statements(migration: list[str], dialect: Dialect) -> list[str]:
    return [s.format(id_column=dialect.id_column, blob=dialect.blob) for s in migration]
