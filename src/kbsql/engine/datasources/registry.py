"""Which engines `CREATE DATABASE ... ENGINE = '...'` knows, and opening a stored source.

Besides the SQL data sources below, any storage backend (the `kbsql.storage` registry) is an
engine: `CREATE DATABASE v WITH ENGINE = '<backend>', PARAMETERS = {...}` stores its
PARAMETERS for the knowledge bases that name `storage = v.table`; as a SQL source it lists
no tables (`VectorStore`), unless it is also listed here (pgvector's tables can be read).
"""

from __future__ import annotations

from typing import Any

from kbsql.engine.catalog import DatasourceRecord
from kbsql.engine.datasources.duckdb_file import DuckdbFileSource
from kbsql.engine.datasources.files import FilesSource
from kbsql.engine.datasources.pgvector_source import PgVectorSource
from kbsql.engine.datasources.postgres import PostgresSource
from kbsql.engine.datasources.scans import DataSource
from kbsql.engine.datasources.sqlite_file import SqliteFileSource
from kbsql.engine.plugins import Registry
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


class VectorStore:
    """A data source whose engine only stores knowledge bases: no tables to read."""

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name, self.parameters = name, parameters
        self.engine = "vector store"

    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def tables(self, con: Any) -> list[str]:
        return []

    def scan(self, con: Any, parts: list[str]) -> None:
        return None


def normalize(engine: str, parameters: dict[str, Any],
              storage: Registry[Any] | None = None) -> dict[str, Any]:
    """Check the parameters before anything is stored (files exist, keys present).
    `storage`: the storage-backend registry, whose names are engines too (a backend's own
    `normalize`, when it has one, checks their PARAMETERS)."""
    if engine.lower() not in ENGINES and storage is not None and engine in storage:
        backend = storage.get(engine)
        check = getattr(backend, "normalize", None)
        return dict(check(parameters)) if callable(check) else dict(parameters)
    return engine_class(engine).normalize(parameters)


def open_source(record: DatasourceRecord) -> DataSource:
    cls = ENGINES.get(record.engine.lower(), VectorStore)  # stored: its engine was known then
    return cls(record.name, f"kbsql_ds_{record.id}", record.parameters)
