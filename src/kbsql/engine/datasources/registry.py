"""Which engines `CREATE DATABASE ... ENGINE = '...'` knows, and opening a stored source.

Besides the SQL data sources below, any storage backend (the `kbsql.storage` registry) is an
engine: `CREATE DATABASE v WITH ENGINE = '<backend>', PARAMETERS = {...}` stores its
PARAMETERS for the knowledge bases that name `storage = v.table`; as a SQL source it lists
no tables (`VectorStore`), unless it is also listed here (pgvector's tables can be read).
"""

from __future__ import annotations

from typing import Any

from kbsql.engine.catalog import DatasourceRecord
from kbsql.engine.datasources.scans import DataSource, DataSourceEngine
from kbsql.engine.knowledge.storage import ChecksParameters, StorageBackend
from kbsql.engine.models.providers import BUILTINS
from kbsql.engine.plugins import DATASOURCES, Registry
from kbsql.interface.errors import NotSupported

Engines = Registry[DataSourceEngine]


def data_source_engines() -> Engines:
    """The engines `CREATE DATABASE ... ENGINE` knows: the built-ins (`providers.BUILTINS`)
    and the `kbsql.datasources` entry points, loaded on first use."""
    return Engines("data source engine", DATASOURCES, BUILTINS[DATASOURCES])


def engine_class(engine: str, engines: Engines) -> DataSourceEngine:
    found = engines.get(engine)
    if found is None:
        # the reference has many more integrations (vector stores such as pgvector or
        # chromadb, mysql, ...): say in one line that this engine is not among them here
        raise NotSupported(f"not supported by the local engine: the data source engine '{engine}' "
                           f"(known here: {', '.join(engines.names())}, and 'mindsdb' for a project)")
    return found


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


def normalize(engine: str, parameters: dict[str, Any], engines: Engines,
              storage: Registry[StorageBackend] | None = None) -> dict[str, Any]:
    """Check the parameters before anything is stored (files exist, keys present).
    `storage`: the storage-backend registry, whose names are engines too (a backend that
    `ChecksParameters` checks their PARAMETERS)."""
    if engine not in engines and storage is not None and engine in storage:
        backend = storage.get(engine)
        if isinstance(backend, ChecksParameters):
            return dict(backend.normalize(parameters))
        return dict(parameters)
    return engine_class(engine, engines).normalize(parameters)


ATTACH_PREFIX = "kbsql_ds_"
"""How every stored source's DuckDB catalog is named (then its id): SQL that holds no such
name reads no attached source, and passes the swap gate (`SwapGate.shared_if`)."""


def open_source(record: DatasourceRecord, engines: Engines, alias: str | None = None) -> DataSource:
    """The stored source `record` (its engine was known when it was stored; a storage
    backend's name opens as a `VectorStore`)."""
    found = engines.get(record.engine) if record.engine in engines else None
    return (found or VectorStore)(record.name, alias or f"{ATTACH_PREFIX}{record.id}", record.parameters)
