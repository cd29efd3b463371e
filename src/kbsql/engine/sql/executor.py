"""The SQL door: parse one statement of the reference dialect, route it, shape the answer.

Every failure becomes an `ErrorResult` (HTTP 200 `type: error` on the wire), never an
exception out of `execute`, so a bad query cannot take the server down.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast, parse_sql

from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.errors import KbsqlError, ServiceError, SqlError
from kbsql.interface.results import ErrorResult, OkResult, SqlResult, TableResult, default_context

if TYPE_CHECKING:
    from kbsql.engine.engine import Engine


def context_of(context: dict[str, Any] | None) -> dict[str, Any]:
    """The context the answer carries: the sent one with defaults filled in."""
    ctx = default_context()
    if isinstance(context, dict):
        ctx.update({k: v for k, v in context.items() if v is not None})
    ctx["db"] = ctx.get("db") or DEFAULT_PROJECT
    return ctx


class SqlExecutor:
    """Parses with mindsdb_sql_parser and executes statements against the engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._duck = duckdb.connect(":memory:")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._duck.close()

    def execute(self, query: str, context: dict[str, Any] | None = None) -> SqlResult:
        ctx = context_of(context)
        try:
            statement = parse_sql(query)
        except Exception as exc:  # the parser's message shows the statement and the position
            return ErrorResult(f"{exc}", context=ctx)
        try:
            return self.run(statement, ctx)
        except SqlError as exc:
            return ErrorResult(exc.message, exc.error_code, context=ctx)
        except ServiceError as exc:
            return ErrorResult(exc.detail, context=ctx)
        except KbsqlError as exc:
            return ErrorResult(str(exc), context=ctx)
        except duckdb.Error as exc:
            return ErrorResult(str(exc), context=ctx)

    def run(self, statement: ast.ASTNode, ctx: dict[str, Any]) -> SqlResult:
        """Route one parsed statement. Knowledge-base statements go to `kb_statements`."""
        from kbsql.engine.sql import kb_statements

        handled = kb_statements.handle(self.engine, statement, ctx)
        if handled is not None:
            return handled
        if isinstance(statement, ast.Use):
            project = self.engine.catalog.project(str(statement.value.parts[-1])).name
            ctx["db"] = project
            return OkResult(None, context=ctx)
        if isinstance(statement, ast.Select) and statement.from_table is None:
            with self._lock:
                cursor = self._duck.execute(statement.to_string())
                names = [d[0] for d in cursor.description]
                rows = [list(r) for r in cursor.fetchall()]
            return TableResult(names, rows, context=ctx)
        raise SqlError(f"Statement not supported: {statement.to_string()}")

    def select_frame(self, statement: ast.Select, ctx: dict[str, Any]):
        """Run a SELECT over tables and return a pandas DataFrame (used by
        `INSERT INTO kb SELECT ...`). Implemented by the SQL-over-tables work."""
        raise SqlError(f"Selecting from tables is not supported yet: {statement.to_string()}")
