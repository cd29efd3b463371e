"""MySQL's information functions, answered as MindsDB's executor answers them on every door
(sql_query/steps/subselect_step.py, whose check_fields walks the whole query): `version()` is
the MySQL version it reports, `database()` the current project, `user()`, `current_user()`,
`session_user` and `connection_id()` the session's (none here: an engine has no login and no
connection; MindsDB's unit tests read None too, and its HTTP context has no connection id).

Why: DuckDB has functions of those names. `SELECT version()` answered DuckDB's own version
('v1.5.5'), `user()` and `current_user()` 'duckdb', `database()` did not render, a bare
`session_user` was a binder error, and nested in an expression or a WHERE the same wrong
values went on silently (`concat(version(), 'x')`). The MySQL door answers a SELECT of only
these itself (server/mysql/chatter.py, with its login); anything else it sends here.

Every occurrence in the parsed statement is replaced by its value before it reaches DuckDB
(subqueries, WHERE, INSERT ... SELECT); a view's SELECT when it is read (tables/select.py),
in the view's project. A SELECT's own target keeps the function's name as its column's, as
MindsDB names it. A bare `session_user` only in a SELECT without FROM (with one it may be a
column). A statement whose text names none of them is not walked.
"""

from __future__ import annotations

import re
from typing import Any

from mindsdb_sql_parser import ast

from kbsql.interface.api import MYSQL_VERSION

_FUNCTIONS = ("version", "database", "user", "current_user", "session_user", "connection_id")
_NAMED = re.compile(r"version|database|user|connection_id", re.IGNORECASE)


def _name(node: Any, bare: bool) -> str | None:
    """The function's name when `node` is one of them (`bare`: a `session_user` identifier is
    one too), else None."""
    if isinstance(node, ast.Function) and not node.args and not node.namespace \
            and str(node.op).lower() in _FUNCTIONS:
        return str(node.op).lower()
    if bare and isinstance(node, ast.Identifier) and not node.is_quoted[-1] \
            and [str(p).lower() for p in node.parts] == ["session_user"]:
        return "session_user"
    return None


def _replaced(item: Any, values: dict[str, Any], bare: bool) -> Any:
    """`item` with every occurrence under it replaced (in place where it can be)."""
    if isinstance(item, list):
        return [_replaced(i, values, bare) for i in item]
    if isinstance(item, tuple):
        return tuple(_replaced(i, values, bare) for i in item)
    if not isinstance(item, ast.ASTNode) or type(item) is ast.Constant:  # most of a long VALUES
        return item
    name = _name(item, bare)
    if name is not None:
        value = values.get(name)
        constant = ast.NullConstant() if value is None else ast.Constant(value)
        constant.alias = item.alias
        return constant
    if isinstance(item, ast.Select):
        bare = item.from_table is None
        targets = []
        for target in item.targets or []:
            name, new = _name(target, bare), _replaced(target, values, bare)
            if name is not None and new.alias is None:
                new.alias = ast.Identifier(parts=[name])
            targets.append(new)
        item.targets = targets
    for key, value in list(vars(item).items()):
        if key not in ("parentheses", "alias") and not (key == "targets" and isinstance(item, ast.Select)):
            setattr(item, key, _replaced(value, values, bare))
    return item


def answer_information_functions(statement: ast.ASTNode, ctx: dict[str, Any],
                                 query: str | None = None) -> None:
    """Replace every occurrence in `statement` by its value, in place (`query`: its text, when
    known, to skip statements that name none of them)."""
    if query is not None and _NAMED.search(query) is None:
        return
    _replaced(statement, {"version": MYSQL_VERSION, "database": ctx.get("db")}, False)
