"""Views in SQL: `CREATE [OR REPLACE] VIEW [IF NOT EXISTS] [project.]v AS (SELECT ...)`,
`ALTER VIEW`, `DROP VIEW [IF EXISTS]`, `SHOW VIEWS [FROM project]`, as MindsDB has them.

A view lives in a project (the current one when unqualified) and is kept in the catalog
(view_store.py); `SELECT ... FROM project.v`, alone or joined with knowledge bases and
tables, reads its SELECT as a subquery compiled in the view's project. CREATE VIEW runs a
plain SELECT once with LIMIT 1 in the view's project, as MindsDB's `Project.create_view`
does, so a view over a table that does not exist is refused when it is made; ALTER VIEW and
a UNION are only checked to parse (MindsDB's too), and a view's tables are resolved again
whenever it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.drop import DropView
from mindsdb_sql_parser.ast.mindsdb import AlterView, CreateView

from kbsql.engine import view_store
from kbsql.engine.sql import refusals
from kbsql.engine.sql.databases import info_schema
from kbsql.engine.sql.databases.database_statements import filtered
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.tables.names import find_project, table_parts
from kbsql.engine.sql.tables.select import run_select
from kbsql.interface.errors import SqlError, UnknownDatabase
from kbsql.interface.results import OkResult, SqlResult, default_context

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed

def _place(session: SqlSession, identifier: Any, ctx: dict[str, Any]) -> tuple[str, str]:
    """(project, view name) of `[project.]v`; a view lives in a project only."""
    parts = table_parts(identifier)
    if len(parts) > 2:
        raise SqlError(f"A view name is [project.]view, got {'.'.join(parts)}")
    database = parts[0] if len(parts) == 2 else ctx["db"]
    project = find_project(session, database)
    if project is None:
        where = "a data source" if session.duck.source(database) is not None else "not a project"
        raise UnknownDatabase(f"Views are made in a project; {database} is {where} "
                              "(SHOW DATABASES lists them)")
    return project, parts[-1]


def _checked_query(statement: CreateView | AlterView) -> str:
    source = getattr(statement, "from_table", None)
    if source is not None:  # `CREATE VIEW v FROM integration (its own SQL)`: the native query's rows
        return checked_query(f"SELECT * FROM {source.to_string()} ({statement.query_str})")
    return checked_query(str(statement.query_str or ""))


def checked_query(query: str) -> str:
    """A view's SELECT text, checked to parse as a SELECT (its tables are resolved when read)."""
    query = query.strip()
    try:
        parsed = parsing.parse(query)
    except SqlError:
        raise
    except Exception as exc:
        raise SqlError(f"The view's query does not parse: {exc}") from None
    if not isinstance(parsed, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
        raise SqlError(f"A view is a SELECT, got {type(parsed).__name__.upper()}: {query[:80]}")
    refusals.refuse_last_outside_job(parsed, query)  # MindsDB keeps a view's LAST; here a job's only
    return query


def _try_once(session: SqlSession, query: str, project: str) -> None:
    """Run a view's plain SELECT with LIMIT 1 in its project: its tables must exist now
    (MindsDB's check when a view is made); its error is the statement's. Two columns of one
    name are refused, as MindsDB refuses them (`select *` over a join sharing `id`): read
    through the view, the second came back renamed `id_1`."""
    select = parsing.parse(query)
    if isinstance(select, ast.Select):
        select.limit = ast.Constant(1)
        columns = run_select(session, select, default_context(project)).column_names
        seen: set[str] = set()
        for column in columns:
            if column.lower() in seen:
                raise SqlError(f"The view's query returns the column '{column}' twice: name each "
                               "column once (an alias, or the columns listed instead of *)")
            seen.add(column.lower())


def create_view(session: SqlSession, statement: CreateView, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    project, name = _place(session, statement.name, ctx)
    query = _checked_query(statement)
    _try_once(session, query, project)
    view_store.create_view(session.catalog, project, name, query,
                           replace=bool(getattr(statement, "is_replace", False)),
                           if_not_exists=bool(statement.if_not_exists))
    session.plans.clear()
    return OkResult(None, context=ctx)


def alter_view(session: SqlSession, statement: AlterView, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """ALTER VIEW v AS (SELECT ...): a new SELECT for a view that exists."""
    project, name = _place(session, statement.name, ctx)
    if view_store.find_view(session.catalog, project, name) is None:
        raise SqlError(f"View not found: {name} does not exist in project {project}")
    view_store.create_view(session.catalog, project, name, _checked_query(statement), replace=True)
    session.plans.clear()
    return OkResult(None, context=ctx)


def drop_view(session: SqlSession, statement: DropView, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    for identifier in statement.names:
        project, name = _place(session, identifier, ctx)
        view_store.drop_view(session.catalog, project, name, bool(statement.if_exists))
    session.plans.clear()
    return OkResult(None, context=ctx)


def show_views(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """SHOW VIEWS [FROM project] [LIKE | WHERE]: the views of a project in MindsDB's shape
    (`SELECT * FROM information_schema.views WHERE project = ...`: NAME, PROJECT, QUERY; its
    command executor's answer, which its MySQL-protocol tests read by `name`)."""
    source = statement.from_table or statement.in_table
    project, _ = _place(session, ast.Identifier(parts=[*table_parts(source), "_"]) if source
                        else ast.Identifier("_"), ctx)
    return filtered(session, info_schema.views_table(session, project), statement, ctx)
