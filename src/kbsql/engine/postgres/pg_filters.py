"""A knowledge base's filters as PostgreSQL (`WHERE` text and its parameters) for the
pgvector store (pgvector.py), as knowledge/local.py renders them for SQLite: the same
conditions, the same answers on both stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kbsql.engine.knowledge.search import Condition, Conditions, FilterGroup, group_sql, op_sql


def filter_sql(filters: Conditions) -> tuple[str, list[Any]]:
    """`WHERE`-ready SQL and parameters. Metadata is compared as jsonb (numbers as numbers,
    strings as strings, as the local store's json_extract does); LIKE is case-insensitive
    like SQLite's. OR / NOT groups render as one condition, as the local store's do."""
    args: list[Any] = []
    parts = [_condition_sql(f, args) for f in filters]
    return " AND ".join(parts), args


def _condition_sql(f: Condition, args: list[Any]) -> str:
    if isinstance(f, FilterGroup):
        return group_sql(f, lambda i: _condition_sql(i, args), "TRUE", "FALSE")
    op = op_sql(f)
    column = f.column.lower()
    to_arg: Callable[[Any], Any]
    if column in ("id", "chunk_id"):
        expr, value_sql, to_arg = column, "%s", _text_arg
        if op in ("<", "<=", ">", ">=") and isinstance(f.value, int | float):
            expr = f"(CASE WHEN {column} ~ '^\\s*-?[0-9]+(\\.[0-9]+)?\\s*$' THEN {column}::float8 END)"
            to_arg = float
    elif column in ("chunk_content", "content"):
        expr, value_sql, to_arg = "content", "%s", _text_arg
    else:
        expr, value_sql, to_arg = "(metadata -> %s)", "%s::jsonb", json_arg
        if op in ("LIKE", "NOT LIKE", "IS", "IS NOT"):
            expr = "(metadata ->> %s)"
    if op in ("IN", "NOT IN"):
        values = list(f.value) if isinstance(f.value, list | tuple | set) else [f.value]
        if not values:
            return "FALSE" if op == "IN" else "TRUE"
    if expr.startswith("(metadata"):
        args.append(f.column)  # the key is the first parameter of the expression
    if op in ("LIKE", "NOT LIKE"):
        args.append(str(f.value))
        return f"{expr} {op.replace('LIKE', 'ILIKE')} %s"
    if op in ("IS", "IS NOT"):
        return f"{expr} {op} NULL"
    if op in ("IN", "NOT IN"):
        args.extend(to_arg(v) for v in values)
        return f"{expr} {op} ({', '.join([value_sql] * len(values))})"
    args.append(to_arg(f.value))
    return f"{expr} {op} {value_sql}"


def _text_arg(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def json_arg(value: Any) -> str:
    """A metadata value as jsonb text (COPY and comparisons alike); what JSON cannot hold as
    its string."""
    return json.dumps(value, default=str)
