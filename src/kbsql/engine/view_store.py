"""Views (`CREATE VIEW [project.]v AS (SELECT ...)`), kept in the catalog.

A view is a name in a project and the text of its SELECT; reading it compiles that text in
the view's project (sql/tables/select.py), so it always reads the tables as they are now.
Living in the catalog's `views` table makes a view server-wide, as knowledge bases are:
every server on one PostgreSQL catalog sees it (catalog_pg.MIGRATIONS holds the table
there). A view shares its project's namespace with knowledge bases and agents: `SELECT ...
FROM p.x` must mean one thing (`Catalog._check_free`, which also looks here).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from kbsql.engine.catalog import Catalog, now
from kbsql.engine.stored_names import stored_name
from kbsql.interface.errors import Conflict, UnknownTable


@dataclass(frozen=True)
class ViewRecord:
    id: int
    project_name: str
    name: str
    query: str
    created_at: str


_SELECT = ("SELECT v.id, p.name AS project_name, v.name, v.query, v.created_at FROM views v "
           "JOIN projects p ON p.id = v.project_id")


def _record(row: Any) -> ViewRecord:
    return ViewRecord(row["id"], row["project_name"], row["name"], row["query"], row["created_at"])


def _rows(catalog: Catalog, where: str, args: tuple[Any, ...]) -> list[Any]:
    """Rows of the views table; none from a catalog written before views (opened read-only,
    so never upgraded)."""
    try:
        return catalog.read(f"{_SELECT} {where} ORDER BY v.id", args)
    except sqlite3.OperationalError:
        return []


def views(catalog: Catalog, project: str | None = None) -> list[ViewRecord]:
    """The views of `project` (every project's when None)."""
    if project is None:
        return [_record(r) for r in _rows(catalog, "", ())]
    return [_record(r) for r in _rows(catalog, "WHERE lower(p.name) = lower(?)", (project,))]


def find_view(catalog: Catalog, project: str, name: str) -> ViewRecord | None:
    rows = _rows(catalog, "WHERE lower(p.name) = lower(?) AND lower(v.name) = lower(?)", (project, name))
    return _record(rows[0]) if rows else None


def create_view(catalog: Catalog, project: str, name: str, query: str, replace: bool = False,
                if_not_exists: bool = False) -> None:
    """Store view `project.name`; a name in use (by a view, without `replace`, or by a
    knowledge base or agent) is a Conflict."""
    stored_name(name, "view")
    record = catalog.project(project)
    with catalog.transaction() as db:
        row = db.execute("SELECT id FROM views WHERE project_id = ? AND lower(name) = lower(?)",
                         (record.id, name)).fetchone()
        if row is not None and if_not_exists:
            return
        if row is not None and not replace:
            raise Conflict(f"View {name} already exists in project {record.name}",
                           title="View already exists")
        catalog.check_free_in(db, record.id, record.name, name, "view", row[0] if row else None)
        if row is not None:
            db.execute("UPDATE views SET query = ? WHERE id = ?", (query, row[0]))
        else:
            db.execute("INSERT INTO views (project_id, name, query, created_at) VALUES (?, ?, ?, ?)",
                       (record.id, name, query, now()))


def drop_view(catalog: Catalog, project: str, name: str, if_exists: bool = False) -> None:
    """Remove view `project.name` (UnknownTable when there is none, unless `if_exists`)."""
    record = catalog.project(project)
    with catalog.transaction() as db:
        done = db.execute("DELETE FROM views WHERE project_id = ? AND lower(name) = lower(?)",
                          (record.id, name))
    if not done.rowcount and not if_exists:
        raise UnknownTable(f"View not found: {name} does not exist in project {record.name}",
                           title="View not found")
