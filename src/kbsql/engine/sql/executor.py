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
from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb.agents import CreateAgent, DropAgent, UpdateAgent
from mindsdb_sql_parser.ast.mindsdb.create_database import CreateDatabase

from kbsql.engine.catalog import Catalog
from kbsql.engine.datasources.confine import PathPolicy
from kbsql.engine.datasources.frames import FRAMES_SOURCE, FrameStore
from kbsql.engine.knowledge.bases import KnowledgeBases
from kbsql.engine.ports import AgentOps
from kbsql.engine.sql import agents_sql, databases, kb_statements, names, parsing, refusals
from kbsql.engine.sql.duck import DuckSession
from kbsql.engine.sql.plans import PlanCache
from kbsql.engine.sql.results import ArrowTableResult
from kbsql.engine.sql.select import cached_plan, run_select, select_frame
from kbsql.engine.sql.session import SqlSession
from kbsql.engine.sql.variables import bind_parameters
from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.errors import KbsqlError, MissingParameter, ServiceError, SqlError, Unavailable
from kbsql.interface.results import ErrorResult, OkResult, SqlResult, default_context

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

    def query(self, query: str, context: dict[str, Any] | None = None,
              params: dict[str, Any] | list[Any] | None = None) -> SqlResult:
        """`RunsSql.query`: one statement, failures as an `ErrorResult` (an empty text is a
        request error, raised: there is no statement to answer)."""
        if not isinstance(query, str) or not query.strip():
            raise MissingParameter("'query' must be a non-empty SQL string")
        return self.execute(query, context, params)

    def close(self) -> None:
        self.duck.close()
        self.frames.close()

    def execute(self, query: str, context: dict[str, Any] | None = None,
                params: dict[str, Any] | list[Any] | None = None) -> SqlResult:
        """Run one statement; `params` (rest/sql.mdx) fill `:name` / `?` placeholders and are
        variables too; `SET @name = ...`, `@name` and `from_env('MDB_...')` are applied first
        (`variables`)."""
        problem = context_problem(context)
        if problem is not None:  # answered with the default context, never the bad value
            return ErrorResult(problem, context=default_context())
        ctx = context_of(context)
        try:
            if self.variables.set_statement(query) is not None:
                return OkResult(None, context=ctx)
            query = self.variables.expand(query, params if isinstance(params, dict) else None)
            plan = None if params else cached_plan(self, query, ctx["db"])  # a repeated SELECT over stable
            if plan is not None:                             # tables skips both parsers
                return ArrowTableResult(self.duck.run(plan.sql), ctx)
            try:  # long VALUES rows and IN lists skip sly; too many tokens are refused
                statement = parsing.parse(query)
            except SqlError:
                raise
            except Exception as exc:  # the parser's message shows the statement and the position
                return ErrorResult(f"{exc}", context=ctx)
            if params:
                bind_parameters(statement, params)
                return self.run(statement, ctx)
            return self.run(statement, ctx, query)
        except SqlError as exc:
            return ErrorResult(exc.message, exc.error_code, context=ctx)
        except Unavailable:  # not the statement's fault: a 503 to send again, not an SQL error
            raise
        except ServiceError as exc:
            return ErrorResult(exc.detail, context=ctx)
        except KbsqlError as exc:
            return ErrorResult(str(exc), context=ctx)
        except duckdb.Error as exc:
            return ErrorResult(str(exc), context=ctx)
        except RecursionError:  # `1+1+...` thousands deep: bad input, not a fault to log
            return ErrorResult("The statement nests too deeply (thousands of chained "
                               "operators or parentheses): split it", context=ctx)
        except Exception as exc:  # a bug must still answer in the documented shape
            log.exception("SQL statement failed unexpectedly")  # no query text: it may hold keys
            return ErrorResult(f"{type(exc).__name__}: {exc}", context=ctx)

    def run(self, statement: ast.ASTNode, ctx: dict[str, Any], query: str | None = None) -> SqlResult:
        """Route one parsed statement. Its own table is resolved once, here (`_target`): a
        knowledge base goes to `kb_statements` with its record (so do the KB statements that
        name no table), an agent to `select_agent`, a table to its handler with the
        resolution."""
        refused = refusals.refusal(statement)
        if refused is not None:
            raise refused
        table, target = self._target(statement, ctx)
        handled = kb_statements.handle(self, statement, ctx, target)
        if handled is not None:
            return handled
        asked = agents_sql.select_agent(self, statement, ctx, target)
        if asked is not None:
            return asked
        resolved: names.Resolutions = {} if target is None else {tuple(names.table_parts(table)): target}
        if isinstance(statement, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
            return ArrowTableResult(run_select(self, statement, ctx, query, resolved=resolved), ctx)
        if isinstance(statement, ast.Use):
            return databases.use(self, statement, ctx)
        if isinstance(statement, CreateDatabase):
            return databases.create_database(self, statement, ctx)
        if isinstance(statement, ast.DropDatabase):
            return databases.drop_database(self, statement, ctx)
        if isinstance(statement, ast.Describe):
            return databases.describe(self, statement, ctx, resolved)
        if isinstance(statement, CreateAgent):
            return agents_sql.create_agent(self, statement, ctx)
        if isinstance(statement, DropAgent):
            return agents_sql.drop_agent(self, statement, ctx)
        if isinstance(statement, UpdateAgent):
            return agents_sql.update_agent(self, statement, ctx)
        if isinstance(statement, ast.Show):
            category = (statement.category or "").upper()
            if category in ("DATABASES", "SCHEMAS"):
                return databases.show_databases(self, statement, ctx)
            if category == "TABLES":
                return databases.show_tables(self, statement, ctx)
            if category == "AGENTS":
                return agents_sql.show_agents(self, statement, ctx)
            if category in ("COLUMNS", "FIELDS") and statement.from_table is not None:
                return databases.describe(self, ast.Describe(statement.from_table), ctx, resolved)
        if isinstance(statement, (ast.Insert, ast.Update, ast.Delete)):
            missing = self._missing_project(statement.table, ctx)
            if missing is not None:
                raise SqlError(missing)
            raise refusals.unsupported(f"{type(statement).__name__.upper()} of data-source tables: "
                                       f"{statement.to_string()} (INSERT, UPDATE and DELETE write to "
                                       "knowledge bases only)")
        raise refusals.fallback(statement)

    def _target(self, statement: ast.ASTNode, ctx: dict[str, Any]) -> tuple[Any, names.Resolved | None]:
        """(the statement's own table, what it names) or (None, None). A SELECT or DESCRIBE
        of a name that resolves to nothing fails here with the resolver's message; an INSERT
        or DELETE into something other than a knowledge base is refused by the router."""
        if isinstance(statement, ast.Select):
            ctes = frozenset(str(c.name.parts[-1]).lower() for c in statement.cte or [])
            try:
                return statement.from_table, names.target_of(self, statement.from_table, ctx, ctes)
            except SqlError:  # a knowledge base's vector store read as a table: say so instead
                kb_statements.refuse_vector_store(self, statement.from_table)
                raise
        if isinstance(statement, ast.Describe) and not getattr(statement, "type", None):
            return statement.value, names.target_of(self, statement.value, ctx)
        if isinstance(statement, ast.Show) and (statement.category or "").upper() in ("COLUMNS", "FIELDS"):
            return statement.from_table, names.target_of(self, statement.from_table, ctx)
        if isinstance(statement, (ast.Insert, ast.Delete)):
            try:
                return statement.table, names.target_of(self, statement.table, ctx)
            except (SqlError, ServiceError):
                return None, None
        return None, None

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
