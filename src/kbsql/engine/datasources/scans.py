"""What a data source gives the SQL engine: table names, and a way to scan one table.

A source answers a table reference with one of three *scans*, and the SQL side turns it
into a DuckDB FROM item. Keeping the answer a plain dataclass (not DuckDB SQL text) means
no source ever builds SQL out of user text: names are validated against the source's own
list of tables, and the SQL side quotes whatever it renders.

- `NativeTable`: a table DuckDB reads itself (an ATTACHed database file).
- `FileScan`: a file DuckDB reads with one of its readers (`read_csv_auto`, ...); also the
  engine's own stored tables (registered frames, uploaded files: Parquet in the data
  directory), which DuckDB then reads from disk, so no table is held in memory between
  statements however many are stored.
- `FrameScan`: rows already in Python (Arrow or pandas), registered in DuckDB for the
  query; `cache_key` lets the session keep one registration while the rows do not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kbsql.interface.secrets import MASK, mask_connection_string, mask_secrets  # noqa: F401 (re-exported)


@dataclass(frozen=True)
class NativeTable:
    catalog: str
    schema: str
    table: str


@dataclass(frozen=True)
class FileScan:
    reader: str  # read_csv_auto | read_parquet | read_json_auto
    path: str
    stored: bool = False
    """The engine's own file (a stored table's Parquet): read without the path policy, which
    refuses the data directory to every path SQL names."""
    version: int = 0
    """A stored file's identity (its inode and `st_mtime_ns`): a plan compiled against it is
    compiled again once the file is replaced (plans.PlanCache compares scans)."""


@dataclass(frozen=True)
class FrameScan:
    frame: Any  # pyarrow.Table or pandas.DataFrame
    cache_key: tuple[Any, ...] | None = None


Scan = NativeTable | FileScan | FrameScan


class DataSource(Protocol):
    """One connected data source. `attach` runs once per DuckDB connection (under its lock)."""

    name: str
    engine: str

    def attach(self, con: Any) -> None: ...

    def detach(self, con: Any) -> None: ...

    def tables(self, con: Any) -> list[str]: ...

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        """The scan of table `parts` (`[table]` or `[schema, table]`), None if it does not exist."""
        ...


class DataSourceEngine(Protocol):
    """A data-source engine (`CREATE DATABASE ... ENGINE = '<name>'`), registered in the
    `kbsql.datasources` entry-point group: usually a class. `normalize` checks a new source's
    PARAMETERS before they are stored (a `BadRequest`/`SqlError` says what is wrong); calling
    it opens a stored source as `name`, attached in DuckDB as `alias`."""

    def __call__(self, name: str, alias: str, parameters: dict[str, Any]) -> DataSource: ...

    def normalize(self, parameters: dict[str, Any]) -> dict[str, Any]: ...


def match_name(name: str, names: list[str]) -> str | None:
    """The entry of `names` equal to `name`, case-insensitively (SQL identifiers are)."""
    if name in names:
        return name
    lowered = name.lower()
    for candidate in names:
        if candidate.lower() == lowered:
            return candidate
    return None


def duckdb_string_literal(text: str) -> str:
    """A string literal for the engine's own DuckDB statements (ATTACH paths and options,
    CREATE SECRET values, LOAD): standard SQL, where only `'` is doubled and a backslash is an
    ordinary character. Not for the reference dialect, whose lexer reads backslash escapes:
    SQL a user or an agent sends is quoted by `kbsql.interface.literals.quote_literal`."""
    return "'" + text.replace("'", "''") + "'"
