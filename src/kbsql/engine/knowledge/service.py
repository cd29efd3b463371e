"""The knowledge service: the engine's one door to knowledge-base data.

Per knowledge base a directory `data_dir/knowledge_bases/<kb id>/` holds `chunks.sqlite`
(the rows, the source of truth; see store.py) and `index.faiss` (a cache; see index.py).
One `insert` call is one SQLite transaction: embeddings are computed batch by batch inside
it (memory stays flat for 100k rows) and a failure or a kill anywhere leaves the state
before the call. The index catches up after the commit, and on every search.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.catalog import KbRecord, ReadOnlyData, now
from kbsql.engine.config import EngineConfig
from kbsql.engine.knowledge import search as search_mod
from kbsql.engine.knowledge.embeddings import embedder_for
from kbsql.engine.knowledge.index import VectorIndex
from kbsql.engine.knowledge.ingest import RowChunker, check_metadata_columns, iter_batches
from kbsql.engine.knowledge.rerank import Reranker
from kbsql.engine.knowledge.search import Filter, SearchRequest
from kbsql.engine.knowledge.settings import IndexSettings
from kbsql.engine.knowledge.store import ChunkStore
from kbsql.interface.errors import BadRequest, ProviderError

ROW_BATCH = 256
PROGRESS_MIN_ROWS = 1000
log = logging.getLogger(__name__)


@dataclass
class KbHandle:
    store: ChunkStore
    index: VectorIndex


class KnowledgeService:
    def __init__(self, data_dir: Path, config: EngineConfig):
        self.root = data_dir / "knowledge_bases"
        self.config = config
        self._handles: dict[int, KbHandle] = {}
        self._lock = threading.Lock()

    # files ------------------------------------------------------------------------------
    def storage_dir(self, record: KbRecord) -> Path:
        return self.root / str(record.id)

    def handle(self, record: KbRecord) -> KbHandle:
        with self._lock:
            h = self._handles.get(record.id)
            if h is None:
                directory = self.storage_dir(record)
                store = ChunkStore(directory / "chunks.sqlite", read_only=self.config.read_only)
                h = KbHandle(store, VectorIndex(directory / "index.faiss", store))
                store.index_metadata(record.spec.get("metadata_columns") or [])
                self._handles[record.id] = h
            return h

    def create_storage(self, record: KbRecord) -> None:
        self.handle(record)

    def spec_changed(self, record: KbRecord) -> None:
        """After ALTER KNOWLEDGE_BASE: index newly declared metadata columns."""
        self.handle(record).store.index_metadata(record.spec.get("metadata_columns") or [])

    def drop_storage(self, record: KbRecord) -> None:
        with self._lock:
            h = self._handles.pop(record.id, None)
        if h is not None:
            h.store.close()
        shutil.rmtree(self.storage_dir(record), ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for h in handles:
            try:
                if not self.config.read_only:
                    h.index.try_save()
            finally:
                h.store.close()

    # models -----------------------------------------------------------------------------
    def embedder(self, spec: dict[str, Any]) -> Any:
        return embedder_for(spec.get("embedding_model"), self.config.default_embedding_model)

    def reranker(self, spec: dict[str, Any]) -> Reranker | None:
        descriptor = spec.get("reranking_model")
        return Reranker(descriptor) if descriptor else None

    def check_models(self, spec: dict[str, Any]) -> None:
        """Check a spec can work before it is stored (CREATE and ALTER both call this).

        First the cheap checks (BadRequest): declared metadata columns must not be named like
        an internal metadata key. Then ProviderError when the embedding or reranking model
        cannot be reached: one real call for remote providers (as the reference does); the
        local model is only checked to be installed (loading it costs a second)."""
        check_metadata_columns(spec.get("metadata_columns"))
        self.embedder(spec).check()
        reranker = self.reranker(spec)
        if reranker is not None:
            reranker.check()

    # writes -----------------------------------------------------------------------------
    def insert(self, record: KbRecord, rows: Any, progress: bool | None = None) -> int:
        """Insert rows (list of dicts or a DataFrame) atomically; returns the rows stored.
        Re-inserted ids replace their document's chunks (upsert). Rows whose content
        columns are all null/NaN/blank are skipped (logged; the client warns): they leave any stored
        document of their id untouched and are not counted."""
        if not hasattr(rows, "__len__"):  # a generator of dicts
            rows = list(rows)
        total = len(rows)
        if total == 0:
            return 0
        h = self.handle(record)
        embedder = self.embedder(record.spec)
        chunker = RowChunker(record.spec)
        bar = None
        if progress or (progress is None and total >= PROGRESS_MIN_ROWS):
            from tqdm.auto import tqdm

            bar = tqdm(total=total, desc=f"insert into {record.name}", unit="row")
        stamp = now()
        position = skipped = 0
        try:
            with h.store.write() as db:
                dim = h.store.dim()
                for batch in iter_batches(rows, ROW_BATCH):
                    docs: dict[str, list[Any]] = {}
                    for row in batch:
                        made = chunker.chunks(row, position)
                        position += 1
                        if made is None:
                            skipped += 1
                            continue
                        docs[made[0]] = made[1]  # a repeated id in one call: the last row wins
                    chunks = [c for cs in docs.values() for c in cs]
                    vectors = self._embed(embedder, [c.content for c in chunks])
                    if dim is None and len(chunks):
                        dim = int(vectors.shape[1])
                        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dim', ?)", (dim,))
                    if len(chunks) and vectors.shape[1] != dim:
                        raise ProviderError(f"Embedding model '{embedder.model_name}' returned "
                                            f"{vectors.shape[1]}-d vectors; this knowledge base "
                                            f"holds {dim}-d")
                    db.executemany("DELETE FROM chunks WHERE id = ?", [(d,) for d in docs])
                    db.executemany(
                        "INSERT INTO chunks (id, chunk_id, content, metadata, embedding, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        [(c.doc_id, c.chunk_id, c.content, json.dumps(c.metadata, default=str),
                          vectors[i].tobytes(), stamp) for i, c in enumerate(chunks)])
                    if bar is not None:
                        bar.update(len(batch))
        finally:
            if bar is not None:
                bar.close()
        self._catch_up(h)
        if skipped:
            message = (f"{skipped} of {total} rows had no content in {chunker.content_columns} "
                       f"(null, NaN or blank) and were skipped; stored documents with their ids "
                       f"were kept")
            log.info("insert into %s: %s", record.name, message)  # the client tells its user
        return total - skipped

    @staticmethod
    def _catch_up(h: KbHandle) -> None:
        """Bring the index up to the rows just committed. The write has succeeded whatever
        happens here: a failure is logged and the index dropped, so the next search
        rebuilds it from the rows instead of answering from a half-updated cache."""
        try:
            h.index.sync()
        except Exception as exc:
            log.warning("updating the vector index %s after a committed write failed (%s); "
                        "it is rebuilt on the next search", h.index.path, exc)
            h.index.reset()

    @staticmethod
    def _embed(embedder: Any, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)
        size = getattr(embedder, "batch_size", 256)
        parts = [embedder.embed(texts[i:i + size]) for i in range(0, len(texts), size)]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def delete(self, record: KbRecord, filters: list[Filter]) -> int:
        """Delete the chunks matching the filters (all of them when none); returns the count."""
        if any(f.column.lower() in ("relevance", "distance") for f in filters):
            raise BadRequest("DELETE from a knowledge base filters on id or metadata columns only")
        h = self.handle(record)
        where, args = search_mod.filter_sql(filters)
        with h.store.write() as db:
            count = db.execute("DELETE FROM chunks" + (f" WHERE {where}" if where else ""), args).rowcount
        self._catch_up(h)
        return count

    # reads ------------------------------------------------------------------------------
    def search(self, record: KbRecord, request: SearchRequest) -> list[list[Any]]:
        """Rows (id, chunk_id, chunk_content, metadata, relevance, distance) for a request."""
        h = self.handle(record)
        embedder = self.embedder(record.spec) if request.query is not None else None
        return search_mod.search(h.store, h.index, embedder, self.reranker(record.spec), request)

    def create_index(self, record: KbRecord, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE: store the index settings (over the current ones;
        none given = the defaults) and rebuild the index with them now."""
        h = self.handle(record)
        if h.store.read_only:
            raise ReadOnlyData()
        settings = IndexSettings.from_params(params)
        with h.index.lock:
            settings.save(h.index.path.with_name("index_settings.json"))
            h.index.settings = settings
            h.index.rebuild()
        return settings.as_dict()

    def count(self, record: KbRecord) -> int:
        return self.handle(record).store.count()

    def updated_at(self, record: KbRecord, chunk_ids: list[str]) -> dict[str, str]:
        """chunk_id -> time of its insert (agent tools show it as `_updated_at`)."""
        if not chunk_ids:
            return {}
        store = self.handle(record).store
        rows = store.query(f"SELECT chunk_id, updated_at FROM chunks WHERE chunk_id IN "
                           f"({','.join('?' * len(chunk_ids))})", chunk_ids)
        return {r[0]: r[1] for r in rows}
