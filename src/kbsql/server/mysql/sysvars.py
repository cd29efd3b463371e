"""The MySQL system variables a connection reports (`@@name`, `SHOW VARIABLES`) and sets.

mysql-mimic's set, with the values and extras MindsDB reports over its MySQL door
(`mindsdb/api/mysql/mysql_proxy/libs/constants/mysql.py`, SERVER_VARIABLES): JDBC, ODBC and
SQLAlchemy read several of them at connect. Character sets stay utf8mb4, what is sent.

A SET of a variable nobody reads here is kept for `@@name` to read back (MindsDB answers any
SET with OK). Two are refused instead, because ignoring them would change results silently:
`sql_select_limit` (rows would not be capped) and a time zone other than UTC (timestamps are
sent in UTC).
"""

from __future__ import annotations

from typing import Any

from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.variables import DEFAULT, SYSTEM_VARIABLES, GlobalVariables, Variables, VariableSchema

from kbsql.interface.api import MYSQL_VERSION

SERVER_VERSION = MYSQL_VERSION  # what MindsDB reports; clients pick their dialect by it

SCHEMA: dict[str, VariableSchema] = {
    **SYSTEM_VARIABLES,
    "version": (str, SERVER_VERSION, False),
    "version_comment": (str, "kbsql (MindsDB-compatible)", False),
    "license": (str, "MIT", False),
    "default_storage_engine": (str, "InnoDB", True),
    "default_tmp_storage_engine": (str, "InnoDB", True),
    "sql_mode": (str, "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
                      "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION", True),
    "transaction_isolation": (str, "REPEATABLE-READ", True),
    "tx_isolation": (str, "REPEATABLE-READ", True),
    "tx_read_only": (bool, False, True),
    "query_cache_size": (int, 16777216, True),
    "query_cache_type": (str, "OFF", True),
    "have_ssl": (str, "DISABLED", False),
    "max_allowed_packet": (int, 16777216, True),
    "net_write_timeout": (int, 60, True),
    "performance_schema": (bool, False, False),
    "character_set_system": (str, "utf8mb3", False),
    "collation_database": (str, "utf8mb4_general_ci", True),
    "time_zone": (str, "UTC", True),
    "system_time_zone": (str, "UTC", False),
}
UTC_NAMES = ("utc", "+00:00", "system", "+0:00", "-00:00")


def server_variables(version: str | None) -> GlobalVariables:
    """The defaults every connection starts from; `version` is kbsql's (from `status()`)."""
    schema = dict(SCHEMA)
    if version:
        schema["version_comment"] = (str, f"kbsql {version} (MindsDB-compatible)", False)
    return GlobalVariables(schema)


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


def shown(value: Any) -> str | None:
    """A value as SHOW VARIABLES prints it (ON/OFF for booleans)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)
