"""The MySQL system variables kbsql reports (`@@name`, `SHOW VARIABLES`) and their defaults,
in one table both doors read: the MySQL door's connections start from it (server/mysql/
sysvars.py, over mysql-mimic's session variables) and the engine answers reads of them from
it on HTTP and embedded (engine/sql/information_functions.py), as MindsDB answers them on
every door (its SERVER_VARIABLES, mysql_proxy/libs/constants/mysql.py).

Why here: the engine may not import mysql-mimic, and two tables would drift apart. The rows
are mysql-mimic's own set (its SYSTEM_VARIABLES, copied so the engine needs no mysql-mimic)
with the values and extras MindsDB reports: JDBC, ODBC and SQLAlchemy read several at
connect. Each row is (type, default, settable), mysql-mimic's VariableSchema.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kbsql.interface.api import MYSQL_VERSION

SQL_MODE = ("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
            "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")

DEFAULTS: Mapping[str, tuple[type, Any, bool]] = MappingProxyType({
    "auto_increment_increment": (int, 1, True),
    "autocommit": (bool, True, True),
    "character_set_client": (str, "utf8mb4", True),
    "character_set_connection": (str, "utf8mb4", True),
    "character_set_database": (str, "utf8mb4", True),
    "character_set_results": (str, "utf8mb4", True),
    "character_set_server": (str, "utf8mb4", True),
    "collation_connection": (str, "utf8mb4_general_ci", True),
    "collation_database": (str, "utf8mb4_general_ci", True),
    "collation_server": (str, "utf8mb4_general_ci", True),
    "external_user": (str, "", False),
    "init_connect": (str, "", True),
    "interactive_timeout": (int, 28800, True),
    "license": (str, "MIT", False),
    "lower_case_table_names": (int, 0, True),
    "max_allowed_packet": (int, 16777216, True),
    "max_execution_time": (int, 0, True),
    "net_buffer_length": (int, 16384, True),
    "net_write_timeout": (int, 60, True),
    "performance_schema": (bool, False, False),
    "sql_auto_is_null": (bool, False, True),
    "sql_mode": (str, SQL_MODE, True),
    "sql_select_limit": (int, None, True),
    "system_time_zone": (str, "UTC", False),
    "time_zone": (str, "UTC", True),
    "transaction_read_only": (bool, False, True),
    "transaction_isolation": (str, "REPEATABLE-READ", True),
    "version": (str, MYSQL_VERSION, False),
    "version_comment": (str, "kbsql (MindsDB-compatible)", False),
    "wait_timeout": (int, 28800, True),
    "event_scheduler": (str, "OFF", True),
    "default_storage_engine": (str, "InnoDB", True),
    "default_tmp_storage_engine": (str, "InnoDB", True),
    "tx_isolation": (str, "REPEATABLE-READ", True),
    "tx_read_only": (bool, False, True),
    "query_cache_size": (int, 16777216, True),
    "query_cache_type": (str, "OFF", True),
    "have_ssl": (str, "DISABLED", False),
    "character_set_system": (str, "utf8mb3", False),
})
"""Read only: every connection and the engine share it (a connection's SET is its own)."""


def defaults(version: str | None) -> dict[str, tuple[type, Any, bool]]:
    """The table with kbsql's own `version` (the package's) in `@@version_comment`."""
    table = dict(DEFAULTS)
    if version:
        table["version_comment"] = (str, f"kbsql {version} (MindsDB-compatible)", False)
    return table


def shown(value: Any) -> str | None:
    """A value as SHOW VARIABLES prints it (ON/OFF for booleans)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)
