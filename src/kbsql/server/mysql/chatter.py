"""The statements a MySQL client sends about its own session, answered by the door.

Drivers and tools send these before (and between) the user's statements: `SET NAMES`,
`SET autocommit`, `SET SESSION TRANSACTION ...`, `SELECT @@version_comment LIMIT 1`,
`SELECT DATABASE()`, `SELECT @@session.auto_increment_increment AS ..., ...` (JDBC),
`SHOW VARIABLES LIKE 'sql_mode'` (SQLAlchemy), `SHOW WARNINGS`, `SHOW COLLATION`, `BEGIN`,
`COMMIT`, `ROLLBACK`. None of them is the service's business and the engine has no answer for
them; MindsDB answers them in its executor with fixed values, as here.

Statements are recognised by their leading words (and, for a SELECT, by `@@` or an
information function without a FROM), so the user's own statements go to the engine without
being parsed twice. sqlglot parses what is answered here.

Transactions: statements take effect at once (there are no transactions, as in MindsDB):
BEGIN, COMMIT and ROLLBACK answer OK and change nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlglot
from mysql_mimic.charset import CharacterSet
from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.intercept import TRANSACTION_CHARACTERISTICS, expression_to_value, setitem_kind
from sqlglot import expressions as exp

from kbsql.interface.sqltext import segments
from kbsql.server.mysql.error_codes import UNKNOWN_SYSTEM_VARIABLE
from kbsql.server.mysql.sysvars import SessionVariables

# every pattern here runs on text of up to the SQL size limit: none may backtrack more than
# linearly (no nested or adjacent quantifiers over the same characters; atomic groups)
_LEADING = re.compile(r"(?:[\s(]|/\*.*?\*/|--[^\n]*(?:\n|$)|#[^\n]*(?:\n|$))*+([A-Za-z]+)", re.DOTALL)
_TRANSACTION = re.compile(
    r"\s*+(?:BEGIN(?:\s++WORK)?|START\s++TRANSACTION(?:\s++[A-Z ,]*+)?"
    r"|COMMIT(?:\s++WORK)?(?:\s++AND\s++(?:NO\s++)?CHAIN)?(?:\s++(?:NO\s++)?RELEASE)?"
    r"|ROLLBACK(?:\s++WORK)?(?:\s++TO\s++(?:SAVEPOINT\s++)?\w++)?"
    r"|SAVEPOINT\s++\w++|RELEASE\s++SAVEPOINT\s++\w++)\s*+;?\s*+", re.IGNORECASE)
_USER_VARIABLE_SET = re.compile(r"^\s*SET\s+@[A-Za-z_`'\"]", re.IGNORECASE)
_INFO_FUNCTION = re.compile(r"\b(DATABASE|SCHEMA|USER|CURRENT_USER|SESSION_USER|SYSTEM_USER|VERSION|"
                            r"CONNECTION_ID|LAST_INSERT_ID|FOUND_ROWS|ROW_COUNT)\s*\(\s*\)", re.IGNORECASE)
_ITEM_TOKENS = re.compile(r"[(),;]|\b(?:LIMIT|FROM|WHERE|INTO)\b", re.IGNORECASE)
_FROM = re.compile(r"\bFROM\b(?!\s+DUAL\b)", re.IGNORECASE)
UTF8 = ("utf8", "utf8mb3", "utf8mb4")


def leading_word(sql: str) -> str:
    """The statement's first keyword, upper case ('' when there is none)."""
    match = _LEADING.match(sql)
    return match.group(1).upper() if match else ""


def code_text(sql: str) -> str:
    """The statement with its string literals, quoted names and comments blanked out (same
    length, so positions match the statement's)."""
    return "".join(sql[a:b] if is_code else " " * (b - a) for a, b, is_code in segments(sql))


def is_transaction(sql: str) -> bool:
    return _TRANSACTION.fullmatch(sql) is not None


def is_session_set(sql: str) -> bool:
    """A SET of system variables, names or transaction characteristics (not `SET @var`, the
    engine's own variables)."""
    return _USER_VARIABLE_SET.match(sql) is None


STATIC_MAX = 64 * 1024
"""Longest statement looked at as a client's own (theirs are short; longer ones are the
engine's, which bounds its parsing time)."""


def is_static_select(sql: str) -> bool:
    """A SELECT of `@@variables` or information functions and constants, with no table."""
    if ("@@" not in sql and "(" not in sql) or len(sql) > STATIC_MAX:
        return False
    code = code_text(sql)
    if "@@" not in code and not _INFO_FUNCTION.search(code):
        return False
    return _FROM.search(code) is None


@dataclass
class SessionFacts:
    """What the information functions report."""

    database: str
    user: str
    host: str
    connection_id: int


def _items(sql: str) -> list[str]:
    """The select list's items as written (the column labels MySQL gives them)."""
    code = code_text(sql)
    start = re.search(r"\bSELECT\b", code, re.IGNORECASE)
    if start is None:
        return []
    items, depth, begin = [], 0, start.end()
    for token in _ITEM_TOKENS.finditer(code, start.end()):
        mark = token.group()
        if mark == "(":
            depth += 1
        elif mark == ")":
            depth -= 1
        elif depth == 0 and mark == ",":
            items.append(sql[begin:token.start()])
            begin = token.end()
        elif depth == 0:  # LIMIT, FROM, WHERE, INTO or ';': the list ends
            items.append(sql[begin:token.start()])
            return [item.strip() for item in items]
    items.append(sql[begin:])
    return [item.strip() for item in items]


def _function(name: str, facts: SessionFacts, variables: SessionVariables) -> Any:
    name = name.upper()
    if name in ("DATABASE", "SCHEMA", "CURRENT_SCHEMA"):
        return facts.database
    if name in ("USER", "SESSION_USER", "SYSTEM_USER"):
        return f"{facts.user}@{facts.host}"
    if name == "CURRENT_USER":
        return f"{facts.user}@%"
    if name in ("VERSION", "CURRENT_VERSION"):
        return variables.get_variable("version")
    if name == "CONNECTION_ID":
        return facts.connection_id
    if name in ("LAST_INSERT_ID", "FOUND_ROWS"):
        return 0
    if name == "ROW_COUNT":
        return -1
    raise LookupError(name)


def _value(node: exp.Expression, facts: SessionFacts, variables: SessionVariables) -> Any:
    if isinstance(node, exp.SessionParameter):
        try:
            return variables.get_variable(node.name)
        except MysqlError:
            raise MysqlError(f"Unknown system variable '{node.name}'", UNKNOWN_SYSTEM_VARIABLE) from None
    if isinstance(node, exp.Literal):
        return expression_to_value(node)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -expression_to_value(node.this)
    if isinstance(node, exp.Anonymous) and not node.expressions:
        return _function(node.name, facts, variables)
    if isinstance(node, exp.Func) and not any(node.args.values()):
        return _function(node.sql_name(), facts, variables)
    raise LookupError(type(node).__name__)


def static_select(sql: str, facts: SessionFacts, variables: SessionVariables
                  ) -> tuple[list[str], list[list[Any]]] | None:
    """(labels, rows) of a SELECT of variables, information functions and constants, or None
    when it holds anything else (then it is the engine's)."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or any(tree.args.get(k) for k in ("joins", "where", "group",
                                                                            "having", "order", "with")):
        return None
    source = tree.args.get("from")
    if source is not None and source.this.name.upper() != "DUAL":
        return None
    written = _items(sql)
    labels, values = [], []
    for i, projection in enumerate(tree.expressions):
        node = projection.this if isinstance(projection, exp.Alias) else projection
        try:
            values.append(_value(node, facts, variables))
        except LookupError:
            return None
        if isinstance(projection, exp.Alias):
            labels.append(projection.alias)
        else:
            labels.append(written[i] if len(written) == len(tree.expressions) else projection.sql("mysql"))
    limit = tree.args.get("limit")
    count = 1
    if limit is not None:
        try:
            count = min(1, int(limit.expression.name))
        except (AttributeError, ValueError):
            return None
    return labels, [values] * count


def apply_set(sql: str, variables: SessionVariables) -> None:
    """Apply a SET of system variables, names or transaction characteristics."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.ParseError as exc:
        raise MysqlError(f"You have an error in your SQL syntax: {exc}", ErrorCode.PARSE_ERROR) from None
    if not isinstance(tree, exp.Set):
        raise MysqlError(f"This SET statement is not supported: {sql.strip()[:200]}",
                         ErrorCode.NOT_SUPPORTED_YET)
    for item in tree.expressions:
        kind = setitem_kind(item)
        if kind == "VARIABLE":
            _set_variable(item, variables)
        elif kind in ("NAMES", "CHARACTER SET"):
            _set_names(item, variables, kind)
        elif kind == "TRANSACTION":
            for characteristic in (e.name.upper() for e in item.expressions):
                name, value = TRANSACTION_CHARACTERISTICS[characteristic]
                variables.set(name, value)
        else:
            raise MysqlError(f"SET {kind} is not supported", ErrorCode.NOT_SUPPORTED_YET)


def _set_variable(item: exp.SetItem, variables: SessionVariables) -> None:
    assignment = item.this
    left = assignment.left
    name = left.name
    try:
        value = expression_to_value(assignment.right)
    except MysqlError:  # an expression (CONCAT(@@sql_mode, ...)): accepted, as MindsDB does
        if name.lower() in ("sql_select_limit", "time_zone"):
            raise
        return
    variables.set(name, value)


def _set_names(item: exp.SetItem, variables: SessionVariables, kind: str) -> None:
    charset = item.name.lower()
    if charset == "default" or not charset:
        charset = "utf8mb4"
    if charset not in UTF8:
        raise MysqlError(f"kbsql sends and reads utf8mb4 text only, not {charset}: SET NAMES utf8mb4",
                         ErrorCode.NOT_SUPPORTED_YET)
    charset = "utf8mb4" if charset != "utf8mb3" else charset
    for name in ("character_set_client", "character_set_results") + \
            (("character_set_connection",) if kind == "NAMES" else ()):
        variables.set(name, charset)
    if kind == "NAMES":
        collation = item.text("collate") or CharacterSet[charset].default_collation.name
        variables.set("collation_connection", collation)
