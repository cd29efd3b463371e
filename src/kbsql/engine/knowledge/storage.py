"""The narrow interface between the knowledge service and where a KB's chunks live.

Two storages implement it: `LocalStorage` (SQLite rows + a FAISS cache in the data
directory, store.py / index.py) and `PgVectorStorage` (one PostgreSQL table with pgvector,
pgvector.py). Chunking, embedding, hybrid blending and reranking stay in one place
(service.py, search.py) and reach the rows only through these methods, so neither the
insert nor the search path branches on the storage.

Rows are addressed by an integer key (`seq`) that a storage hands out and never reuses.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from kbsql.engine.knowledge.search import Filter


class ChunkWriter(Protocol):
    """One open write transaction: everything written commits together, or nothing does."""

    dim: int | None
    """The vector dimension the KB holds (None before its first vector)."""

    def set_dim(self, dim: int) -> None: ...

    def replace(self, doc_ids: list[str], chunks: list[Any], vectors: np.ndarray, stamp: str) -> None:
        """Remove every chunk of `doc_ids`, then add `chunks` (with `vectors`, one per chunk)."""
        ...


class KbStorage(Protocol):
    def write(self) -> AbstractContextManager[ChunkWriter]: ...

    def delete(self, filters: list[Filter]) -> int: ...

    def sync(self) -> None:
        """Catch up any derived index before a search (a no-op where there is none)."""
        ...

    def count(self) -> int: ...

    def plain_rows(self, filters: list[Filter], limit: int | None, offset: int = 0) -> list[list[Any]]: ...

    def vector_top(self, query: np.ndarray, k: int, filters: list[Filter]) -> tuple[np.ndarray, np.ndarray]:
        """(cosine similarities, keys) of the true top-k rows matching `filters`, best first."""
        ...

    def keyword_top(self, text: str, k: int, filters: list[Filter]) -> dict[int, float]:
        """key -> full-text score scaled to [0, 1] by the best, for rows matching `filters`."""
        ...

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]: ...

    def load_rows(self, keys: list[int]) -> dict[int, tuple[Any, ...]]:
        """key -> (id, chunk_id, content, metadata dict or JSON text)."""
        ...

    def updated_at(self, chunk_ids: list[str]) -> dict[str, str]: ...

    def index_metadata(self, columns: list[str]) -> None: ...

    def close(self) -> None: ...

    def drop(self) -> None:
        """Remove the stored chunks for good (DROP KNOWLEDGE_BASE)."""
        ...


def batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
