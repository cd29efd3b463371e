"""Which engines `CREATE DATABASE ... ENGINE = '...'` knows, and opening a stored source."""

from __future__ import annotations

from typing import Any

from kbsql.engine.catalog import DatasourceRecord
from kbsql.engine.datasources.duckdb_file import DuckdbFileSource
from kbsql.engine.datasources.files import FilesSource
from kbsql.engine.datasources.pgvector_source import PgVectorSource
from kbsql.engine.datasources.postgres import PostgresSource
from kbsql.engine.datasources.scans import DataSource
from kbsql.engine.datasources.sqlite_file import SqliteFileSource
from kbsql.interface.errors import SqlError

ENGINES: dict[str, Any] = {
    "duckdb": DuckdbFileSource,
    "sqlite": SqliteFileSource,
    "files": FilesSource,
    "postgres": PostgresSource,
    "postgresql": PostgresSource,
    "pgvector": PgVectorSource,
}


def engine_class(engine: str) -> Any:
    cls = ENGINES.get(engine.lower())
    if cls is None:
        # the reference has many more integrations (vector stores such as pgvector or
        # chromadb, mysql, ...): say in one line that this engine is not among them here
        raise SqlError(f"not supported by the local engine: the data source engine '{engine}' "
                       f"(known here: {', '.join(sorted(ENGINES))}, and 'mindsdb' for a project)")
    return cls


def normalize(engine: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Check the parameters before anything is stored (files exist, keys present)."""
    return engine_class(engine).normalize(parameters)


def open_source(record: DatasourceRecord) -> DataSource:
    return engine_class(record.engine)(record.name, f"kbsql_ds_{record.id}", record.parameters)
