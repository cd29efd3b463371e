"""`col > LAST` in a job's statements: only the rows past what the previous run saw.

MindsDB (interfaces/query_context) keeps, per job and per condition, the largest value of
the column; the first run stores the column's current largest value and sees no row
(`COALESCE(LAST, v)` sees the rows past `v` instead). Here each run reads the column's
largest value `hi` first and selects `lo < col <= hi`, so a row added while the run runs is
left for the next one rather than skipped; `hi` is stored only with a successful run
(`job_store.finish`), so a failed run is retried over the same rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mindsdb_sql_parser import ast

from kbsql.engine.sql.tables.sqlglot_render import walk
from kbsql.interface.errors import SqlError

MaxOf = Callable[[ast.Select], Any]
"""Runs `SELECT max(col) AS v FROM table` for the job; returns the value (None: no rows)."""

_UNSET = object()


@dataclass
class Condition:
    node: ast.BinaryOperation
    column: ast.Identifier
    table: ast.ASTNode
    default: Any = _UNSET
    """COALESCE(LAST, default)'s default; unset for a bare LAST."""


def _is_last(node: Any) -> bool:
    return isinstance(node, ast.Last)


def _last_side(node: ast.BinaryOperation) -> tuple[ast.Identifier, Any] | None:
    """(column, default) when `node` compares a column with LAST or COALESCE(LAST, v)."""
    if len(node.args or []) != 2:
        return None
    column, other = node.args
    if not isinstance(column, ast.Identifier):
        return None
    if _is_last(other):
        return column, _UNSET
    if (isinstance(other, ast.Function) and str(other.op).lower() == "coalesce" and len(other.args) == 2
            and _is_last(other.args[0]) and isinstance(other.args[1], ast.Constant)):
        return column, other.args[1].value
    return None


def _table_of(select: ast.Select, column: ast.Identifier) -> ast.ASTNode:
    """The table `column` belongs to: the FROM table, or in a join the side it names."""
    source = select.from_table
    if isinstance(source, ast.Identifier):
        return source
    qualifier = [p.lower() for p in column.parts[:-1]]
    if isinstance(source, ast.Join) and qualifier:
        stack: list[Any] = [source]
        while stack:
            item = stack.pop()
            if isinstance(item, ast.Join):
                stack += [item.left, item.right]
            elif isinstance(item, ast.Identifier):
                alias = item.alias.parts[-1].lower() if item.alias else item.parts[-1].lower()
                if qualifier[-1] in (alias, item.parts[-1].lower()):
                    return item
    raise SqlError(f"LAST on {column.to_string()}: name the column's table (table.column) in a "
                   "join, or select from one table")


def conditions(statement: ast.ASTNode) -> list[Condition]:
    """The LAST conditions of a statement, in a stable order (their keys count on it)."""
    found: list[Condition] = []
    selects = [n for n in walk(statement) if isinstance(n, ast.Select) and n.where is not None]
    for select in selects:
        for node in walk(select.where):
            if isinstance(node, ast.Select):
                break  # a subquery is a select of its own, visited on its own
            if isinstance(node, ast.BinaryOperation):
                side = _last_side(node)
                if side is not None:
                    if node.op not in (">", ">="):
                        raise SqlError(f"LAST is compared with '>' or '>=' (col > LAST), not "
                                       f"{node.to_string()}")
                    column, default = side
                    found.append(Condition(node, column, _table_of(select, column), default))
    found.sort(key=lambda c: c.node.to_string())
    return found


def plain(value: Any) -> Any:
    """A value the catalog stores as JSON and SQL reads back as a constant."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalars
    if isinstance(value, (dt.datetime, dt.date)):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if hasattr(value, "isoformat"):  # pandas Timestamp
        return str(value)
    return value


def _never(node: ast.BinaryOperation) -> None:
    node.op, node.args = "=", [ast.Constant(0), ast.Constant(1)]


def apply(statement: ast.ASTNode, prefix: str, stored: dict[str, Any], max_of: MaxOf) -> dict[str, Any]:
    """Rewrite the statement's LAST conditions in place; returns the values to store after
    the run succeeds, by condition key (`prefix` + the condition's text)."""
    new: dict[str, Any] = {}
    for cond in conditions(statement):
        key = f"{prefix}:{cond.node.to_string()}"
        column = ast.Identifier(parts=list(cond.column.parts))
        probe = ast.Select(targets=[ast.Function("max", args=[ast.Identifier(parts=[cond.column.parts[-1]])],
                                                 alias=ast.Identifier("v"))],
                           from_table=ast.Identifier(parts=list(cond.table.parts)))
        hi = plain(max_of(probe))
        op = cond.node.op
        if key in stored:
            lo = stored[key]
        elif cond.default is not _UNSET:
            lo = cond.default
        else:  # the first run: remember where the column is, see no row
            new[key] = hi
            _never(cond.node)
            continue
        new[key] = lo if hi is None else hi
        if hi is None:
            _never(cond.node)
        elif lo is None:  # the table was empty when the job first ran: every row is new
            cond.node.op, cond.node.args = "<=", [column, ast.Constant(hi)]
        else:
            cond.node.op, cond.node.parentheses = "and", True
            cond.node.args = [ast.BinaryOperation(op, args=[column, ast.Constant(lo)]),
                              ast.BinaryOperation("<=", args=[ast.Identifier(parts=list(cond.column.parts)),
                                                              ast.Constant(hi)])]
    return new
