"""The narrow interface between the knowledge service and where a KB's chunks live.

Storage backends are registered by name (`engine/models/providers.py` BUILTINS, entry-point group
`kbsql.storage`): `kbsql_faiss`, the local store (`LocalStorage`: SQLite rows + a FAISS
cache in the data directory, local.py / store.py / index.py), and `pgvector` (one
PostgreSQL table with pgvector, pgvector.py). A backend is an object with
`open(place) -> KbStorage`; a knowledge base names it in `storage` (`vector_database`),
directly or through a data source created with `ENGINE = '<backend>'`. Chunking,
embedding, hybrid blending and reranking stay in one place (service.py, search.py) and
reach the rows only through these methods, so neither the insert nor the search path
branches on the storage.

Rows are addressed by an integer key (`seq`) that a storage hands out and never reuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kbsql.engine.knowledge.ingest import Chunk
from kbsql.engine.knowledge.search import Conditions, SearchableStorage
from kbsql.interface.errors import ProviderError


class ChunkWriter(Protocol):
    """One open write transaction: everything written commits together, or nothing does."""

    dim: int | None
    """The vector dimension the KB holds (None before its first vector)."""

    def set_dim(self, dim: int) -> None: ...

    def replace(self, doc_ids: list[str], chunks: list[Any], vectors: np.ndarray, stamp: str) -> None:
        """Remove every chunk of `doc_ids`, then add `chunks` (with `vectors`, one per chunk)."""
        ...


class KbStorage(SearchableStorage, Protocol):
    """A KB's storage: the reads a search needs (search.SearchableStorage) and the rest."""

    def write(self) -> AbstractContextManager[ChunkWriter]: ...

    def delete(self, filters: Conditions) -> int: ...

    def count(self) -> int: ...

    def sample(self, limit: int) -> tuple[list[str], list[dict[str, Any]], np.ndarray]:
        """The first `limit` chunks (in insertion order): chunk ids, metadata, vectors."""
        ...

    def updated_at(self, chunk_ids: list[str]) -> dict[str, str]: ...

    def index_metadata(self, columns: list[str]) -> None: ...

    def create_index(self, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE: store the vector index's knobs (unknown ones are
        refused), rebuild the index with them; the settings now in force."""
        ...

    def close(self) -> None: ...

    def drop(self) -> None:
        """Remove the stored chunks for good (DROP KNOWLEDGE_BASE)."""
        ...


OPERATOR_URL = "kbsql_operator_url"
"""A StoragePlace parameter set by kbsql only (never kept from a data source's PARAMETERS):
these are the operator's own connection (the shared catalog), which may take what it leaves
out from the server's libpq environment; a data source's never does (postgres_source.py)."""
SOURCE_HOSTS = "kbsql_allowed_source_hosts"
"""A StoragePlace parameter set by kbsql only: the hosts a data source's store may connect to
(`allowed_source_hosts`; absent: anywhere)."""


@dataclass(frozen=True)
class StoragePlace:
    """Where one knowledge base's chunks live, as its storage backend is told: a directory of
    its own under the data directory (created on demand), its `vector_database_table`, the
    PARAMETERS of the data source its `storage` names (none for a backend named directly),
    and whether the engine may write."""

    directory: Path
    table: str
    parameters: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False


class StorageBackend(Protocol):
    """A registered storage backend (`kbsql.storage`); a registered class is instantiated
    once, without arguments. A backend that is also `ChecksParameters` checks a
    `CREATE DATABASE ... ENGINE = '<backend>'`'s PARAMETERS before they are stored."""

    def open(self, place: StoragePlace) -> KbStorage: ...


@runtime_checkable
class ChecksParameters(Protocol):
    """Optional, for a storage backend: the PARAMETERS of a data source created with its name
    as ENGINE, checked (and normalised: defaults filled, types fixed) before they are stored;
    a `BadRequest` says what is wrong. A backend without it has its PARAMETERS stored as given."""

    def normalize(self, parameters: dict[str, Any]) -> dict[str, Any]: ...



@dataclass(frozen=True)
class ChunkBatch:
    """Chunks as stored, in insertion order, with one `updated_at` stamp for the batch:
    `chunks` are (doc_id, chunk_id, content, metadata) records (`ChunkWriter.replace` takes
    the same), `vectors` one float32 row per chunk."""

    stamp: str
    chunks: list[Any]
    vectors: np.ndarray


@runtime_checkable
class ExportsChunks(Protocol):
    """Optional, for a `KbStorage`: every chunk with its vector, for `kbsql migrate`, which
    copies one knowledge base's chunks into another storage and verifies the copy through
    these two methods and the search reads (never through the storage's own tables).
    Both built-in storages have it; a plugin storage without it is left in place by
    migrate, as a pgvector knowledge base is."""

    def export(self, batch: int) -> Iterator[ChunkBatch]:
        """All chunks in insertion order, at most `batch` a time, a batch never spanning two
        stamps (so a copy keeps each chunk's `updated_at`)."""
        ...

    def chunks_by_id(self, chunk_ids: list[str]) -> dict[str, tuple[str, str, dict[str, Any], np.ndarray]]:
        """chunk_id -> (doc_id, content, metadata, vector) for those of `chunk_ids` stored."""
        ...


@runtime_checkable
class StreamsChunks(Protocol):
    """Optional, for a `KbStorage`: the chunks matching filters in batches, for a query that
    reads them all (count, GROUP BY, DISTINCT, a join: sql/kb/kb_stream), which then holds
    one batch of Python rows at a time. Both built-in storages have it; without it such a
    query reads the rows whole (`plain_rows`)."""

    def plain_batches(self, filters: Conditions, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """(id, chunk_id, content, metadata as JSON text) of the matching chunks in insertion
        order, `size` at a time, from one committed state; a new read at every call."""
        ...


@runtime_checkable
class CountsChunks(Protocol):
    """Optional, for a `KbStorage`: how many chunks match filters, without reading them, for a
    query that names no column of them (`SELECT count(*) FROM kb [WHERE <metadata>]`). Both
    built-in storages have it; without it the count reads every matching chunk."""

    def count_matching(self, filters: Conditions) -> int:
        """The number of chunks matching `filters` (all of them for none), in one committed
        state, under the statement's deadline."""
        ...


@runtime_checkable
class KnowsKeys(Protocol):
    """Optional, for a `KbStorage`: whether any chunk's metadata holds a key, for a knowledge
    base without declared metadata columns, whose filters may name any key its rows hold:
    a key no row holds is an unknown column (MindsDB's `inserted_metadata` check), not a
    filter matching nothing. Both built-in storages have it; without it any name filters."""

    def has_metadata_key(self, key: str) -> bool:
        """Whether some chunk's metadata has `key` (its value may be null), as written."""
        ...


def check_query_dim(held: int | None, query: np.ndarray) -> None:
    """A search's vector must be as long as the stored ones (`held`; None: no row yet). It is
    not when the knowledge base's model, or the default_embedding_model it embeds with, was
    changed after its rows were stored; FAISS then failed with a bare AssertionError."""
    if held is not None and query.shape[-1] != held:
        raise ProviderError(f"The embedding model returned {query.shape[-1]}-d vectors for the search; this "
                            f"knowledge base holds {held}-d (was its embedding model, or the "
                            f"default_embedding_model it uses, changed since its rows were inserted?)")


def stamped_batches(rows: list[tuple[Any, ...]], vector: Callable[[Any], np.ndarray]) -> Iterator[ChunkBatch]:
    """(doc_id, chunk_id, content, metadata, stored vector, updated_at) rows in order, as
    batches of one stamp each (`ExportsChunks.export`; `vector` decodes a stored vector)."""
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][5] != rows[start][5]:
            part = rows[start:i]
            yield ChunkBatch(part[0][5], [Chunk(*r[:4]) for r in part],
                             np.stack([vector(r[4]) for r in part]))
            start = i
