"""The MySQL system variables a connection reports (`@@name`, `SHOW VARIABLES`) and sets.

The defaults are the table the engine answers `@@name` from too (interface/system_variables.py);
here each connection keeps its own values over them, as mysql-mimic's session variables.
Character sets stay utf8mb4, what is sent.

A SET of a variable nobody reads here is kept for `@@name` to read back (MindsDB answers any
SET with OK). Two are refused instead, because ignoring them would change results silently:
`sql_select_limit` (rows would not be capped) and a time zone other than UTC (timestamps are
sent in UTC).
"""

from __future__ import annotations

from typing import Any

from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.variables import DEFAULT, GlobalVariables, Variables, VariableSchema

from kbsql.interface.system_variables import defaults

UTC_NAMES = ("utc", "+00:00", "system", "+0:00", "-00:00")


def server_variables(version: str | None) -> GlobalVariables:
    """The defaults every connection starts from; `version` is kbsql's (from `status()`)."""
    return GlobalVariables(defaults(version))


class SessionVariables(Variables):
    """One connection's variables over the shared defaults; unknown names a client SETs are
    kept as given (MindsDB's leniency), unknown names it reads are MySQL's error 1193."""

    def __init__(self, global_variables: GlobalVariables | None = None):
        self.global_variables = global_variables or server_variables(None)
        self.extra: dict[str, Any] = {}
        super().__init__()

    @property
    def schema(self) -> dict[str, VariableSchema]:
        return self.global_variables.schema

    def set(self, name: str, value: Any, force: bool = False) -> None:
        name = name.lower()
        if name == "sql_select_limit" and value not in (None, DEFAULT) and \
                str(value).upper() not in ("DEFAULT", "18446744073709551615"):
            raise MysqlError("SET sql_select_limit is not supported by kbsql: put a LIMIT in the statement",
                             ErrorCode.NOT_SUPPORTED_YET)
        if name == "time_zone" and value not in (None, DEFAULT) and str(value).lower() not in UTC_NAMES:
            raise MysqlError(f"SET time_zone = {value!r} is not supported by kbsql: timestamps are "
                             "sent in UTC", ErrorCode.NOT_SUPPORTED_YET)
        if name not in self.schema:
            self.extra[name] = None if value is DEFAULT else value
            return
        if value is not DEFAULT and value is not None and self.schema[name][0] is bool:
            value = _boolean(value)
        super().set(name, value, force=force)

    def get_variable(self, name: str) -> Any:
        name = name.lower()
        if name in self.extra:
            return self.extra[name]
        return super().get_variable(name)

    def list(self) -> list[tuple[str, Any]]:
        return sorted([*super().list(), *self.extra.items()])


def _boolean(value: Any) -> bool:
    text = str(value).strip().upper()
    if text in ("1", "ON", "TRUE"):
        return True
    if text in ("0", "OFF", "FALSE"):
        return False
    raise MysqlError(f"Variable can't be set to the value of '{value}'", ErrorCode.WRONG_VALUE_FOR_VAR)

