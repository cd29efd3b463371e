"""What SQL tools read about the schema in MySQL's shapes that only this door answers, built
from the engine's answers: `SHOW [FULL] COLUMNS` for `Field, Type, Null, Key, Default,
Extra` in MySQL's column order, `SHOW CREATE TABLE` for a definition to parse, `SHOW TABLE
STATUS`. `information_schema` (`SCHEMATA`, `TABLES`, `COLUMNS`, ...) is the engine's
(engine/sql/databases/mysql_schema.py), the same rows on every door, as MindsDB's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from kbsql.interface.api import ServiceApi
from kbsql.interface.literals import quote_identifier, quote_literal
from kbsql.interface.mysql_charsets import CHARACTER_SETS, COLLATIONS, ENGINES
from kbsql.interface.results import ErrorResult, TableResult
from kbsql.server.mysql.local_sql import TIMEOUT_S, run_local
from kbsql.server.mysql.resultsets import Rows, arrow_rows

__all__ = ["CHARACTER_SETS", "COLLATIONS", "ENGINES"]


class Refused(LookupError):
    """The engine answered a metadata read with an SQL error (a table that does not exist):
    the door sends that answer's message with its kind's code."""

    def __init__(self, result: ErrorResult):
        super().__init__(result.error_message)
        self.result = result


class EngineCatalog:
    """The engine's databases, tables and columns, read through `ServiceApi.query` (each at
    most once per statement)."""

    def __init__(self, api: ServiceApi, db: str):
        self.api = api
        self.db = db
        self._tables: list[tuple[str, str, str]] | None = None

    def _rows(self, sql: str) -> list[list[Any]]:
        result = self.api.query(sql, {"db": self.db})
        if isinstance(result, ErrorResult):
            raise Refused(result)
        return result.data if isinstance(result, TableResult) else []

    def databases(self) -> list[tuple[str, str, str | None]]:
        """(name, type, engine) of each database: system, project or data."""
        return [(str(r[0]), str(r[1]), None if r[2] is None else str(r[2])) for r in
                self._rows("SELECT NAME, TYPE, ENGINE FROM information_schema.databases")]

    def tables_of(self, db: str) -> list[tuple[str, str]]:
        """(name, TABLE_TYPE) of one database's tables, only that one asked (SHOW FULL TABLES:
        a data source other than `db` is never reached)."""
        return [(str(r[0]), str(r[1])) for r in self._rows(f"SHOW FULL TABLES FROM {quote_identifier(db)}")]

    def jobs_of(self, project: str) -> list[str]:
        """The names of one project's jobs."""
        return [str(r[0]) for r in self._rows("SELECT NAME FROM information_schema.jobs WHERE PROJECT = "
                                              + quote_literal(project))]

    def tables(self) -> list[tuple[str, str, str]]:
        if self._tables is None:
            self._tables = [(str(r[0]), str(r[1]), str(r[2])) for r in self._rows(
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.tables")]
        return self._tables

    def columns(self, schema: str, table: str) -> list[tuple[str, str]]:
        """(name, MySQL column type) of each column, as the engine's SHOW COLUMNS answers them
        (interface/column_types.py); the engine's error when the table is unknown."""
        rows = self._rows(f"SHOW COLUMNS FROM {quote_identifier(schema)}.{quote_identifier(table)}")
        return [(str(r[0]), str(r[1])) for r in rows]

    def own_types(self, schema: str, table: str) -> dict[str, str]:
        """A data-source table's column types in the source's own words (DESCRIBE's
        ORIGINAL_TYPE): MindsDB's ORIGINAL_TYPE (`integer` beside MySQL's `int`, PostgreSQL's
        `character varying` beside `varchar`)."""
        rows = self._rows(f"DESCRIBE {quote_identifier(schema)}.{quote_identifier(table)}")
        return {str(r[0]): str(r[2] if len(r) > 2 else r[1]).lower() for r in rows}


def show_columns(api: ServiceApi, db: str, table: str, schema: str | None, full: bool) -> list[list[Any]]:
    """`SHOW [FULL] COLUMNS` rows (MySQL's and MindsDB's shape) of one table; `Refused` with
    the engine's answer when it does not exist."""
    if schema is None and "." in table and not table.startswith("`"):
        schema, table = table.split(".", 1)
    columns = EngineCatalog(api, db).columns(schema or db, table)
    if full:
        return [[name, kind, None, "YES", "", None, "", "select", ""] for name, kind in columns]
    return [[name, kind, "YES", "", None, ""] for name, kind in columns]


SHOW_COLUMNS = ["Field", "Type", "Null", "Key", "Default", "Extra"]
SHOW_FULL_COLUMNS = ["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"]
"""MySQL's own order, kept on this door (MindsDB's puts the three FULL columns last)."""


def create_table(api: ServiceApi, db: str, table: str, schema: str | None) -> str:
    """A CREATE TABLE text of a table's columns (what SQLAlchemy's reflection parses)."""
    if schema is None and "." in table:
        schema, table = table.split(".", 1)
    columns = EngineCatalog(api, db).columns(schema or db, table)
    lines = [f"  {quote_identifier(name)} {kind} DEFAULT NULL" for name, kind in columns]
    body = ",\n".join(lines)
    return f"CREATE TABLE {quote_identifier(table)} (\n{body}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


def filtered(names: list[str], rows: Iterable[Sequence[Any]], like: str | None, where: str | None,
             integers: Iterable[str] = (), timeout: float = TIMEOUT_S) -> Rows:
    """A SHOW answer with its `LIKE` (on the first column) or `WHERE` applied."""
    rows = list(rows)
    ints = set(integers)
    table = pa.table({n: pa.array([r[i] for r in rows], pa.int64() if n in ints else pa.string())
                      for i, n in enumerate(names)})
    if like is None and where is None:
        return arrow_rows(table)
    condition = f"`{names[0]}` LIKE {like}" if like is not None else where
    return arrow_rows(run_local(f"SELECT * FROM __show__ WHERE {condition}", {"__show__": table}, timeout))
