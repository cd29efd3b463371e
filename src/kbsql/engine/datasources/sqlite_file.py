"""`ENGINE = 'sqlite'`: a SQLite database file, ATTACHed read-only and scanned by DuckDB.

DuckDB's sqlite scanner (loaded from its wheel, see `extensions`) reads the file itself:
only the columns a query uses are fetched, rows stream through DuckDB's vectors, and
nothing is copied into Python. The scanner opens the file at query time, so rows and tables
written by another program are seen by the next query.

A SQLite column holding a value of another type than its declared one (SQLite allows it)
is an error from the scanner, naming the column.
"""

from __future__ import annotations

from typing import Any

import duckdb

from kbsql.engine.datasources.duckdb_file import existing_file, native_scan, native_tables
from kbsql.engine.datasources.extensions import load_extension
from kbsql.engine.datasources.scans import Scan, duckdb_string_literal
from kbsql.interface.errors import SqlError


class SqliteFileSource:
    """PARAMETERS: `db_file` (or `database`): path of the SQLite file."""

    engine = "sqlite"
    read_only = True  # False only while a write runs (DuckSession.writable)

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.alias = alias
        self.path = self.normalize(parameters)["db_file"]

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        key = "db_file" if "db_file" in parameters else "database"
        path = existing_file(parameters, key, "sqlite")
        out = {k: v for k, v in parameters.items() if k != "database"}
        out["db_file"] = path
        return out

    def attach(self, con: Any) -> None:
        load_extension(con, "sqlite_scanner")
        try:
            con.execute(f"ATTACH {duckdb_string_literal(self.path)} AS \"{self.alias}\" "
                        f"(TYPE sqlite{', READ_ONLY' if self.read_only else ''})")
        except duckdb.Error as exc:
            raise SqlError(f"Cannot open SQLite file {self.path}: {exc}") from exc

    def detach(self, con: Any) -> None:
        con.execute(f"DETACH DATABASE IF EXISTS \"{self.alias}\"")

    def tables(self, con: Any) -> list[str]:
        try:
            return [t for _, t in native_tables(con, self.alias)]
        except duckdb.Error as exc:
            raise SqlError(f"Listing the tables of SQLite database {self.name} failed: {exc}") \
                from exc

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        return native_scan(con, self.alias, parts)
