"""The SQL door: parse one statement of the reference dialect, route it, shape the answer.

Every failure becomes an `ErrorResult` (HTTP 200 `type: error` on the wire), never an
exception out of `execute`, so a bad query cannot take the server down. This module only
routes; the work lives next to it:

- `kb_statements`: statements about knowledge bases (asked first);
- `databases`: projects and data sources (CREATE/DROP DATABASE, USE, SHOW, DESCRIBE);
- `agents_sql`: CREATE/DROP AGENT, SHOW AGENTS;
- `select`: SELECT over tables (name resolution in `names`, SQL rendering in `render`,
  DuckDB in `duck`, knowledge bases and agents inside joins in `kb_tables`,
  `information_schema` in `info_schema`), answers built lazily by `results`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast, parse_sql
from mindsdb_sql_parser.ast.mindsdb.agents import CreateAgent, DropAgent
from mindsdb_sql_parser.ast.mindsdb.create_database import CreateDatabase

from kbsql.engine.catalog import Catalog
from kbsql.engine.datasources.confine import PathPolicy
from kbsql.engine.datasources.frames import FRAMES_SOURCE, FrameStore
from kbsql.engine.knowledge.bases import KnowledgeBases
from kbsql.engine.ports import AgentOps
from kbsql.engine.sql import agents_sql, databases, kb_statements
from kbsql.engine.sql.duck import DuckSession
from kbsql.engine.sql.plans import PlanCache
from kbsql.engine.sql.results import ArrowTableResult
from kbsql.engine.sql.select import cached_plan, run_select, select_frame
from kbsql.engine.sql.session import SqlSession
from kbsql.engine.sql.values_fastpath import parse_insert_values
from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.errors import BadRequest, KbsqlError, ServiceError, SqlError
from kbsql.interface.results import ErrorResult, SqlResult, default_context

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("kbsql.sql")


def context_of(context: dict[str, Any] | None) -> dict[str, Any]:
    """The context the answer carries: the sent one with defaults filled in."""
    ctx = default_context()
    if isinstance(context, dict):
        ctx.update({k: v for k, v in context.items() if v is not None})
    ctx["db"] = ctx.get("db") or DEFAULT_PROJECT
    return ctx


def context_problem(context: Any) -> str | None:
    """Why a sent context cannot be used, or None. `db` names the current project or data
    source, so it must be a string; whether that project exists is checked by the
    statements that need it (the reference answers `SELECT 1` under any database name)."""
    if context is None:
        return None
    if not isinstance(context, dict):
        return f"The query context must be an object like {{\"db\": \"mindsdb\"}}, got {context!r}"
    db = context.get("db")
    if db is not None and not isinstance(db, str):
        return f"context.db must be a project or database name (a string), got {db!r}"
    return None


class SqlExecutor(SqlSession):
    """Parses with mindsdb_sql_parser and routes statements to the handlers; it is the
    session the handlers share (see `session`), and the `RunsSql` port agents use."""

    def __init__(self, catalog: Catalog, frames: FrameStore, kbs: KnowledgeBases, agents: AgentOps,
                 policy: PathPolicy | None = None):
        # `policy`: which files data sources may open (datasources/confine.py)
        super().__init__(catalog, frames, DuckSession(catalog, frames, policy), PlanCache(), kbs,
                         agents)

    def query(self, query: str, context: dict[str, Any] | None = None) -> SqlResult:
        """`RunsSql.query`: one statement, failures as an `ErrorResult` (an empty text is a
        request error, raised: there is no statement to answer)."""
        if not isinstance(query, str) or not query.strip():
            raise BadRequest("'query' must be a non-empty SQL string", title="Missing parameter")
        return self.execute(query, context)

    def close(self) -> None:
        self.duck.close()
        self.frames.close()

    def execute(self, query: str, context: dict[str, Any] | None = None) -> SqlResult:
        problem = context_problem(context)
        if problem is not None:  # answered with the default context, never the bad value
            return ErrorResult(problem, context=default_context())
        ctx = context_of(context)
        try:
            plan = cached_plan(self, query, ctx["db"])  # a repeated SELECT over stable
            if plan is not None:                             # tables skips both parsers
                return ArrowTableResult(self.duck.run(plan.sql), ctx)
            try:  # a long INSERT ... VALUES skips sly for its rows (same AST, see the module)
                statement = parse_insert_values(query) or parse_sql(query)
            except Exception as exc:  # the parser's message shows the statement and the position
                return ErrorResult(f"{exc}", context=ctx)
            return self.run(statement, ctx, query)
        except SqlError as exc:
            return ErrorResult(exc.message, exc.error_code, context=ctx)
        except ServiceError as exc:
            return ErrorResult(exc.detail, context=ctx)
        except KbsqlError as exc:
            return ErrorResult(str(exc), context=ctx)
        except duckdb.Error as exc:
            return ErrorResult(str(exc), context=ctx)
        except Exception as exc:  # a bug must still answer in the documented shape
            log.exception("SQL statement failed unexpectedly")  # no query text: it may hold keys
            return ErrorResult(f"{type(exc).__name__}: {exc}", context=ctx)

    def run(self, statement: ast.ASTNode, ctx: dict[str, Any], query: str | None = None) -> SqlResult:
        """Route one parsed statement. Knowledge-base statements go to `kb_statements` first."""
        handled = kb_statements.handle(self, statement, ctx)
        if handled is not None:
            return handled
        if isinstance(statement, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
            return ArrowTableResult(run_select(self, statement, ctx, query), ctx)
        if isinstance(statement, ast.Use):
            return databases.use(self, statement, ctx)
        if isinstance(statement, CreateDatabase):
            return databases.create_database(self, statement, ctx)
        if isinstance(statement, ast.DropDatabase):
            return databases.drop_database(self, statement, ctx)
        if isinstance(statement, ast.Describe):
            return databases.describe(self, statement, ctx)
        if isinstance(statement, CreateAgent):
            return agents_sql.create_agent(self, statement, ctx)
        if isinstance(statement, DropAgent):
            return agents_sql.drop_agent(self, statement, ctx)
        if isinstance(statement, ast.Show):
            category = (statement.category or "").upper()
            if category in ("DATABASES", "SCHEMAS"):
                return databases.show_databases(self, statement, ctx)
            if category == "TABLES":
                return databases.show_tables(self, statement, ctx)
            if category == "AGENTS":
                return agents_sql.show_agents(self, statement, ctx)
        if isinstance(statement, (ast.Insert, ast.Update, ast.Delete)):
            missing = self._missing_project(statement.table, ctx)
            if missing is not None:
                raise SqlError(missing)
            raise SqlError(f"Statement not supported: {statement.to_string()} (INSERT, UPDATE "
                           "and DELETE write to knowledge bases only)")
        raise SqlError(f"Statement not supported: {statement.to_string()}")

    def _missing_project(self, table: Any, ctx: dict[str, Any]) -> str | None:
        """Why a write found no knowledge base, when the reason is a project that does not
        exist (the current one from `context.db`, or `project.kb`); None otherwise."""
        parts = [str(p) for p in getattr(table, "parts", [])]
        if len(parts) not in (1, 2):
            return None
        project = parts[0] if len(parts) == 2 else ctx["db"]
        if project.lower() == FRAMES_SOURCE or self.catalog.find_datasource(project):
            return None
        try:
            self.catalog.project(project)
        except ServiceError as exc:
            return exc.detail
        return None

    def select_frame(self, statement: ast.ASTNode, ctx: dict[str, Any]) -> pd.DataFrame:
        """Run a SELECT over tables and return ONE pandas DataFrame of all its rows (used by
        `INSERT INTO kb SELECT ...`, which batches the rows itself)."""
        return select_frame(self, statement, context_of(ctx))

    def register_frame(self, name: str, frame: Any) -> int:
        """Store a DataFrame as table `df.<name>` (see `datasources.frames`)."""
        count = self.frames.register(name, frame)
        return count
