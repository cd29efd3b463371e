"""The knowledge service: the engine's one door to knowledge-base data.

Per knowledge base a directory `data_dir/knowledge_bases/<kb id>/` holds `chunks.sqlite`
(the rows, the source of truth; see store.py) and `index.faiss` (a cache; see index.py).
One `insert` call is one SQLite transaction: embeddings are computed batch by batch inside
it (memory stays flat for 100k rows) and a failure or a kill anywhere leaves the state
before the call. The index catches up after the commit, and on every search.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.catalog import DatasourceRecord, KbRecord, now
from kbsql.engine.config import EngineConfig
from kbsql.engine.knowledge import search as search_mod
from kbsql.engine.knowledge.embeddings import embedder_for
from kbsql.engine.knowledge.ingest import Chunk, RowChunker, check_metadata_columns, iter_batches
from kbsql.engine.knowledge.local import LocalStorage
from kbsql.engine.knowledge.rerank import Reranker
from kbsql.engine.knowledge.search import Conditions, SearchRequest
from kbsql.engine.knowledge.storage import KbStorage
from kbsql.interface import progress as progress_mod
from kbsql.interface.errors import BadRequest, ProviderError, ServiceError

ROW_BATCH = 256
DEFAULT_VECTOR_DATABASE = "kbsql_faiss"  # the local store's name in `storage` / vector_database
SHARED_VECTOR_DATABASE = "kbsql_pgvector"  # the shared catalog's own database, as KB storage
PROGRESS_EMBED_BATCH = 64
"""Texts per embedding call while a progress bar shows (the bar moves after each call)."""
log = logging.getLogger(__name__)


def shared_table(project: str, name: str) -> str:
    """The PostgreSQL table of a knowledge base stored in a shared catalog's own database
    (also where `kbsql migrate` puts a local knowledge base's chunks)."""
    return re.sub(r"\W", "_", f"kb_{project}_{name}".lower())[:63]


@dataclass
class Embedded:
    """A batch of rows chunked and embedded, not yet stored (`KnowledgeService.embed_rows`)."""

    rows: int
    skipped: int  # rows without content: not stored, not counted
    docs: dict[str, list[Chunk]]  # document id -> its chunks (a repeated id: the last row wins)
    chunks: list[Chunk]
    vectors: np.ndarray  # one per chunk, in `chunks` order
    model_name: str


def _chunk_rows(chunker: RowChunker, rows: list[dict[str, Any]],
                first: int) -> tuple[dict[str, list[Chunk]], int]:
    """Documents (id -> chunks) of rows whose positions start at `first`, and how many rows
    had no content; a repeated id in the rows: the last row wins."""
    docs: dict[str, list[Chunk]] = {}
    skipped = 0
    for position, row in enumerate(rows, first):
        made = chunker.chunks(row, position)
        if made is None:
            skipped += 1
            continue
        docs[made[0]] = made[1]
    return docs, skipped


def _check_dim(writer: Any, vectors: np.ndarray, model_name: str) -> int:
    """The KB's vector dimension, set by its first vectors; other sizes are refused."""
    if writer.dim is None:
        writer.set_dim(int(vectors.shape[1]))
    if vectors.shape[1] != writer.dim:
        raise ProviderError(f"Embedding model '{model_name}' returned {vectors.shape[1]}-d vectors; "
                            f"this knowledge base holds {writer.dim}-d")
    return int(writer.dim)


class KnowledgeService:
    def __init__(self, data_dir: Path, config: EngineConfig,
                 datasources: Callable[[str], DatasourceRecord | None] | None = None):
        self.root = data_dir / "knowledge_bases"
        self.config = config
        self.datasources = datasources  # name -> data source record (pgvector storage lookup)
        self._handles: dict[int, KbStorage] = {}
        self._lock = threading.Lock()

    # storage ----------------------------------------------------------------------------
    def storage_dir(self, record: KbRecord) -> Path:
        return self.root / str(record.id)

    def default_storage(self, project: str, name: str) -> tuple[str, str]:
        """(vector database, table) of a new KB created without `storage`: the local store,
        or on a shared catalog a table in the catalog's own database (nothing a server
        keeps may live only on its disk)."""
        if self.config.catalog_url:
            return SHARED_VECTOR_DATABASE, shared_table(project, name)
        return DEFAULT_VECTOR_DATABASE, name

    def vector_source(self, database: str | None) -> DatasourceRecord | None:
        """The pgvector data source a KB's `storage` names, None for the local store; a clear
        error for any other name (a storage is never silently ignored)."""
        if database == SHARED_VECTOR_DATABASE and self.config.catalog_url:
            return DatasourceRecord(0, database, "pgvector", {"dsn": self.config.catalog_url}, "")
        if not database or database == DEFAULT_VECTOR_DATABASE:
            if self.config.catalog_url:
                raise BadRequest(f"This server shares its catalog: knowledge bases cannot use the "
                                 f"local store {DEFAULT_VECTOR_DATABASE} (leave storage out for "
                                 f"{SHARED_VECTOR_DATABASE}, or name a pgvector database)",
                                 title="Invalid storage")
            return None
        found = self.datasources(database) if self.datasources else None
        if found is None or found.engine.lower() != "pgvector":
            raise BadRequest(f"Storage database {database} is not a pgvector database: create it with "
                             f"CREATE DATABASE {database} WITH ENGINE = 'pgvector', PARAMETERS = "
                             "{host, port, database, user, password}, or leave storage out for the "
                             "local store", title="Invalid storage")
        return found

    def _open(self, record: KbRecord) -> KbStorage:
        source = self.vector_source(record.spec.get("vector_database"))
        if source is None:
            return LocalStorage(self.storage_dir(record), read_only=self.config.read_only)
        from kbsql.engine.datasources.postgres import settings
        from kbsql.engine.knowledge.pgvector import PgVectorStorage

        return PgVectorStorage(settings(source.parameters), str(record.spec["vector_database_table"]),
                               str(source.parameters.get("schema") or "public"))

    def handle(self, record: KbRecord) -> KbStorage:
        with self._lock:
            h = self._handles.get(record.id)
            if h is None:
                h = self._open(record)
                h.index_metadata(record.spec.get("metadata_columns") or [])
                self._handles[record.id] = h
            return h

    def create_storage(self, record: KbRecord) -> None:
        self.handle(record)

    def spec_changed(self, record: KbRecord) -> None:
        """After ALTER KNOWLEDGE_BASE: index newly declared metadata columns."""
        self.handle(record).index_metadata(record.spec.get("metadata_columns") or [])

    def drop_storage(self, record: KbRecord) -> None:
        with self._lock:
            h = self._handles.pop(record.id, None)
        if h is None:
            try:
                h = self._open(record)
            except ServiceError:
                shutil.rmtree(self.storage_dir(record), ignore_errors=True)
                return
        try:
            h.drop()
        finally:
            h.close()

    def close(self) -> None:
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for h in handles:
            h.close()

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
    def insert(self, record: KbRecord, rows: Any,
               progress: bool | progress_mod.ProgressFactory | None = None) -> int:
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
        bar = progress_mod.open_progress(f"insert into {record.name}", total, progress=progress)
        stamp = now()
        position = skipped = 0
        with progress_mod.Finishing(bar):
            if bar is not None:
                bar.update(progress_mod.READING, 0, total)
            with h.write() as writer:
                for batch in iter_batches(rows, ROW_BATCH):
                    first = position
                    if bar is not None:
                        bar.update(progress_mod.CHUNKING, first, total)
                    docs, empty = _chunk_rows(chunker, batch, position)
                    position += len(batch)
                    skipped += empty
                    chunks = [c for cs in docs.values() for c in cs]
                    on_embedded = None
                    if bar is not None:
                        def on_embedded(done: int, count: int, first: int = first, rows: int = len(batch)):
                            # the bar moves by chunk: a half-embedded batch is half its rows
                            bar.update(progress_mod.EMBEDDING, first + rows * done / max(count, 1), total)
                    vectors = self._embed(embedder, [c.content for c in chunks], on_embedded)
                    if len(chunks):
                        _check_dim(writer, vectors, embedder.model_name)
                    if bar is not None:
                        bar.update(progress_mod.STORING, position, total)
                    writer.replace(list(docs), chunks, vectors, stamp)
                if bar is not None:
                    bar.update(progress_mod.STORING, total, total)  # committing
        if skipped:
            message = (f"{skipped} of {total} rows had no content in {chunker.content_columns} "
                       f"(null, NaN or blank) and were skipped; stored documents with their ids "
                       f"were kept")
            log.info("insert into %s: %s", record.name, message)  # the client tells its user
        return total - skipped

    def embed_rows(self, record: KbRecord, rows: list[dict[str, Any]],
                   on_embedded: Callable[[int, int], None] | None = None) -> Embedded:
        """Chunk and embed one batch of rows without touching the store (the first half of
        `insert`, for `batch_insert`): safe to run in several threads at once, since the
        embedders are (HTTP through one thread-safe httpx client, ONNX Runtime sessions,
        pure numpy). Row positions (`original_row_index`) count from 0 in the batch, as
        when the batch is given to `insert` alone."""
        embedder = self.embedder(record.spec)
        docs, skipped = _chunk_rows(RowChunker(record.spec), rows, 0)
        chunks = [c for cs in docs.values() for c in cs]
        vectors = self._embed(embedder, [c.content for c in chunks], on_embedded)
        return Embedded(len(rows), skipped, docs, chunks, vectors, embedder.model_name)

    def store_embedded(self, record: KbRecord, batch: Embedded) -> int:
        """Store one `embed_rows` batch in its own transaction (its documents replace any
        stored ones of the same ids); returns its rows stored, as `insert` counts them."""
        if batch.chunks:
            with self.handle(record).write() as writer:
                _check_dim(writer, batch.vectors, batch.model_name)
                writer.replace(list(batch.docs), batch.chunks, batch.vectors, now())
        return batch.rows - batch.skipped

    @staticmethod
    def _embed(embedder: Any, texts: list[str],
               on_embedded: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Embed in the model's batches; with a progress callback, in batches of at most
        PROGRESS_EMBED_BATCH texts so a bar moves steadily, called after each batch."""
        if not texts:
            return np.zeros((0, 0), np.float32)
        size = getattr(embedder, "batch_size", 256)
        if on_embedded is not None:
            size = min(size, PROGRESS_EMBED_BATCH)
        parts = []
        for i in range(0, len(texts), size):
            parts.append(embedder.embed(texts[i:i + size]))
            if on_embedded is not None:
                on_embedded(min(i + size, len(texts)), len(texts))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def delete(self, record: KbRecord, filters: Conditions) -> int:
        """Delete the chunks matching the filters (all of them when none); returns the count."""
        if any(f.column.lower() in ("relevance", "distance") for f in filters):
            raise BadRequest("DELETE from a knowledge base filters on id or metadata columns only")
        return self.handle(record).delete(filters)

    # reads ------------------------------------------------------------------------------
    def search(self, record: KbRecord, request: SearchRequest) -> list[list[Any]]:
        """Rows (id, chunk_id, chunk_content, metadata, relevance, distance) for a request."""
        storage = self.handle(record)
        embedder = self.embedder(record.spec) if request.query is not None else None
        return search_mod.search(storage, embedder, self.reranker(record.spec), request)

    def create_index(self, record: KbRecord, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE: tune and rebuild the KB's vector index, the local
        FAISS one (settings.py) or pgvector's HNSW (pg_hnsw.py), each with its own knobs."""
        return self.handle(record).create_index(params)

    def count(self, record: KbRecord) -> int:
        return self.handle(record).count()

    def updated_at(self, record: KbRecord, chunk_ids: list[str]) -> dict[str, str]:
        """chunk_id -> time of its insert (agent tools show it as `_updated_at`)."""
        return self.handle(record).updated_at(chunk_ids)
