"""The knowledge service: the engine's one door to knowledge-base data.

Per knowledge base a directory `data_dir/knowledge_bases/<kb id>/` holds `chunks.sqlite`
(the rows, the source of truth; see store.py) and `index.faiss` (a cache; see index.py);
another storage backend keeps them elsewhere (storage.py). Inserts run through the one
pipeline (batch_insert.py), which embeds (`embed_rows`) and stores (`store_embedded`) here;
the local index catches up after each commit, and on every search.
"""

from __future__ import annotations

import logging
import re
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.catalog import DatasourceRecord, KbRecord, now
from kbsql.engine.config import EngineConfig
from kbsql.engine.faults import check_room, damaged, kb_faults
from kbsql.engine.knowledge import search as search_mod
from kbsql.engine.knowledge.ingest import Chunk, RowChunker, check_metadata_columns
from kbsql.engine.knowledge.search import Conditions, SearchRequest
from kbsql.engine.knowledge.storage import (
    OPERATOR_URL,
    SOURCE_HOSTS,
    ChunkWriter,
    CountsChunks,
    KbStorage,
    KnowsKeys,
    StorageBackend,
    StoragePlace,
    StreamsChunks,
)
from kbsql.engine.models.embeddings import CheckedEmbedder
from kbsql.engine.models.providers import ModelProviders
from kbsql.engine.models.rerank import Reranker
from kbsql.engine.plugins import Registry
from kbsql.interface.batches import row_batches
from kbsql.interface.errors import BadRequest, Interrupted, ProviderError, ServiceError
from kbsql.interface.secrets import is_secret_key

ROW_BATCH = 256
DEFAULT_VECTOR_DATABASE = "kbsql_faiss"  # the local store's name in `storage` / vector_database
SHARED_VECTOR_DATABASE = "kbsql_pgvector"  # the shared catalog's own database, as KB storage
PGVECTOR = "pgvector"  # the storage backend of the shared catalog's database
PROGRESS_EMBED_BATCH = 64
"""Texts per embedding call while a progress bar shows (the bar moves after each call)."""
log = logging.getLogger(__name__)


def shared_table(project: str, name: str) -> str:
    """The PostgreSQL table of a knowledge base stored in a shared catalog's own database
    (also where `kbsql migrate` puts a local knowledge base's chunks)."""
    return re.sub(r"\W", "_", f"kb_{project}_{name}".lower())[:63]


@dataclass(frozen=True)
class StorageChoice:
    """Which storage backend keeps a knowledge base, and the PARAMETERS of the data source
    its `storage` names ({} for the local store or a backend named directly)."""

    backend: str
    parameters: dict[str, Any]

    @property
    def local(self) -> bool:
        return self.backend == DEFAULT_VECTOR_DATABASE


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


def _write(writer: ChunkWriter, batch: Embedded, stamp: str) -> None:
    _check_dim(writer, batch.vectors, batch.model_name)
    writer.replace(list(batch.docs), batch.chunks, batch.vectors, stamp)


def _check_dim(writer: Any, vectors: np.ndarray, model_name: str) -> int:
    """The KB's vector dimension, set by its first vectors; other sizes are refused."""
    if writer.dim is None:
        writer.set_dim(int(vectors.shape[1]))
    if vectors.shape[1] != writer.dim:
        raise ProviderError(f"Embedding model '{model_name}' returned {vectors.shape[1]}-d vectors; "
                            f"this knowledge base holds {writer.dim}-d")
    return int(writer.dim)


class KnowledgeService:
    """Storage through the storage-backend registry (`storage`), models through the
    engine's `ModelProviders` (`models`); `datasources` finds the data source a KB's
    `storage` names."""

    def __init__(self, data_dir: Path, config: EngineConfig, models: ModelProviders,
                 storage: Registry[StorageBackend],
                 datasources: Callable[[str], DatasourceRecord | None] | None = None):
        self.root = data_dir / "knowledge_bases"
        self.config = config
        self.models = models
        self.storage = storage
        self.datasources = datasources  # name -> data source record (the storage it names)
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

    def vector_source(self, database: str | None) -> StorageChoice:
        """The storage a KB's `storage` database names: the local store (none named), the
        shared catalog's own database, a data source whose engine is a storage backend, or
        a backend named directly; a clear error for any other name (a storage is never
        silently ignored)."""
        if database == SHARED_VECTOR_DATABASE and self.config.catalog_url:
            return StorageChoice(PGVECTOR, {"dsn": self.config.catalog_url, OPERATOR_URL: True})
        if not database or database == DEFAULT_VECTOR_DATABASE:
            if self.config.catalog_url:
                raise BadRequest(f"This server shares its catalog: knowledge bases cannot use the "
                                 f"local store {DEFAULT_VECTOR_DATABASE} (leave storage out for "
                                 f"{SHARED_VECTOR_DATABASE}, or name a pgvector database)",
                                 title="Invalid storage")
            return StorageChoice(DEFAULT_VECTOR_DATABASE, {})
        found = self.datasources(database) if self.datasources else None
        if found is not None and found.engine in self.storage:
            own = {k: v for k, v in found.parameters.items() if k not in (OPERATOR_URL, SOURCE_HOSTS)}
            hosts = getattr(self.config, "allowed_source_hosts", None)  # a shared server's bound
            return StorageChoice(found.engine.lower(), own if hosts is None else {**own, SOURCE_HOSTS: hosts})
        if found is None and database in self.storage and database.lower() != PGVECTOR:
            return StorageChoice(database.lower(), {})  # a plugin backend that needs no PARAMETERS
        raise BadRequest(f"Storage database {database} is not a pgvector database: create it with "
                         f"CREATE DATABASE {database} WITH ENGINE = 'pgvector', PARAMETERS = "
                         "{host, port, database, user, password}, or leave storage out for the "
                         f"local store (storage backends here: {', '.join(self.storage.names())})",
                         title="Invalid storage")

    def _open(self, record: KbRecord) -> KbStorage:
        choice = self.vector_source(record.spec.get("vector_database"))
        backend = self.storage.get(choice.backend)
        if backend is None:  # a data source of a plugin's engine, the plugin uninstalled since
            raise BadRequest(f"Knowledge base {record.name} is stored by storage backend "
                             f"{choice.backend!r}, which is not installed here", title="Invalid storage")
        place = StoragePlace(self.storage_dir(record), str(record.spec.get("vector_database_table") or ""),
                             choice.parameters, self.config.read_only)
        return backend.open(place)

    @kb_faults
    def handle(self, record: KbRecord) -> KbStorage:
        with self._lock:
            h = self._handles.get(record.id)
            if h is None:
                h = self._open(record)
                h.index_metadata(record.spec.get("metadata_columns") or [])
                self._handles[record.id] = h
            return h

    @kb_faults
    def create_storage(self, record: KbRecord) -> None:
        self.handle(record)

    @kb_faults
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
            except sqlite3.DatabaseError as exc:  # a damaged store: dropping it is the way out
                if not damaged(exc):
                    raise
                shutil.rmtree(self.storage_dir(record), ignore_errors=True)
                return
        try:
            h.drop()
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            shutil.rmtree(self.storage_dir(record), ignore_errors=True)
        finally:
            try:
                h.close()
            except sqlite3.DatabaseError:
                pass

    def close(self, existing: set[int] | None = None) -> None:
        """Close every open storage; with `existing` (the ids of the knowledge bases the
        catalog still has), one whose knowledge base is gone is discarded, not saved."""
        with self._lock:
            handles, self._handles = dict(self._handles), {}
        for kb_id, h in handles.items():
            gone = existing is not None and kb_id not in existing
            discard = getattr(h, "discard", None) if gone else None
            (discard or h.close)()

    # models -----------------------------------------------------------------------------
    def pinned_default(self) -> dict[str, Any] | None:
        """The configured default embedding model as a new knowledge base keeps it. MindsDB
        saves the default into the knowledge base at CREATE (test_save_default_params), so a
        later change of the default cannot search its rows with another model; here it is
        kept without its secrets (the server's key stays out of the catalog, as an agent's
        default model does) and `embedder` lends them while the default is that model."""
        default = self.config.default_embedding_model
        return _without_secrets(default) if default else None

    def embedder(self, spec: dict[str, Any]) -> Any:
        """The KB's embedder; one that does not say its rows are normalised (a plugin's) is
        wrapped so its answers are checked and normalised like the built-ins'."""
        descriptor, default = spec.get("embedding_model"), self.config.default_embedding_model
        if descriptor and default and _without_secrets(descriptor) == self.pinned_default():
            descriptor = {**default, **descriptor}
        embedder = self.models.embedder(descriptor, default)
        return embedder if getattr(embedder, "normalized", False) else CheckedEmbedder(embedder)

    def reranker(self, spec: dict[str, Any]) -> Reranker | None:
        descriptor = spec.get("reranking_model")
        return self.models.reranker(descriptor) if descriptor else None

    def check_models(self, spec: dict[str, Any]) -> None:
        """Check a spec can work before it is stored (CREATE and ALTER both call this).

        First the cheap checks (BadRequest): declared metadata columns must not be named like
        an internal metadata key. Then ProviderError when the embedding or reranking model
        cannot be reached: one real call for remote providers (as the reference does); the
        local model is only checked to be installed (loading it costs a second). A failed
        embedding check starts with MindsDB's "Problem with embedding model config", which
        its clients match on."""
        check_metadata_columns(spec.get("metadata_columns"))
        embedder = self.embedder(spec)
        try:
            embedder.check()
        except ProviderError as exc:
            raise ProviderError(f"Problem with embedding model config: {exc.detail}", exc.title) from None
        reranker = self.reranker(spec)
        if reranker is not None:
            reranker.check()

    # writes -----------------------------------------------------------------------------
    def row_batches(self, rows: Any) -> tuple[Iterator[list[dict[str, Any]]], int]:
        """(rows in batches of ROW_BATCH, how many rows) for the one-call insert; a generator
        of dicts is read whole first (its count sizes the progress)."""
        if not hasattr(rows, "__len__"):
            rows = list(rows)
        return row_batches(rows, ROW_BATCH), len(rows)

    def embed_rows(self, record: KbRecord, rows: list[dict[str, Any]],
                   on_embedded: Callable[[int, int], None] | None = None, first: int = 0) -> Embedded:
        """Chunk and embed one batch of rows without touching the store (the first half of
        an insert, batch_insert.py): safe to run in several threads at once, since the
        embedders are (HTTP through one thread-safe httpx client, ONNX Runtime sessions,
        pure numpy). Row positions (`original_row_index`) start at `first`."""
        embedder = self.embedder(record.spec)
        docs, skipped = _chunk_rows(RowChunker(record.spec, self.config.max_chunks_per_row), rows, first)
        chunks = [c for cs in docs.values() for c in cs]
        vectors = self._embed(embedder, [c.content for c in chunks], on_embedded)
        return Embedded(len(rows), skipped, docs, chunks, vectors, embedder.model_name)

    @kb_faults
    def store_embedded(self, record: KbRecord, batch: Embedded, writer: ChunkWriter | None = None,
                       stamp: str | None = None) -> int:
        """Store one `embed_rows` batch (its documents replace any stored ones of the same
        ids) in the open transaction `writer`, or in its own; returns its rows stored
        (rows without content are not). Ctrl-C as its own transaction commits raises
        `Interrupted` saying the batch is stored."""
        handed = False
        reserve = self.config.disk_reserve_mb * 2**20  # read-only: the write's own refusal first
        if reserve and batch.chunks and not self.config.read_only and \
                self.vector_source(record.spec.get("vector_database")).local:
            # its text in the store and its full-text index, and its vector: about what it takes
            needed = batch.vectors.nbytes + 2 * sum(len(c.content.encode()) for c in batch.chunks)
            place = self.storage_dir(record)
            check_room(place if place.exists() else self.config.data_dir, needed, reserve,
                       f"{len(batch.chunks)} chunks")
        try:
            if batch.chunks:
                if writer is None:
                    with self.handle(record).write() as own:
                        _write(own, batch, stamp or now())
                        handed = True  # from here on the batch commits
                else:
                    _write(writer, batch, stamp or now())
        except KeyboardInterrupt as exc:  # after `handed`: during the commit or the index catch-up
            raise Interrupted(str(exc), stored=batch.rows - batch.skipped if handed else 0) from exc
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

    @kb_faults
    def delete(self, record: KbRecord, filters: Conditions) -> int:
        """Delete the chunks matching the filters (all of them when none); returns the count."""
        if any(f.column.lower() in ("relevance", "distance") for f in filters):
            raise BadRequest("DELETE from a knowledge base filters on id or metadata columns only")
        return self.handle(record).delete(filters)

    # reads ------------------------------------------------------------------------------
    @kb_faults
    def search(self, record: KbRecord, request: SearchRequest) -> list[list[Any]]:
        """Rows (id, chunk_id, chunk_content, metadata, relevance, distance) for a request."""
        storage = self.handle(record)
        embedder = self.embedder(record.spec) if request.query is not None else None
        return search_mod.search(storage, embedder, self.reranker(record.spec), request)

    def plain_batches(self, record: KbRecord, filters: Conditions, size: int
                      ) -> Iterator[list[tuple[Any, ...]]] | None:
        """(id, chunk_id, content, metadata JSON text) of every chunk matching `filters`, in
        batches from one committed state (a `StreamsChunks` storage), else None."""
        storage = self.handle(record)
        return storage.plain_batches(filters, size) if isinstance(storage, StreamsChunks) else None

    @kb_faults
    def has_metadata_key(self, record: KbRecord, key: str) -> bool:
        """Whether some chunk's metadata holds `key` (a `KnowsKeys` storage; True when the
        storage cannot tell, so a filter on the key runs as before)."""
        storage = self.handle(record)
        return storage.has_metadata_key(key) if isinstance(storage, KnowsKeys) else True

    @kb_faults
    def count_matching(self, record: KbRecord, filters: Conditions) -> int | None:
        """How many chunks match `filters`, counted by the storage without reading them (a
        `CountsChunks` storage), else None."""
        storage = self.handle(record)
        return storage.count_matching(filters) if isinstance(storage, CountsChunks) else None

    @kb_faults
    def create_index(self, record: KbRecord, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE: tune and rebuild the KB's vector index, each storage
        with its own knobs (the local FAISS one: settings.py; pgvector's HNSW: pg_hnsw.py);
        every `KbStorage` has the method, and refuses the knobs it does not know."""
        return self.handle(record).create_index(params)

    @kb_faults
    def count(self, record: KbRecord) -> int:
        return self.handle(record).count()

    @kb_faults
    def updated_at(self, record: KbRecord, chunk_ids: list[str]) -> dict[str, str]:
        """chunk_id -> time of its insert (agent tools show it as `_updated_at`)."""
        return self.handle(record).updated_at(chunk_ids)


def _without_secrets(model: dict[str, Any]) -> dict[str, Any]:
    """A model descriptor without its secret keys (interface.secrets.is_secret_key): what a
    knowledge base keeps of the default model, and what a stored one is compared by."""
    return {k: v for k, v in model.items() if not is_secret_key(k)}
