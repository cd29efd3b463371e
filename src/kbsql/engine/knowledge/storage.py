"""The narrow interface between the knowledge service and where a KB's chunks live.

Two storages implement it: `LocalStorage` (SQLite rows + a FAISS cache in the data
directory, store.py / index.py) and `PgVectorStorage` (one PostgreSQL table with pgvector,
pgvector.py). Chunking, embedding, hybrid blending and reranking stay in one place
(service.py, search.py) and reach the rows only through these methods, so neither the
insert nor the search path branches on the storage.

Rows are addressed by an integer key (`seq`) that a storage hands out and never reuses.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from kbsql.engine.knowledge.search import Conditions, SearchableStorage


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

