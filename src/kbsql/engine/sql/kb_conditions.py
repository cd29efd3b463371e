"""WHERE clauses of knowledge-base statements -> a `SearchRequest` (AST in, no string parsing).

The dialect (reference-behaviour.md): `content = 'text'` is the semantic query; `relevance`
admits `>=`/`>`; `hybrid_search`, `hybrid_search_alpha` and `reranking` are options; every
other comparison (`=, !=, <, <=, >, >=, IN, LIKE`, and NOT IN / NOT LIKE / IS NULL) is a
filter on `id` or a metadata column, ANDed together.
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast

from kbsql.engine.knowledge.ingest import INTERNAL_KEYS
from kbsql.engine.knowledge.search import Filter, SearchRequest
from kbsql.interface.errors import SqlError

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!=", "<>": "<>"}


def constant(node: ast.ASTNode) -> Any:
    if isinstance(node, ast.NullConstant):
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return [constant(i) for i in node.items]
    if isinstance(node, ast.UnaryOperation) and node.op == "-" and isinstance(node.args[0], ast.Constant):
        return -node.args[0].value
    raise SqlError(f"Only constant values are supported here, not {node.to_string()}")


def comparisons(where: ast.ASTNode | None) -> list[tuple[str, str, Any]]:
    """Flatten an AND tree into (column, op, value) triples."""
    if where is None:
        return []
    if isinstance(where, ast.BinaryOperation) and where.op.lower() == "and":
        return comparisons(where.args[0]) + comparisons(where.args[1])
    if isinstance(where, ast.BinaryOperation) and len(where.args) == 2:
        left, right = where.args
        op = where.op.lower()
        if isinstance(right, ast.Identifier) and not isinstance(left, ast.Identifier) and op in _FLIP:
            left, right, op = right, left, _FLIP[op]
        if isinstance(left, ast.Identifier):
            return [(str(left.parts[-1]), op, constant(right))]
    raise SqlError(f"Unsupported condition on a knowledge base: {where.to_string()} "
                   "(use column <op> value, combined with AND)")


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _number(value: Any, what: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise SqlError(f"{what} must be a number, not {value!r}") from None


MAX_COUNT = 2**63 - 1


def count(node: ast.ASTNode, what: str) -> int:
    """A LIMIT or OFFSET value: a whole number >= 0."""
    value = constant(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SqlError(f"{what} must be a whole number >= 0, not {value!r}")
    if value > MAX_COUNT:  # never quietly capped: the caller asked for something else
        raise SqlError(f"{what} {value} is too large: at most {MAX_COUNT} (2^63 - 1)")
    return value


_ROW_COLUMNS = ("id", "chunk_id", "chunk_content", "content")


def check_filter_columns(filters: list[Filter], metadata_columns: list[str] | None) -> None:
    """Refuse a filter on a column the knowledge base cannot hold.

    Only when `metadata_columns` were declared: then a chunk's metadata has exactly those keys
    (plus the internal ones), and a filter on any other name would quietly match nothing,
    which is how a typo looks. With inferred metadata any key may exist, so all pass.
    """
    if metadata_columns is None:
        return
    known = set(metadata_columns) | INTERNAL_KEYS
    for f in filters:
        if f.column.lower() not in _ROW_COLUMNS and f.column not in known:
            raise SqlError(f"Unknown column {f.column!r} in a knowledge-base condition: the columns "
                           f"are {list(_ROW_COLUMNS[:3])}, the metadata columns {list(metadata_columns)} "
                           f"and the chunk keys {sorted(INTERNAL_KEYS)}")


def search_request(where: ast.ASTNode | None, limit: ast.ASTNode | None = None,
                   metadata_columns: list[str] | None = None) -> SearchRequest:
    """The search a WHERE clause asks for; `metadata_columns` (declared, or None when inferred)
    lets a filter on an unknown column be refused rather than match nothing."""
    request = SearchRequest()
    for column, op, value in comparisons(where):
        name = column.lower()
        if name == "content" and op == "=":
            if request.query is not None:
                raise SqlError("Only one `content = '...'` search per query")
            request.query = str(value)
        elif name == "relevance":
            if op not in (">=", ">"):
                raise SqlError("relevance only admits >= or > (e.g. relevance >= 0.5)")
            request.min_relevance = _number(value, "relevance")
            request.strict = op == ">"
        elif name in ("relevance_threshold",):
            request.min_relevance = _number(value, "relevance_threshold")
        elif name == "hybrid_search":
            request.hybrid = _truthy(value)
        elif name == "hybrid_search_alpha":
            request.hybrid = True
            request.alpha = _number(value, "hybrid_search_alpha")
            if not 0.0 <= request.alpha <= 1.0:
                raise SqlError(f"hybrid_search_alpha must be between 0 and 1, not {value!r}")
        elif name == "reranking":
            request.rerank = _truthy(value)
        elif name == "distance":
            raise SqlError("filter on relevance (>=, >), not on distance")
        else:
            request.filters.append(Filter(column, op, value))
    check_filter_columns(request.filters, metadata_columns)
    if limit is not None:
        request.limit = count(limit, "LIMIT")
    return request
