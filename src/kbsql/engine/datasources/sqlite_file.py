"""`ENGINE = 'sqlite'`: a SQLite database file, read with the standard library.

DuckDB's sqlite extension cannot be installed offline, so a referenced table is read with
`sqlite3` (opened read-only) into Arrow for each query. That keeps results live and exact;
the cost is a full read of each referenced table, fine for the local-file sizes SQLite
holds in practice.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from kbsql.engine.datasources.arrow_rows import rows_to_arrow
from kbsql.engine.datasources.base import FrameScan, Scan, match_name
from kbsql.engine.datasources.duckdb_file import existing_file
from kbsql.interface.errors import SqlError


class SqliteFileSource:
    """PARAMETERS: `db_file` (or `database`): path of the SQLite file."""

    engine = "sqlite"

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.path = self.normalize(parameters)["db_file"]

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        key = "db_file" if "db_file" in parameters else "database"
        path = existing_file(parameters, key, "sqlite")
        out = {k: v for k, v in parameters.items() if k != "database"}
        out["db_file"] = path
        return out

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise SqlError(f"Cannot open SQLite file {self.path}: {exc}") from exc

    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def tables(self, con: Any = None) -> list[str]:
        with self._connect() as db:
            rows = db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                              "AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()
        return [r[0] for r in rows]

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        if len(parts) != 1:
            return None
        table = match_name(parts[0], self.tables())
        if table is None:
            return None
        quoted = '"' + table.replace('"', '""') + '"'  # a name SQLite itself listed
        db = self._connect()
        try:
            cursor = db.execute(f"SELECT * FROM {quoted}")
            names = [d[0] for d in cursor.description]
            return FrameScan(rows_to_arrow(names, cursor.fetchall()))
        except sqlite3.Error as exc:
            raise SqlError(f"Reading table {table} of SQLite database {self.name} failed: {exc}") \
                from exc
        finally:
            db.close()
