"""The catalog: projects, knowledge bases, agents and data sources, in SQLite.

SQLite because it is in the standard library, transactional and crash-safe (WAL), and
safe to open from a notebook and a `kbsql serve` process at the same time. Every write
runs in one transaction; a failed write leaves nothing behind. The records it answers with
are catalog_records.py's (importable from here, as every caller does).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbsql.engine import catalog_schema
from kbsql.engine.catalog_records import (
    AgentRecord,
    DatasourceRecord,
    KbRecord,
    ProjectRecord,
    json_or_empty,
    now,
)
from kbsql.engine.catalog_uses import refuse_datasource_drop, refuse_project_drop
from kbsql.engine.faults import disk_full, full_error
from kbsql.engine.postgres.catalog_pg import PgConnection, is_postgres_url
from kbsql.engine.spelling import did_you_mean
from kbsql.engine.sqlite_files import ReadOnlyData, open_read_only, private_file
from kbsql.engine.stored_names import stored_name
from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.errors import Conflict, NotFound, ServiceError, UnknownDatabase, UnknownTable

RESERVED_NAMES = frozenset({"df", "files", "information_schema", DEFAULT_PROJECT})
"""Names a knowledge base or agent may not take: SQL reads them as the built-in data
sources (`df`, `files`), the system schema or the default project."""

_KINDS = {"knowledge base": ("knowledge_bases", "Knowledge Base"), "agent": ("agents", "Agent"),
          "view": ("views", "View")}


def _missing(error: NotFound, name: str, known: list[str]) -> NotFound:
    """`error` with the known names one edit away from `name` as its hint (SQL errors show it)."""
    error.hint = did_you_mean(name, known)
    return error


class Catalog:
    """Typed reads and transactional writes over the catalog database."""

    def __init__(self, path: Path | str, read_only: bool = False):
        """`path`: a SQLite file, or a `postgresql://` URL for a catalog shared by several
        servers (catalog_pg.py speaks the same SQL there)."""
        self._lock = threading.RLock()
        self.read_only = read_only and not is_postgres_url(path)  # a local directory's state
        self.shared_url: str | None = None
        if is_postgres_url(path):
            self.shared_url = str(path)
            self._db: Any = PgConnection(str(path))
        else:
            path = Path(path)
            if read_only:
                self._db = open_read_only(path)
                self._db.row_factory = sqlite3.Row
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            private_file(path)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                       timeout=30)
            self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._db.executescript(catalog_schema.SCHEMA)
            if self.shared_url is None:  # PostgreSQL's schema comes from catalog_pg's migrations
                catalog_schema.upgrade(self._db)
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM projects WHERE lower(name) = lower(?)",
                          (DEFAULT_PROJECT,)).fetchone() is None:
                db.execute("INSERT INTO projects (name, created_at) VALUES (?, ?)",
                           (DEFAULT_PROJECT, now()))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def health(self) -> dict[str, Any]:
        """{database, ok, ms[, error]}: a `SELECT 1` on the catalog, timed. A server whose
        shared catalog is away still answers /api/status, with ok false and the reason (the
        URL's password masked); requests that need the catalog answer 503 meanwhile."""
        started = time.perf_counter()
        answer: dict[str, Any] = {"database": "postgresql" if self.shared_url else "sqlite", "ok": True}
        try:
            with self._lock:
                self._db.execute("SELECT 1").fetchone()
        except (ServiceError, sqlite3.Error) as exc:
            answer.update(ok=False, error=exc.detail if isinstance(exc, ServiceError) else str(exc))
        answer["ms"] = round((time.perf_counter() - started) * 1000, 2)
        return answer

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error."""
        if self.read_only:
            raise ReadOnlyData()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                if getattr(self._db, "in_transaction", True):
                    self._db.execute("ROLLBACK")
                if isinstance(exc, Exception) and disk_full(exc):  # 507, in words
                    raise full_error("the change to the catalog") from exc
                raise

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    read = _read
    """Rows of one statement, for the parts keeping their own tables in the catalog
    (uploaded files, queries; see catalog_schema)."""

    # the shared namespace -----------------------------------------------------------------
    @staticmethod
    def _check_free(db: sqlite3.Connection, project_id: int, project: str, name: str,
                    kind: str, own_id: int | None = None) -> None:
        """Knowledge bases and agents share one namespace per project: `SELECT ... FROM x`
        must denote one thing. Raise Conflict when `name` is taken (other than by `own_id`
        of the same kind, for a rename)."""
        for other, (table, label) in _KINDS.items():
            row = db.execute(f"SELECT id FROM {table} WHERE project_id = ? AND lower(name) = lower(?)",
                             (project_id, name)).fetchone()
            if row is None or (other == kind and row[0] == own_id):
                continue
            if other == kind:
                raise Conflict(f"{label} with name {name} already exists",
                               title=f"{label} already exists")
            article = "An" if other == "agent" else "A"
            raise Conflict(f"{article} {other} named {name} already exists in project {project}; "
                           "knowledge bases, agents and views share one namespace, so choose "
                           f"another name for the {kind}", title="Name already in use")

    check_free_in = _check_free
    """The same check inside a caller's transaction (view_store.py)."""

    def check_name_free(self, project: str, name: str, kind: str,
                        own_id: int | None = None) -> None:
        """The same check outside a write, so callers fail before slow provider calls."""
        pid = self.project(project).id
        with self._lock:
            self._check_free(self._db, pid, project, name, kind, own_id)

    # projects ---------------------------------------------------------------------------
    def projects(self) -> list[ProjectRecord]:
        return [ProjectRecord(r["id"], r["name"], r["created_at"])
                for r in self._read("SELECT * FROM projects ORDER BY id")]

    def project(self, name: str) -> ProjectRecord:
        rows = self._read("SELECT * FROM projects WHERE lower(name) = lower(?)", (name,))
        if not rows:
            raise _missing(UnknownDatabase(f"Project with name {name} does not exist",
                                           title="Project not found"),
                           name, [p.name for p in self.projects()])
        r = rows[0]
        return ProjectRecord(r["id"], r["name"], r["created_at"])

    def create_project(self, name: str, if_not_exists: bool = False) -> ProjectRecord:
        stored_name(name, "project")
        with self.transaction() as db:
            exists = db.execute("SELECT 1 FROM projects WHERE lower(name) = lower(?)", (name,)).fetchone()
            if exists is None:
                db.execute("INSERT INTO projects (name, created_at) VALUES (?, ?)", (name, now()))
            elif not if_not_exists:
                raise Conflict(f"Project with name {name} already exists",
                               title="Project already exists")
        return self.project(name)

    def drop_project(self, name: str) -> None:
        """Refused (Conflict) while the project holds knowledge bases or agents: checked in the
        deleting transaction, so nothing created meanwhile is deleted with it."""
        project = self.project(name)
        with self.transaction() as db:
            refuse_project_drop(project.name, self._all(db, self._KB_SELECT, self._kb, project.id),
                                self._all(db, self._AGENT_SELECT, self._agent, project.id))
            db.execute("DELETE FROM projects WHERE id = ?", (project.id,))

    @staticmethod
    def _all(db: sqlite3.Connection, select: str, record: Any, project_id: int | None = None) -> list[Any]:
        """Records of `select` (a `_KB_SELECT` / `_AGENT_SELECT`) inside a transaction."""
        if project_id is None:
            return [record(r) for r in db.execute(select).fetchall()]
        return [record(r) for r in db.execute(select + " WHERE p.id = ?", (project_id,)).fetchall()]

    # knowledge bases --------------------------------------------------------------------
    _KB_SELECT = ("SELECT k.*, p.name AS project_name FROM knowledge_bases k "
                  "JOIN projects p ON p.id = k.project_id")

    @staticmethod
    def _kb(row: sqlite3.Row) -> KbRecord:
        return KbRecord(row["id"], row["project_id"], row["project_name"], row["name"],
                        row["created_at"], row["updated_at"], json.loads(row["spec"]))

    def knowledge_bases(self, project: str | None = None) -> list[KbRecord]:
        if project is None:
            return [self._kb(r) for r in self._read(self._KB_SELECT + " ORDER BY k.id")]
        pid = self.project(project).id
        return [self._kb(r) for r in
                self._read(self._KB_SELECT + " WHERE k.project_id = ? ORDER BY k.id", (pid,))]

    def find_knowledge_base(self, project: str, name: str) -> KbRecord | None:
        pid = self.project(project).id
        rows = self._read(self._KB_SELECT + " WHERE k.project_id = ? AND lower(k.name) = lower(?)",
                          (pid, name))
        return self._kb(rows[0]) if rows else None

    def knowledge_base(self, project: str, name: str) -> KbRecord:
        record = self.find_knowledge_base(project, name)
        if record is None:
            raise _missing(UnknownTable(f"Knowledge Base with name {name} does not exist",
                                    title="Knowledge Base not found"),
                           name, [kb.name for kb in self.knowledge_bases(project)])
        return record

    def create_knowledge_base(self, project: str, name: str, spec: dict[str, Any]) -> KbRecord:
        pid = self.project(project).id
        stamp = now()
        with self.transaction() as db:
            self._check_free(db, pid, project, name, "knowledge base")
            db.execute("INSERT INTO knowledge_bases (project_id, name, created_at, updated_at, spec)"
                       " VALUES (?, ?, ?, ?, ?)", (pid, name, stamp, stamp, json.dumps(spec)))
        return self.knowledge_base(project, name)

    def update_knowledge_base(self, record: KbRecord, spec: dict[str, Any] | None = None) -> KbRecord:
        """Store a new spec (or just touch updated_at); answers the record as written, not
        read back (each insert batch touches it), unless it is gone (the lookup: 404)."""
        text, updated_at = json.dumps(spec if spec is not None else record.spec), now()
        with self.transaction() as db:
            changed = db.execute("UPDATE knowledge_bases SET spec = ?, updated_at = ? WHERE id = ?",
                                 (text, updated_at, record.id)).rowcount
        if changed != 1:  # dropped meanwhile, by another server
            return self.knowledge_base(record.project_name, record.name)
        return replace(record, spec=json.loads(text), updated_at=updated_at)

    def delete_knowledge_base(self, record: KbRecord) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM knowledge_bases WHERE id = ?", (record.id,))

    # agents -----------------------------------------------------------------------------
    _AGENT_SELECT = ("SELECT a.*, p.name AS project_name FROM agents a "
                     "JOIN projects p ON p.id = a.project_id")

    @staticmethod
    def _agent(row: sqlite3.Row) -> AgentRecord:
        return AgentRecord(row["id"], row["project_id"], row["project_name"], row["name"],
                           row["created_at"], row["updated_at"],
                           json.loads(row["model"]) if row["model"] else None,
                           json.loads(row["data"]), row["prompt_template"],
                           json_or_empty(row, "params"))

    def agents(self, project: str) -> list[AgentRecord]:
        pid = self.project(project).id
        return [self._agent(r) for r in
                self._read(self._AGENT_SELECT + " WHERE a.project_id = ? ORDER BY a.id", (pid,))]

    def agent(self, project: str, name: str) -> AgentRecord:
        pid = self.project(project).id
        rows = self._read(self._AGENT_SELECT + " WHERE a.project_id = ? AND lower(a.name) = lower(?)",
                          (pid, name))
        if not rows:
            known = [a.name for a in self.agents(project)]
            error = _missing(UnknownTable(f"Agent with name {name} does not exist", title="Agent not found"),
                             name, known)
            if not error.hint:  # `%agent docs ...`: a knowledge base's name, or no agent made yet
                error.hint = (f" (the agents of project {project}: {', '.join(known[:10])}"
                              f"{', ...' if len(known) > 10 else ''})" if known else
                              f" (project {project} has no agents: CREATE AGENT {name} USING data = ...)")
            raise error
        return self._agent(rows[0])

    def create_agent(self, project: str, name: str, model: dict[str, Any] | None,
                     data: dict[str, Any], prompt_template: str | None,
                     params: dict[str, Any] | None = None) -> AgentRecord:
        pid = self.project(project).id
        stamp = now()
        with self.transaction() as db:
            self._check_free(db, pid, project, name, "agent")
            db.execute("INSERT INTO agents (project_id, name, created_at, updated_at, model, data,"
                       " prompt_template, params) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (pid, name, stamp, stamp, json.dumps(model) if model else None,
                        json.dumps(data), prompt_template, json.dumps(params) if params else None))
        return self.agent(project, name)

    def update_agent(self, record: AgentRecord, name: str, model: dict[str, Any] | None,
                     data: dict[str, Any], prompt_template: str | None,
                     params: dict[str, Any] | None = None) -> AgentRecord:
        with self.transaction() as db:
            self._check_free(db, record.project_id, record.project_name, name, "agent", record.id)
            db.execute("UPDATE agents SET name = ?, model = ?, data = ?, prompt_template = ?,"
                       " params = ?, updated_at = ? WHERE id = ?",
                       (name, json.dumps(model) if model else None, json.dumps(data),
                        prompt_template, json.dumps(params) if params else None, now(), record.id))
        return self.agent(record.project_name, name)

    def delete_agent(self, record: AgentRecord) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM agents WHERE id = ?", (record.id,))

    # data sources -----------------------------------------------------------------------
    @staticmethod
    def _datasource(row: sqlite3.Row) -> DatasourceRecord:
        return DatasourceRecord(row["id"], row["name"], row["engine"],
                                json.loads(row["parameters"]), row["created_at"])

    def datasources(self) -> list[DatasourceRecord]:
        return [self._datasource(r) for r in self._read("SELECT * FROM datasources ORDER BY id")]

    def find_datasource(self, name: str) -> DatasourceRecord | None:
        rows = self._read("SELECT * FROM datasources WHERE lower(name) = lower(?)", (name,))
        return self._datasource(rows[0]) if rows else None

    def create_datasource(self, name: str, engine: str, parameters: dict[str, Any]) -> DatasourceRecord:
        stored_name(name, "database")
        with self.transaction() as db:
            taken = db.execute("SELECT 1 FROM datasources WHERE lower(name) = lower(?)",
                               (name,)).fetchone() or \
                db.execute("SELECT 1 FROM projects WHERE lower(name) = lower(?)", (name,)).fetchone()
            if taken:
                raise Conflict(f"Database with name {name} already exists",
                               title="Database already exists")
            db.execute("INSERT INTO datasources (name, engine, parameters, created_at)"
                       " VALUES (?, ?, ?, ?)", (name, engine, json.dumps(parameters), now()))
        record = self.find_datasource(name)
        assert record is not None
        return record

    def update_datasource(self, name: str, parameters: dict[str, Any]) -> DatasourceRecord:
        """New connection parameters (ALTER DATABASE, PUT /api/databases/{name})."""
        with self.transaction() as db:
            db.execute("UPDATE datasources SET parameters = ? WHERE lower(name) = lower(?)",
                       (json.dumps(parameters), name))
        record = self.find_datasource(name)
        if record is None:
            raise UnknownDatabase(f"Database with name {name} does not exist", title="Database not found")
        return record

    def delete_datasource(self, name: str) -> None:
        """Refused (Conflict) while a knowledge base stores its chunks there or an agent reads
        its tables, checked in the deleting transaction."""
        with self.transaction() as db:
            row = db.execute("SELECT id, name FROM datasources WHERE lower(name) = lower(?)",
                             (name,)).fetchone()
            if row is None:
                raise UnknownDatabase(f"Database with name {name} does not exist",
                               title="Database not found")
            refuse_datasource_drop(row[1], self._all(db, self._KB_SELECT, self._kb),
                                   self._all(db, self._AGENT_SELECT, self._agent))
            db.execute("DELETE FROM datasources WHERE id = ?", (row[0],))
