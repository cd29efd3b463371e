"""The SQL door: parse one statement of the reference dialect, route it, shape the answer.

Every failure becomes an `ErrorResult` (HTTP 200 `type: error` on the wire), never an
exception out of `execute`, so a bad query cannot take the server down. This module only
parses and routes, through the one statement table (`statements.py`); the work lives in
the packages next to it:

- `kb/`: knowledge-base statements (DDL and listing in `kb_statements`, rows in `kb_rows`,
  background inserts in `kb_background`, `query_cancel` / `query_resume` routed here);
- `agent/`: CREATE/ALTER/DROP AGENT, SHOW AGENTS, asking an agent;
- `databases/`: projects and data sources (CREATE/ALTER/DROP DATABASE, USE, SHOW, DESCRIBE),
  tables of `files` and `df` and `information_schema`;
- `tables/`: SELECT over tables (name resolution in `names`, SQL rendering in
  `sqlglot_render`, DuckDB in `duck`, knowledge bases and agents inside joins in
  `kb_tables`), answers built lazily by `arrow_results`;
- `parse/`: variables, the literal fast paths and the bounded parser call.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast

from kbsql.engine.catalog import Catalog
from kbsql.engine.datasources.confine import PathPolicy
from kbsql.engine.datasources.frame_store import FrameStore
from kbsql.engine.datasources.registry import Engines
from kbsql.engine.datasources.upload_store import UPLOADS_SOURCE, UploadStore
from kbsql.engine.knowledge.bases import KnowledgeBases
from kbsql.engine.ports import AgentOps
from kbsql.engine.sql import refusals, statements
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.information_functions import answer_information_functions
from kbsql.engine.sql.kb import kb_background, kb_rows
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.parse.long_statements import LongStatements
from kbsql.engine.sql.parse.variables import Variables, bind_parameters
from kbsql.engine.sql.query_log import QueryLog
from kbsql.engine.sql.session import AGENT_JOIN_MAX_ROWS, SqlSession
from kbsql.engine.sql.tables import names
from kbsql.engine.sql.tables.duck import DuckSession
from kbsql.engine.sql.tables.duck_settings import DuckSettings
from kbsql.engine.sql.tables.plans import PlanCache
from kbsql.engine.sql.tables.select import cached_plan, run_plan, select_frame
from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.control import CURRENT, Control, Stopped
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import (
    Interrupted,
    KbsqlError,
    MissingParameter,
    ParseError,
    ServiceError,
    SqlError,
    Unavailable,
    one_line,
)
from kbsql.interface.progress import OnProgress
from kbsql.interface.results import ErrorResult, OkResult, SqlResult, default_context

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("kbsql.sql")


def context_of(context: dict[str, Any] | None) -> dict[str, Any]:
    """The context the answer carries: the sent one with defaults filled in."""
    ctx = default_context()
    if isinstance(context, dict):  # the engine's own keys (kb_rows.INLINE) are not the caller's
        ctx.update({k: v for k, v in context.items() if v is not None and not str(k).startswith("_")})
    ctx["db"] = ctx.get("db") or DEFAULT_PROJECT
    return ctx


def _own_table(statement: ast.ASTNode) -> Any:
    """The table a DESCRIBE, SHOW COLUMNS, INSERT or DELETE is about (a typed DESCRIBE, such
    as DESCRIBE KNOWLEDGE_BASE kb, names its object, not a table); None for the others."""
    if isinstance(statement, ast.Describe) and not getattr(statement, "type", None):
        return statement.value
    if isinstance(statement, ast.Show) and (statement.category or "").upper() in ("COLUMNS", "FIELDS"):
        if statement.in_table is not None and statement.from_table is not None:  # FROM t IN db: db.t,
            statement.from_table = ast.Identifier(  # folded once for the router and the handler
                parts=[*statement.in_table.parts, statement.from_table.parts[-1]])
            statement.in_table = None
        return statement.from_table
    if isinstance(statement, (ast.Insert, ast.Delete, ast.Update)):
        return statement.table
    return None


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
                 uploads: UploadStore, policy: PathPolicy | None = None,
                 background_inserts: int = kb_background.DEFAULT_WORKERS,
                 settings: DuckSettings | None = None, engines: Engines | None = None,
                 agent_join_max_rows: int = AGENT_JOIN_MAX_ROWS, variables: Variables | None = None):
        # `policy`: which files data sources may open (datasources/confine.py); `settings`:
        # memory, spill and time bounds of the SQL engine
        duck = DuckSession(catalog, frames, policy, settings, {UPLOADS_SOURCE: uploads}, engines)
        super().__init__(catalog, frames, duck, PlanCache(), kbs, agents, uploads, QueryLog(catalog),
                         variables or Variables())
        self.background = kb_background.BackgroundInserts(self, background_inserts)
        self.agent_join_max_rows = agent_join_max_rows
        bounds = duck.settings  # long statements take turns at the interpreter (long_statements)
        self.long_statements = LongStatements(bounds.long_statement_tokens, bounds.long_statement_slots,
                                              bounds.long_statement_note)

    def query(self, query: str, context: dict[str, Any] | None = None,
              params: dict[str, Any] | list[Any] | None = None,
              progress: OnProgress | None = None) -> SqlResult:
        """`RunsSql.query`: one statement, failures as an `ErrorResult` (an empty text too, as
        MindsDB answers it; a text that is not a string is a request error, raised)."""
        if not isinstance(query, str):
            raise MissingParameter("'query' must be an SQL string")
        return self.execute(query, context, params, progress)

    def close(self) -> None:
        self.background.close()
        self.duck.close()
        self.frames.close()
        self.uploads.close()

    def execute(self, query: str, context: dict[str, Any] | None = None,
                params: dict[str, Any] | list[Any] | None = None,
                progress: OnProgress | None = None) -> SqlResult:
        """Run one statement; `params` (rest/sql.mdx) fill `:name` / `?` placeholders and are
        variables too; `SET @name = ...`, `@name` and `from_env('MDB_...')` are applied first
        (`variables`). Long work reports to `progress`."""
        problem = context_problem(context)
        if problem is not None:  # answered with the default context, never the bad value
            return ErrorResult(problem, context=default_context())
        ctx = context_of(context)
        with self.deadline():
            return self._execute(query, ctx, params, progress)

    @contextmanager
    def deadline(self) -> Iterator[None]:
        """The block runs under the statement deadline: an embedded call's own, or the
        server's request's, brought to the statement timeout when that is sooner. A REST
        insert of rows is held to it too (Engine.insert_knowledge_base_rows)."""
        settings = self.duck.settings
        note = f"{settings.statement_timeout:g} s, {settings.timeout_note}" \
            if settings.statement_timeout else ""
        control = current_control()
        token = None
        if control is None:  # an embedded call: this statement's own deadline
            token = CURRENT.set(Control.after(settings.statement_timeout, note))
        else:  # the server's request: its deadline, or this server's if that is sooner
            control.tighten(settings.statement_timeout, note)
        try:
            yield
        finally:
            if token is not None:
                CURRENT.reset(token)

    def _execute(self, query: str, ctx: dict[str, Any], params: dict[str, Any] | list[Any] | None,
                 progress: OnProgress | None) -> SqlResult:
        try:
            if self.variables.set_statement(query) is not None:
                return OkResult(None, context=ctx)
            query = self.variables.expand(query, params if isinstance(params, dict) else None)
            plan = None if params else cached_plan(self, query, ctx["db"])  # a repeated SELECT over stable
            if plan is not None:                             # tables skips both parsers
                return ArrowTableResult(run_plan(self, plan), ctx)
            with self.long_statements.compiling(query):  # a long one waits for its turn
                return self._parse_and_run(query, ctx, params, progress)
        except Unavailable:  # not the statement's fault: a 503 to send again, not an SQL error
            raise
        except (SqlError, ServiceError) as exc:  # its kind kept; a service error's hint (a name
            return ErrorResult.of(exc, ctx)        # one edit from a known one) said here only
        except Stopped as exc:
            return ErrorResult(f"The statement was stopped: {exc.reason}", context=ctx,
                               kind=Interrupted.kind)
        except KbsqlError as exc:
            return ErrorResult(str(exc), context=ctx)
        except duckdb.ParserException as exc:  # of the SQL rendered for DuckDB, not the user's
            return ErrorResult(one_line(str(exc)), context=ctx, kind=ParseError.problem_type)
        except duckdb.Error as exc:
            return ErrorResult(one_line(str(exc)), context=ctx)
        except RecursionError:  # `1+1+...` thousands deep: bad input, not a fault to log
            return ErrorResult("The statement nests too deeply (thousands of chained "
                               "operators or parentheses): split it", context=ctx)
        except Exception as exc:  # a bug must still answer in the documented shape
            log.exception("SQL statement failed unexpectedly")  # no query text: it may hold keys
            return ErrorResult(f"{type(exc).__name__}: {exc}", context=ctx)

    def _parse_and_run(self, query: str, ctx: dict[str, Any], params: dict[str, Any] | list[Any] | None,
                       progress: OnProgress | None) -> SqlResult:
        try:  # long VALUES rows and IN lists skip sly; too many tokens are refused
            statement = parsing.parse(query)
        except SqlError:
            raise
        except Exception as exc:  # the parser's message shows the statement and the position
            return ErrorResult(f"{exc}", context=ctx, kind=ParseError.problem_type)
        refusals.refuse_last_outside_job(statement, query)
        if params:
            bind_parameters(statement, params)
            return self.run(statement, ctx, progress=progress)
        if ":" in query or "?" in query:  # a placeholder no params set: "Parameter is not
            bind_parameters(statement, {})  # set" (MindsDB), not DuckDB's binder error
        return self.run(statement, ctx, query, progress)

    def run(self, statement: ast.ASTNode, ctx: dict[str, Any], query: str | None = None,
            progress: OnProgress | None = None) -> SqlResult:
        """Route one parsed statement through the statement table (`statements`). Its own
        table is resolved once, here (`_routed`); `query` is its text when the answer's plan
        may be cached; `progress` goes to the handler with it."""
        refused = refusals.refusal(statement)
        if refused is not None:
            raise refused
        function = kb_background.query_function(statement)
        if function is not None:  # SELECT query_cancel(id) / query_resume(id)
            name, query_id = function
            if name == "query_cancel":
                return self.background.cancel(query_id, ctx)
            return self.background.resume(query_id, ctx)
        names.lower_created_name(statement)
        if answer_information_functions(statement, ctx, query):  # the session's values: not
            query = None                                            # cached by the text
        routed = self._routed(statement, ctx, query)
        if progress is not None:
            routed = dataclasses.replace(routed, progress=progress)
        handler = statements.handler_for(statement, routed)
        if handler is None:
            raise refusals.fallback(statement)
        return handler(self, statement, ctx, routed)

    def _routed(self, statement: ast.ASTNode, ctx: dict[str, Any], query: str | None) -> names.Routed:
        """The statement's own table and what it names. A SELECT or DESCRIBE of a name that
        resolves to nothing fails here with the resolver's message; an INSERT or DELETE into
        something other than a knowledge base is refused by its handler."""
        if isinstance(statement, ast.Select):
            ctes = frozenset(str(c.name.parts[-1]).lower() for c in statement.cte or [])
            try:
                return names.Routed(statement.from_table,
                                    names.target_of(self, statement.from_table, ctx, ctes), query)
            except SqlError:  # a knowledge base's vector store read as a table: say so instead
                kb_rows.refuse_vector_store(self, statement.from_table)
                names.missing_knowledge_base(self, statement, ctx)
                raise
        table = _own_table(statement)
        if table is None:
            return names.Routed(query=query)
        if isinstance(statement, (ast.Insert, ast.Delete, ast.Update)):
            try:
                return names.Routed(table, names.target_of(self, table, ctx), query)
            except (SqlError, ServiceError):
                return names.Routed(query=query)
        return names.Routed(table, names.target_of(self, table, ctx), query)

    def select_frame(self, statement: ast.ASTNode, ctx: dict[str, Any]) -> pd.DataFrame:
        """Run a SELECT over tables and return ONE pandas DataFrame of all its rows (used by
        `INSERT INTO kb SELECT ...`, which batches the rows itself)."""
        return select_frame(self, statement, context_of(ctx))
