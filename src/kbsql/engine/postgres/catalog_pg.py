"""The catalog in PostgreSQL: one state shared by every `kbsql serve --catalog URL`.

`Catalog` (catalog.py) speaks a small subset of `sqlite3.Connection`: `execute(sql, args)`
with `?` placeholders, `BEGIN IMMEDIATE` / `COMMIT` / `ROLLBACK`, rows readable by name and
by position. `PgConnection` speaks the same subset over psycopg, so the catalog's queries
and transactions are one code path for both databases:

- `BEGIN IMMEDIATE` becomes `BEGIN` + a transaction-scoped advisory lock: catalog writers
  of all servers serialise, as SQLite's writers do, so "check the name is free, then insert"
  stays atomic across servers;
- names compare case-insensitively through `lower(name)` in the catalog's SQL and unique
  indexes on `lower(name)` here (SQLite's NOCASE columns do the same there).

The tables live in schema `kbsql` of the database (knowledge-base chunk tables go to
`public`). Schema versions are migrated at start under an advisory lock, so servers
starting together apply each migration once, in order.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from kbsql.engine.postgres.pg import (
    StorageUnavailable,
    connection_errors,
    first_line,
    lock_key,
    psycopg_modules,
)
from kbsql.interface.secrets import mask_connection_string

SCHEMA = "kbsql"
WRITE_LOCK = lock_key("kbsql:catalog:write")
MIGRATE_LOCK = lock_key("kbsql:catalog:migrate")

MIGRATIONS: list[str] = [
    # 1: the catalog's tables, as catalog.py's SQLite schema
    f"""
    CREATE TABLE {SCHEMA}.projects (
        id bigserial PRIMARY KEY, name text NOT NULL, created_at text NOT NULL);
    CREATE UNIQUE INDEX projects_name ON {SCHEMA}.projects (lower(name));
    CREATE TABLE {SCHEMA}.knowledge_bases (
        id bigserial PRIMARY KEY,
        project_id bigint NOT NULL REFERENCES {SCHEMA}.projects(id) ON DELETE CASCADE,
        name text NOT NULL, created_at text NOT NULL, updated_at text NOT NULL, spec text NOT NULL);
    CREATE UNIQUE INDEX knowledge_bases_name ON {SCHEMA}.knowledge_bases (project_id, lower(name));
    CREATE TABLE {SCHEMA}.agents (
        id bigserial PRIMARY KEY,
        project_id bigint NOT NULL REFERENCES {SCHEMA}.projects(id) ON DELETE CASCADE,
        name text NOT NULL, created_at text NOT NULL, updated_at text NOT NULL, model text,
        data text NOT NULL, prompt_template text);
    CREATE UNIQUE INDEX agents_name ON {SCHEMA}.agents (project_id, lower(name));
    CREATE TABLE {SCHEMA}.datasources (
        id bigserial PRIMARY KEY, name text NOT NULL, engine text NOT NULL,
        parameters text NOT NULL, created_at text NOT NULL);
    CREATE UNIQUE INDEX datasources_name ON {SCHEMA}.datasources (lower(name));
    """,
    # 2: registered DataFrames (`df.<name>`), as Parquet bytes
    f"""
    CREATE TABLE {SCHEMA}.frames (
        name text NOT NULL, data bytea NOT NULL, version bigserial, created_at text NOT NULL);
    CREATE UNIQUE INDEX frames_name ON {SCHEMA}.frames (lower(name));
    """,
    # 3: agent params, uploaded files (`files.<name>`: records here, pages in `uploads`) and
    # the queries of information_schema.queries, as catalog_schema.py's SQLite schema
    f"""
    ALTER TABLE {SCHEMA}.agents ADD COLUMN params text;
    CREATE TABLE {SCHEMA}.files (
        id bigserial PRIMARY KEY, name text NOT NULL, storage_key text NOT NULL, source_file text,
        row_count bigint NOT NULL, columns text NOT NULL, pages text NOT NULL, created_at text NOT NULL);
    CREATE UNIQUE INDEX files_name ON {SCHEMA}.files (lower(name));
    CREATE TABLE {SCHEMA}.uploads (
        name text NOT NULL, data bytea NOT NULL, version bigserial, created_at text NOT NULL);
    CREATE UNIQUE INDEX uploads_name ON {SCHEMA}.uploads (lower(name));
    CREATE TABLE {SCHEMA}.queries (
        id bigserial PRIMARY KEY, sql text NOT NULL, database text, started_at text, finished_at text,
        processed_rows bigint NOT NULL DEFAULT 0, error text, parameters text NOT NULL,
        context text NOT NULL, updated_at text NOT NULL, owner text,
        cancel_requested int NOT NULL DEFAULT 0);
    """,
    # 4: views (view_store.py), as catalog_schema.py's SQLite schema
    f"""
    CREATE TABLE {SCHEMA}.views (
        id bigserial PRIMARY KEY,
        project_id bigint NOT NULL REFERENCES {SCHEMA}.projects(id) ON DELETE CASCADE,
        name text NOT NULL, query text NOT NULL, created_at text NOT NULL);
    CREATE UNIQUE INDEX views_name ON {SCHEMA}.views (project_id, lower(name));
    """,
    # 5: jobs (CREATE JOB), their runs (log.jobs_history) and LAST values (engine/jobs/)
    f"""
    CREATE TABLE {SCHEMA}.jobs (
        id bigserial PRIMARY KEY,
        project_id bigint NOT NULL REFERENCES {SCHEMA}.projects(id) ON DELETE CASCADE,
        name text NOT NULL, query text NOT NULL, if_query text, start_at text NOT NULL, end_at text,
        schedule text, next_run_at text, created_at text NOT NULL, creator text NOT NULL);
    CREATE UNIQUE INDEX jobs_name ON {SCHEMA}.jobs (project_id, lower(name));
    CREATE TABLE {SCHEMA}.jobs_history (
        id bigserial PRIMARY KEY, job_id bigint NOT NULL, name text NOT NULL, project text NOT NULL,
        due_at text, run_start text NOT NULL, run_end text, error text, query text, owner text);
    CREATE UNIQUE INDEX jobs_history_due ON {SCHEMA}.jobs_history (job_id, due_at);
    CREATE TABLE {SCHEMA}.jobs_last (
        job_id bigint NOT NULL, cond_key text NOT NULL, value text NOT NULL,
        PRIMARY KEY (job_id, cond_key));
    """,
]

_PLACEHOLDER = re.compile(r"\?")


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def where_of_url(url: str) -> str:
    """The URL without its password, for messages and log lines (interface/secrets.py's
    masker: one for every URL)."""
    return mask_connection_string(url)


class Row(dict):
    """A row readable as row["name"] and row[0], like sqlite3.Row."""

    def __init__(self, names: list[str], values: tuple[Any, ...]):
        super().__init__(zip(names, values, strict=True))
        self._values = values

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return self._values[key]
        return super().__getitem__(key)


def _row_factory(cursor: Any) -> Any:
    names = [c.name for c in cursor.description] if cursor.description else []
    return lambda values: Row(names, values)


class _Empty:
    rowcount = 0

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []


def connect(url: str) -> Any:
    psycopg, _, _ = psycopg_modules()
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10, row_factory=_row_factory,
                               options=f"-c search_path={SCHEMA},public")
    except psycopg.Error as exc:
        raise StorageUnavailable(f"Cannot connect to the catalog at {where_of_url(url)}: "
                                 f"{first_line(exc)}") from None


def migrate(conn: Any) -> int:
    """Apply the migrations this database has not seen; returns the schema version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (version int NOT NULL)")
        row = conn.execute(f"SELECT max(version) AS v FROM {SCHEMA}.schema_version").fetchone()
        version = int(row["v"] or 0)
        for number, script in enumerate(MIGRATIONS, start=1):
            if number > version:
                for statement in filter(str.strip, script.split(";")):
                    conn.execute(statement)
                conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (%s)", (number,))
                version = number
    return version


class PgConnection:
    """The subset of sqlite3.Connection that `Catalog` uses, over one psycopg connection
    (the catalog serialises its own use with a lock; its statements are short)."""

    def __init__(self, url: str):
        self.url = url
        self.row_factory = None  # set by Catalog for SQLite; rows here are always `Row`
        self._conn = connect(url)
        self._in_transaction = False
        self._lock = threading.RLock()
        self.version = migrate(self._conn)

    def _live(self) -> Any:
        """The connection, reopened if the server dropped it (only between transactions)."""
        if self._conn.closed and not self._in_transaction:
            self._conn = connect(self.url)
        return self._conn

    def execute(self, sql: str, args: Any = ()) -> Any:
        text = sql.strip()
        upper = text.upper()
        if upper.startswith("PRAGMA"):
            return _Empty()
        with self._lock:
            try:
                return self._run(text, upper, args)
            except connection_errors() as exc:
                was_in_transaction, self._in_transaction = self._in_transaction, False
                # PostgreSQL restarted since this connection was last used: a read or a
                # BEGIN did nothing there, so it runs once more on a new connection
                if was_in_transaction or not upper.startswith(("SELECT", "BEGIN")) or not self._conn.closed:
                    raise StorageUnavailable(f"The catalog at {where_of_url(self.url)} failed: "
                                             f"{first_line(exc)}") from None
            try:
                return self._run(text, upper, args)
            except connection_errors() as exc:
                self._in_transaction = False
                raise StorageUnavailable(f"The catalog at {where_of_url(self.url)} failed: "
                                         f"{first_line(exc)}") from None

    def _run(self, text: str, upper: str, args: Any) -> Any:
        if upper.startswith("BEGIN"):
            conn = self._live()
            conn.execute("BEGIN")
            self._in_transaction = True
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            return _Empty()
        if upper in ("COMMIT", "ROLLBACK"):
            self._in_transaction = False
            return self._conn.execute(upper)
        return self._live().execute(_PLACEHOLDER.sub("%s", text), tuple(args))

    def executescript(self, script: str) -> None:
        """The SQLite schema script: the tables here come from `migrate` instead."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()
