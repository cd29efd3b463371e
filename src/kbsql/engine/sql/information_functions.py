"""MySQL's information functions in a SELECT's targets, answered as MindsDB's executor
answers them on every door (sql_query/steps/subselect_step.py): `version()` is the MySQL
version it reports, `database()` the current project, `user()`, `current_user()` and
`session_user` the session's user (none here: an engine has no login; MindsDB's unit tests
read None too).

Why: DuckDB has functions of those names. `SELECT version()` answered DuckDB's own version
('v1.5.5'), `user()` and `current_user()` 'duckdb', `database()` did not render, and a bare
`session_user` was a binder error. The MySQL door answers these itself (server/mysql/chatter.py,
with its login). Only a SELECT's own targets are looked at (not inside other expressions),
so other statements cost nothing; a bare `session_user` only without FROM (with one it may be
a column).
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast

from kbsql.interface.api import MYSQL_VERSION

_FUNCTIONS = ("version", "database", "user", "current_user", "session_user")


def _answer(target: Any, ctx: dict[str, Any], tables: bool) -> tuple[str, Any] | None:
    """(the column's name, the value) when `target` is one of the functions, else None."""
    if isinstance(target, ast.Function) and not target.args and str(target.op).lower() in _FUNCTIONS:
        name = str(target.op).lower()
    elif not tables and isinstance(target, ast.Identifier) and not target.is_quoted[-1] \
            and [str(p).lower() for p in target.parts] == ["session_user"]:
        name = "session_user"
    else:
        return None
    return name, {"version": MYSQL_VERSION, "database": ctx.get("db")}.get(name)


def answer_information_functions(statement: ast.ASTNode, ctx: dict[str, Any]) -> None:
    """Replace those targets of a SELECT by their values, in place (named as MindsDB names
    them: the function's name, unless the statement gives an alias)."""
    if not isinstance(statement, ast.Select):
        return
    for i, target in enumerate(statement.targets or []):
        found = _answer(target, ctx, statement.from_table is not None)
        if found is not None:
            name, value = found
            alias = target.alias or ast.Identifier(parts=[name])
            constant = ast.NullConstant() if value is None else ast.Constant(value)
            constant.alias = alias
            statement.targets[i] = constant
