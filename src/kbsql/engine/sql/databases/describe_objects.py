"""`DESCRIBE <type> [project.]name` and `SHOW PROJECTS`, as MindsDB's command executor answers
them: its `answer_describe_object` reads `information_schema.<TYPE>S` where NAME (and, for a
project's objects, PROJECT) is the one named, so `DESCRIBE VIEW v1` is the view's row (NAME,
PROJECT, QUERY) and `DESCRIBE JOB j1` the job's, not the columns a plain DESCRIBE lists
(DESCRIBE KNOWLEDGE_BASE has its own handler, kb_statements.describe)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from mindsdb_sql_parser import ast

from kbsql.engine.sql import refusals
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.databases import info_schema, job_tables
from kbsql.engine.sql.databases.database_statements import filtered, named_databases
from kbsql.engine.sql.tables.names import find_project, table_parts
from kbsql.interface.errors import SqlError, UnknownDatabase, UnknownTable

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed
    from kbsql.interface.results import SqlResult

_PROJECT_OBJECTS: dict[str, Callable[[SqlSession, str], pa.Table]] = {
    "VIEW": info_schema.views_table,
    "JOB": job_tables.jobs,
    "AGENT": lambda session, project: info_schema.agents(session),
}
_GLOBAL_OBJECTS: dict[str, Callable[[SqlSession], pa.Table]] = {
    "DATABASE": info_schema.databases,
    "PROJECT": lambda session: _projects(info_schema.databases(session)),
}
_ABSENT = {"MODEL": "ML models", "PREDICTOR": "ML models", "TRIGGER": "triggers", "CHATBOT": "chatbots",
           "SKILL": "skills", "ML_ENGINE": "ML engines", "HANDLER": "handlers"}
"""Types MindsDB describes whose feature kbsql lacks: refused in one line (refusals.py)."""


def _projects(databases: pa.Table) -> pa.Table:
    return databases.filter(pc.equal(databases.column("TYPE"), "project"))


def singular(kind: str) -> str:
    """MindsDB accepts either number (`DESCRIBE JOB` and `DESCRIBE JOBS`)."""
    kind = kind.upper().replace(" ", "_")
    for end in ("ES", "S"):
        if kind.endswith(end) and kind[: -len(end)] in {*_PROJECT_OBJECTS, *_GLOBAL_OBJECTS, *_ABSENT}:
            return kind[: -len(end)]
    return kind


def describe(session: SqlSession, statement: ast.Describe, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """DESCRIBE VIEW | JOB | AGENT | DATABASE | PROJECT [project.]name: the object's row of
    information_schema; a type kbsql lacks is refused, an unknown one named."""
    kind = singular(str(statement.type))
    parts = table_parts(statement.value)
    shown = f"{kind} {'.'.join(parts)}"
    if kind in _ABSENT:
        raise refusals.unsupported(f"{_ABSENT[kind]} (DESCRIBE {shown})")
    if kind in _GLOBAL_OBJECTS:
        if len(parts) != 1:
            raise SqlError(f"Invalid object name: {'.'.join(parts)} (a {kind.lower()} has a one-part name)")
        table, project = _GLOBAL_OBJECTS[kind](session), None
    elif kind in _PROJECT_OBJECTS:
        if len(parts) > 2:
            raise SqlError(f"Invalid object name: {'.'.join(parts)} "
                           f"(a {kind.lower()} is named [project.]name)")
        project = find_project(session, parts[0] if len(parts) == 2 else ctx["db"])
        if project is None:
            raise UnknownDatabase(f"Project not found: {parts[0] if len(parts) == 2 else ctx['db']}")
        table = _PROJECT_OBJECTS[kind](session, project)
        table = table.filter(pc.equal(pc.utf8_lower(table.column("PROJECT")), project.lower()))
    else:
        raise SqlError(f"Unknown describe type: {statement.type} (describe VIEW, JOB, AGENT, "
                       "KNOWLEDGE_BASE, DATABASE or PROJECT, or DESCRIBE a table)")
    found = table.filter(pc.equal(pc.utf8_lower(table.column("NAME")), parts[-1].lower()))
    if found.num_rows == 0:
        where = "" if project is None else f" in project {project}"
        raise UnknownTable(f"{kind.capitalize()} {parts[-1]} not found{where}")
    return ArrowTableResult(found, ctx)


def show_projects(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """SHOW PROJECTS [LIKE | WHERE]: one column `project`, as MindsDB's (information_schema
    DATABASES of TYPE project, which its WHERE reads)."""
    listed = named_databases(_GLOBAL_OBJECTS["PROJECT"](session), "project")
    return filtered(session, listed, statement, ctx, ["project"])
