"""`UPDATE kb SET ... WHERE ...` and the WHERE of DELETE/UPDATE on a knowledge base.

MindsDB answers `UPDATE my_kb SET content = '...' WHERE chunk_id = '...'` by embedding the
new text and updating the chunk in its vector store (KnowledgeBaseTable.update_query).
Here: `content` (or `chunk_content`) is the chunk's new text, embedded again; `metadata`
(a JSON object) and metadata columns by name set metadata keys. The WHERE clause is the
filters of DELETE: id, chunk_id, chunk_content and metadata conditions, no search.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.chunk_update import update_chunks
from kbsql.engine.knowledge.ingest import INTERNAL_KEYS
from kbsql.engine.sql.kb.kb_columns import Columns
from kbsql.engine.sql.kb.kb_conditions import constant
from kbsql.engine.sql.kb.kb_where import KbWhere, split_options
from kbsql.interface.errors import SqlError
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

Subquery = Callable[[ast.ASTNode], list[Any]]
_FIXED = ("id", "chunk_id", "embeddings", "relevance", "distance")


def where_filters(columns: Columns, where: ast.ASTNode | None, subquery: Subquery, verb: str) -> list[Any]:
    """A DELETE's or UPDATE's WHERE as filters: the metadata conditions of a search (OR, NOT,
    BETWEEN, IN a subquery); a search term there has no meaning."""
    options, node = split_options(where)
    if options.min_relevance is not None or options.hybrid:
        raise SqlError(f"{verb} on a knowledge base filters on id and metadata columns; "
                       "relevance and hybrid search are search options, not filters")
    if node is None:
        return []
    runner = KbWhere(lambda request: [], columns, options, search_limit=0, read_limit=None,
                     subquery=subquery)
    if runner.has_search(node):
        raise SqlError(f"{verb} on a knowledge base filters on id and metadata columns; "
                       "`content = '...'` and relevance are search terms, not filters")
    return [runner.to_filter(node)]


def update(session: SqlSession, record: KbRecord, statement: ast.Update, ctx: dict[str, Any],
           subquery: Subquery) -> SqlResult:
    if statement.from_select is not None:
        raise SqlError("UPDATE of a knowledge base sets values (UPDATE kb SET content = '...' WHERE "
                       "chunk_id = '...'), not the rows of a SELECT")
    content: str | None = None
    metadata: dict[str, Any] = {}
    columns = Columns.of(record)  # any name: SET may add a key
    for key, node in (statement.update_columns or {}).items():
        name, value = str(key), constant(node)
        lowered = name.lower()
        if lowered in ("content", "chunk_content"):
            if not isinstance(value, str) or not value.strip():
                raise SqlError(f"{name} must be set to a non-empty text")
            content = value
        elif lowered == "metadata":
            metadata.update(_metadata_object(value))
        elif lowered in _FIXED:
            raise SqlError(f"UPDATE cannot set {name} of a knowledge base (set content or metadata; "
                           "a new id is a new insert)")
        else:
            metadata[columns.resolve(name)] = value
    internal = sorted(set(metadata) & set(INTERNAL_KEYS))
    if internal:
        raise SqlError(f"UPDATE cannot set the chunk keys kbsql writes itself: {internal}")
    filters = where_filters(Columns.of(record, session.kbs.service), statement.where, subquery, "UPDATE")
    count = update_chunks(session.kbs.service, record, filters, content, metadata)
    session.catalog.update_knowledge_base(record)
    return OkResult(count, context=ctx)


def _metadata_object(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SqlError("metadata must be set to a JSON object, e.g. metadata = '{\"product\": \"x\"}'") \
                from None
    if not isinstance(value, dict):
        raise SqlError("metadata must be set to a JSON object, e.g. metadata = '{\"product\": \"x\"}'")
    return value
