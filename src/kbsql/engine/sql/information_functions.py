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

MySQL system variables (`@@name`, `@@session.name`) are read the same way, from the table the
MySQL door starts its connections from (interface/system_variables.py) with the session's own
values over it (`ctx["system_variables"]`, which the MySQL door sends with a statement naming
one); their column is `@@name` as written, as MindsDB names it; an unknown one is MySQL's
"Unknown system variable". The engine keeps no session of its own, so a statement reading
one is not cached (tables/plans.py) and SET of one is refused (parse/variables.py). Likewise
the MySQL door sends its connection's login (`ctx["login"]`: user, current_user,
session_user, connection_id, as it answers them itself) with a statement naming one, so
nested ones answer what the door's own `SELECT USER()` answers.
"""

from __future__ import annotations

import re
from typing import Any

from mindsdb_sql_parser import ast

from kbsql._version import __version__
from kbsql.interface.api import MYSQL_VERSION
from kbsql.interface.errors import SqlError
from kbsql.interface.system_variables import defaults

_FUNCTIONS = ("version", "database", "user", "current_user", "session_user", "connection_id")
_NAMED = re.compile(r"version|database|user|connection_id|@@", re.IGNORECASE)
_SCOPES = ("session", "global", "local")
_LOGIN = ("user", "current_user", "session_user", "connection_id")
_DEFAULTS = {name: row[1] for name, row in defaults(__version__).items()}


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
    if isinstance(item, ast.Variable) and item.is_system_var:
        return _system_variable(item, values)
    name = _name(item, bare)
    if name is not None:
        values["read_login"] = values.get("read_login") or name in _LOGIN
        value = values.get(name)
        constant = ast.NullConstant() if value is None else ast.Constant(value)
        constant.alias = item.alias
        return constant
    if isinstance(item, ast.Select):
        bare = item.from_table is None
        targets = []
        for target in item.targets or []:
            name, new = _name(target, bare), _replaced(target, values, bare)
            if isinstance(target, ast.Variable) and target.is_system_var:
                name = f"@@{target.value}"
            if name is not None and new.alias is None:
                new.alias = ast.Identifier(parts=[name])
            targets.append(new)
        item.targets = targets
    for key, value in list(vars(item).items()):
        if key not in ("parentheses", "alias") and not (key == "targets" and isinstance(item, ast.Select)):
            setattr(item, key, _replaced(value, values, bare))
    return item


def system_variables(ctx: dict[str, Any]) -> dict[str, Any]:
    """The session's system variables: the defaults, with the MySQL door's connection's own
    values over them (`ctx["system_variables"]`)."""
    own = ctx.get("system_variables")
    return {**_DEFAULTS, **({str(k).lower(): v for k, v in own.items()} if isinstance(own, dict) else {})}


def _system_variable(node: ast.Variable, values: dict[str, Any]) -> ast.ASTNode:
    parts = str(node.value).lower().split(".")
    name = parts[-1] if len(parts) == 2 and parts[0] in _SCOPES else ".".join(parts)
    system = values["system_variables"]
    if name not in system:
        raise SqlError(f"Unknown system variable '{name}'")
    values["read_system_variable"] = True
    constant = ast.NullConstant() if system[name] is None else ast.Constant(system[name])
    constant.alias = node.alias
    return constant


def answer_information_functions(statement: ast.ASTNode, ctx: dict[str, Any],
                                 query: str | None = None) -> bool:
    """Replace every occurrence in `statement` by its value, in place (`query`: its text, when
    known, to skip statements that name none of them). True when it read a system variable
    (then the answer is the session's, not to be cached by its text)."""
    if query is not None and _NAMED.search(query) is None:
        return False
    values = {"version": MYSQL_VERSION, "database": ctx.get("db"), "system_variables": system_variables(ctx)}
    login = ctx.get("login")
    if isinstance(login, dict):  # the MySQL door's connection: its user and id, not cacheable
        values |= {name: login.get(name) for name in _LOGIN}
    _replaced(statement, values, False)
    return bool(values.get("read_system_variable") or (isinstance(login, dict) and values.get("read_login")))
