"""`CREATE INDEX ON KNOWLEDGE_BASE kb [WITH (nprobe = 16, rerank = 4, ...)]` and `DROP INDEX ON
KNOWLEDGE_BASE kb`.

MindsDB documents the statement without parameters (knowledge_bases/insert_data.mdx): it
builds the knowledge base's index. Here every knowledge base always has an index, so the
statement rebuilds it, taking the parameters of engine/knowledge/settings.py (unknown ones
are refused). DROP INDEX goes back to the default settings (the index itself is how search
works here, so it is rebuilt, never removed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser.ast.mindsdb import CreateKnowledgeBaseIndex, DropKnowledgeBaseIndex

from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    from mindsdb_sql_parser import ast

    from kbsql.engine.catalog import KbRecord
    from kbsql.engine.sql.session import SqlSession


def handle(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
           record_of: Callable[[Any], KbRecord]) -> SqlResult | None:
    """Execute CREATE/DROP INDEX ON KNOWLEDGE_BASE; None for any other statement.
    `record_of(identifier)` resolves the knowledge base as the other KB statements do."""
    if isinstance(statement, CreateKnowledgeBaseIndex):
        session.kbs.service.create_index(record_of(statement.name), dict(statement.params or {}))
        return OkResult(None, context=ctx)
    if isinstance(statement, DropKnowledgeBaseIndex):
        session.kbs.service.create_index(record_of(statement.name), {})
        return OkResult(None, context=ctx)
    return None
