"""Knowledge-base changes asked for through the service API rather than as SQL text:
altering fields and inserting a SELECT's result (what the REST PUT's alter fields and
`query` stand for, `interface.api.KnowledgeBaseEditing`).

Each is built as the statement it stands for and run through the router (`run`: the
executor's `run`), so the API and SQL cannot disagree. A statement that fails is the
request's fault: it is raised as `InvalidParameter` with the statement's message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb import AlterKnowledgeBase

from kbsql.engine.sql.kb.kb_rows import INLINE
from kbsql.engine.sql.parse.parsing import parse
from kbsql.interface.errors import InvalidParameter, ServiceError, SqlError
from kbsql.interface.results import OkResult, SqlResult

RunStatement = Callable[[ast.ASTNode, dict[str, Any]], SqlResult]


def alter(run: RunStatement, project: str, name: str, changes: dict[str, Any]) -> None:
    """ALTER KNOWLEDGE_BASE project.name USING <changes>."""
    try:
        run(AlterKnowledgeBase(name=ast.Identifier(parts=[project, name]), params=dict(changes)),
            {"db": project})
    except SqlError as exc:
        raise InvalidParameter(exc.message) from exc


def insert_query(run: RunStatement, project: str, name: str, query: str,
                 options: dict[str, Any] | None = None) -> int:
    """INSERT INTO project.name <query> [USING <options>]; the rows stored."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidParameter("'query' must be a SELECT statement")
    try:
        select = parse(query)  # bounded: a long text is refused, not parsed for minutes
        if not isinstance(select, ast.Select | ast.Union):
            raise InvalidParameter("'query' must be a SELECT statement")
        if options:
            select.using = {**(getattr(select, "using", None) or {}), **options}
        result = run(ast.Insert(table=ast.Identifier(parts=[project, name]), from_select=select),
                     {"db": project, INLINE: True})  # in the request, even with batch_size
    except SqlError as exc:
        raise InvalidParameter(exc.message) from exc
    except ServiceError:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("mindsdb_sql_parser"):
            raise InvalidParameter(f"'query' cannot be parsed: {exc}") from exc
        raise
    return int(result.affected_rows or 0) if isinstance(result, OkResult) else 0
