"""`CREATE INDEX ON KNOWLEDGE_BASE kb [WITH (nprobe = 16, rerank = 4, ...)]` and `DROP INDEX ON
KNOWLEDGE_BASE kb`.

MindsDB documents the statement without parameters (knowledge_bases/insert_data.mdx): it
builds the knowledge base's index. Here every knowledge base always has an index, so the
statement rebuilds it, taking the parameters of engine/knowledge/settings.py (unknown ones
are refused). DROP INDEX goes back to the default settings (the index itself is how search
works here, so it is rebuilt, never removed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser.ast.mindsdb import CreateKnowledgeBaseIndex, DropKnowledgeBaseIndex

from kbsql.engine.sql.kb.kb_statements import record_of
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed


def create_index(session: SqlSession, statement: CreateKnowledgeBaseIndex, ctx: dict[str, Any],
                 routed: Routed) -> SqlResult:
    """CREATE INDEX ON KNOWLEDGE_BASE kb [WITH (...)]: rebuild with these settings."""
    session.kbs.service.create_index(record_of(session, statement.name, ctx), dict(statement.params or {}))
    return OkResult(None, context=ctx)


def drop_index(session: SqlSession, statement: DropKnowledgeBaseIndex, ctx: dict[str, Any],
               routed: Routed) -> SqlResult:
    """DROP INDEX ON KNOWLEDGE_BASE kb: rebuild with the default settings."""
    session.kbs.service.create_index(record_of(session, statement.name, ctx), {})
    return OkResult(None, context=ctx)
