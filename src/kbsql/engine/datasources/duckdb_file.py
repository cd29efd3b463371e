"""`ENGINE = 'duckdb'`: a DuckDB database file, ATTACHed read-only so DuckDB scans it natively
(read-write only for the length of one write: DuckSession.writable)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbsql.engine.datasources.scans import NativeTable, Scan, duckdb_string_literal, match_name
from kbsql.interface.errors import SqlError


def existing_file(parameters: dict[str, Any], key: str, engine: str) -> str:
    """The absolute path of the file named by `parameters[key]`; an error names what is wrong."""
    value = parameters.get(key)
    if not isinstance(value, str) or not value:
        raise SqlError(f"ENGINE = '{engine}' needs PARAMETERS = {{\"{key}\": \"/path/to/file\"}}")
    path = Path(value).expanduser().resolve()
    if not path.exists():
        raise SqlError(f"The {engine} database file {value!r} does not exist")
    return str(path)


def native_tables(con: Any, catalog: str) -> list[tuple[str, str]]:
    """(schema, table) of every table and view of an attached catalog."""
    rows = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
        "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
        "WHERE database_name = ? AND NOT internal ORDER BY 1, 2", [catalog, catalog]).fetchall()
    return [(r[0], r[1]) for r in rows]


def native_scan(con: Any, catalog: str, parts: list[str]) -> Scan | None:
    """Resolve `[table]` (schema main) or `[schema, table]` against the catalog's tables."""
    schema, table = (parts[0], parts[1]) if len(parts) == 2 else ("main", parts[-1])
    known = native_tables(con, catalog)
    schemas = sorted({s for s, _ in known})
    found_schema = match_name(schema, schemas)
    if found_schema is None:
        return None
    found = match_name(table, [t for s, t in known if s == found_schema])
    return NativeTable(catalog, found_schema, found) if found else None


class DuckdbFileSource:
    """PARAMETERS: `database` (path of the .duckdb file)."""

    engine = "duckdb"
    read_only = True  # False only while a write runs (DuckSession.writable)

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.alias = alias
        self.path = existing_file(parameters, "database", self.engine)

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        return {**parameters, "database": existing_file(parameters, "database", "duckdb")}

    def attach(self, con: Any) -> None:
        mode = " (READ_ONLY)" if self.read_only else ""
        con.execute(f"ATTACH {duckdb_string_literal(self.path)} AS \"{self.alias}\"{mode}")

    def detach(self, con: Any) -> None:
        con.execute(f"DETACH DATABASE IF EXISTS \"{self.alias}\"")

    def tables(self, con: Any) -> list[str]:
        return [t if s == "main" else f"{s}.{t}" for s, t in native_tables(con, self.alias)]

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        return native_scan(con, self.alias, parts)
