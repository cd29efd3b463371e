"""The local storage of a knowledge base: SQLite rows (store.py) + a FAISS cache (index.py),
in `data_dir/knowledge_bases/<kb id>/`, behind the `KbStorage` interface (storage.py)."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.knowledge import search as search_mod
from kbsql.engine.knowledge.index import VectorIndex
from kbsql.engine.knowledge.search import Conditions
from kbsql.engine.knowledge.settings import IndexSettings
from kbsql.engine.knowledge.store import ChunkStore
from kbsql.engine.sqlite_files import ReadOnlyData

log = logging.getLogger(__name__)


class _Writer:
    def __init__(self, db: Any, dim: int | None):
        self.db, self.dim = db, dim

    def set_dim(self, dim: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dim', ?)", (dim,))
        self.dim = dim

    def replace(self, doc_ids: list[str], chunks: list[Any], vectors: np.ndarray, stamp: str) -> None:
        self.db.executemany("DELETE FROM chunks WHERE id = ?", [(d,) for d in doc_ids])
        self.db.executemany(
            "INSERT INTO chunks (id, chunk_id, content, metadata, embedding, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(c.doc_id, c.chunk_id, c.content, json.dumps(c.metadata, default=str),
              vectors[i].tobytes(), stamp) for i, c in enumerate(chunks)])


class LocalStorage:
    def __init__(self, directory: Path, read_only: bool = False):
        self.directory = directory
        self.read_only = read_only
        self.store = ChunkStore(directory / "chunks.sqlite", read_only=read_only)
        self.index = VectorIndex(directory / "index.faiss", self.store)

    @contextmanager
    def write(self) -> Iterator[_Writer]:
        with self.store.write() as db:
            yield _Writer(db, self.store.dim())
        self._catch_up()

    def _catch_up(self) -> None:
        """Bring the index up to the rows just committed. The write has succeeded whatever
        happens here: a failure is logged and the index dropped, so the next search
        rebuilds it from the rows instead of answering from a half-updated cache."""
        try:
            self.index.sync()
        except Exception as exc:
            log.warning("updating the vector index %s after a committed write failed (%s); "
                        "it is rebuilt on the next search", self.index.path, exc)
            self.index.reset()

    def delete(self, filters: Conditions) -> int:
        where, args = search_mod.filter_sql(filters)
        with self.write() as w:
            return w.db.execute("DELETE FROM chunks" + (f" WHERE {where}" if where else ""), args).rowcount

    def index_metadata(self, columns: list[str]) -> None:
        self.store.index_metadata(columns)

    def sync(self) -> None:
        self.index.sync()

    def count(self) -> int:
        return self.store.count()

    def sample(self, limit: int) -> tuple[list[str], list[dict[str, Any]], np.ndarray]:
        dim = self.store.dim()
        rows = self.store.query("SELECT chunk_id, metadata, embedding FROM chunks ORDER BY seq LIMIT ?",
                                (int(limit),)) if dim else []
        vectors = (np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(-1, dim or 0)
                   if rows else np.zeros((0, dim or 0), np.float32))
        return [r[0] for r in rows], [json.loads(r[1]) for r in rows], vectors

    def plain_rows(self, filters: Conditions, limit: int | None, offset: int = 0) -> list[list[Any]]:
        return search_mod.plain_rows(self.store, filters, limit, offset)

    def vector_top(self, query: np.ndarray, k: int, filters: Conditions) -> tuple[np.ndarray, np.ndarray]:
        return search_mod.vector_top(self.store, self.index, query, k, filters)

    def keyword_top(self, text: str, k: int, filters: Conditions) -> dict[int, float]:
        return search_mod.keyword_top(self.store, text, k, filters)

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]:
        return search_mod.similarities(self.store, query, keys)

    def load_rows(self, keys: list[int]) -> dict[int, tuple[Any, ...]]:
        return search_mod.load_rows(self.store, keys)

    def create_index(self, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE: store the index settings (settings.py; over the
        defaults: none given = the defaults) and rebuild the index with them now."""
        if self.read_only:
            raise ReadOnlyData()
        settings = IndexSettings.from_params(params)
        with self.index.lock:
            settings.save(self.index.path.with_name("index_settings.json"))
            self.index.settings = settings
            self.index.rebuild()
        return settings.as_dict()

    def updated_at(self, chunk_ids: list[str]) -> dict[str, str]:
        if not chunk_ids:
            return {}
        rows = self.store.query(f"SELECT chunk_id, updated_at FROM chunks WHERE chunk_id IN "
                                f"({','.join('?' * len(chunk_ids))})", chunk_ids)
        return {r[0]: r[1] for r in rows}

    def close(self) -> None:
        try:
            if not self.read_only:
                self.index.try_save()
        finally:
            self.store.close()

    def drop(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)
