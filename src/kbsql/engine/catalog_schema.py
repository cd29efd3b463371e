"""The catalog's SQLite schema, and the upgrade of catalogs written by earlier versions.

Kept apart from `catalog.py` (the reads and writes) because it also holds the tables of
the parts that keep their records in the catalog without being the catalog's business:
uploaded files (`datasources/upload_store.py`) and the queries of `information_schema.queries`
(`engine/query_store.py`), and jobs with their runs and LAST values (`engine/jobs/job_store.py`).
Living in the catalog makes them server-wide: every connection,
every process on the data directory and every server on a shared PostgreSQL catalog (whose
copy of this schema is `catalog_pg.MIGRATIONS`) sees the same files and queries.
"""

from __future__ import annotations

import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS projects (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS knowledge_bases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL COLLATE NOCASE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    spec TEXT NOT NULL,
    UNIQUE (project_id, name)
);
CREATE TABLE IF NOT EXISTS agents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL COLLATE NOCASE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    model TEXT,
    data TEXT NOT NULL,
    prompt_template TEXT,
    params TEXT,
    UNIQUE (project_id, name)
);
CREATE TABLE IF NOT EXISTS datasources (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    engine TEXT NOT NULL,
    parameters TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS views (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL COLLATE NOCASE,
    query TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (project_id, name)
);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    storage_key TEXT NOT NULL,
    source_file TEXT,
    row_count INTEGER NOT NULL,
    columns TEXT NOT NULL,
    pages TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS queries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sql TEXT NOT NULL,
    database TEXT,
    started_at TEXT,
    finished_at TEXT,
    processed_rows INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    parameters TEXT NOT NULL,
    context TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    owner TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL COLLATE NOCASE,
    query TEXT NOT NULL,
    if_query TEXT,
    start_at TEXT NOT NULL,
    end_at TEXT,
    schedule TEXT,
    next_run_at TEXT,
    created_at TEXT NOT NULL,
    creator TEXT NOT NULL,
    UNIQUE (project_id, name)
);
CREATE TABLE IF NOT EXISTS jobs_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    project TEXT NOT NULL,
    due_at TEXT,
    run_start TEXT NOT NULL,
    run_end TEXT,
    error TEXT,
    query TEXT,
    owner TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_history_due ON jobs_history (job_id, due_at);
CREATE TABLE IF NOT EXISTS jobs_last (
    job_id INTEGER NOT NULL,
    cond_key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (job_id, cond_key)
);
"""


def upgrade(db: sqlite3.Connection) -> None:
    """Columns added since a catalog was first written (tables are added by SCHEMA's
    `IF NOT EXISTS`): agents.params (MindsDB's agent `params`, e.g. a timeout)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(agents)").fetchall()}
    if "params" not in columns:
        db.execute("ALTER TABLE agents ADD COLUMN params TEXT")
