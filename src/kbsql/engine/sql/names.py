"""Name resolution: what a table reference in a query means.

`a` resolves in the current project (`context.db`); `x.a` in project or data source `x`;
`x.s.a` in schema `s` of data source `x`. Projects and data sources share one namespace
(the catalog enforces it), `information_schema` and the built-in `df` source are reserved.
A name that resolves to nothing is an error naming the table AND the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbsql.engine.datasources.base import Scan
from kbsql.engine.datasources.frames import FRAMES_SOURCE
from kbsql.interface.errors import NotFound, SqlError

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

INFORMATION_SCHEMA = "information_schema"
RESERVED = frozenset({INFORMATION_SCHEMA, FRAMES_SOURCE})


@dataclass
class Resolved:
    """kind: 'data' (a data source table, `scan` set), 'kb', 'agent' or 'info'."""

    kind: str
    database: str
    name: str
    scan: Scan | None = None


def find_project(session: SqlSession, name: str) -> str | None:
    """The stored spelling of project `name`, None if there is no such project."""
    try:
        return session.catalog.project(name).name
    except NotFound:
        return None


def not_found(table: str, database: str, hint: str = "") -> SqlError:
    return SqlError(f"Table '{table}' not found in database '{database}'{hint}")


def resolve(session: SqlSession, parts: list[str], current: str) -> Resolved:
    database, rest = (current, parts) if len(parts) == 1 else (parts[0], parts[1:])
    name = ".".join(rest)
    if database.lower() == INFORMATION_SCHEMA:
        return Resolved("info", INFORMATION_SCHEMA, rest[-1].lower())
    project = find_project(session, database)
    if project is not None:
        if len(rest) != 1:
            raise not_found(name, project)
        catalog = session.catalog
        kb = catalog.find_knowledge_base(project, rest[0])
        if kb is not None:
            return Resolved("kb", project, kb.name)
        try:
            return Resolved("agent", project, catalog.agent(project, rest[0]).name)
        except NotFound:
            pass
        hint = (" (a table of a data source is named <data_source>.<table>)"
                if len(parts) == 1 else "")
        raise not_found(name, project, hint)
    source = session.duck.source(database)
    if source is None:
        raise SqlError(f"Database '{database}' not found (in table reference "
                       f"'{'.'.join(parts)}'); SHOW DATABASES lists them")
    with session.duck.lock:  # native sources ask the shared DuckDB connection
        scan = source.scan(session.duck.con, rest)
    if scan is None:
        raise not_found(name, source.name)
    return Resolved("data", source.name, name, scan)


def table_parts(identifier: Any) -> list[str]:
    """The parts of a parser Identifier naming a database object."""
    return [str(p) for p in identifier.parts]
