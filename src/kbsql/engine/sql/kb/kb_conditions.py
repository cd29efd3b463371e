"""Constant values of knowledge-base statements (AST in, no string parsing): literals, LIMIT
and OFFSET counts, option values. The WHERE clause itself is read by `kb_where`."""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast

from kbsql.interface.errors import LimitExceeded, SqlError


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
        raise LimitExceeded(f"{what} {value} is too large: at most {MAX_COUNT} (2^63 - 1)")
    return value
