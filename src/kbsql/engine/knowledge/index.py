"""The FAISS index of one knowledge base: a derived, persisted cache of the SQLite rows.

The index carries a tag (store version, max seq) saying which state of the rows it covers.
Before every search `sync()` compares the tag with the store's version (one tiny SQL read)
and catches up: rows with a higher seq are added, tombstones newer than the tag removed. So
the index and the rows always agree, whoever wrote (this process or another one), and a
crash can at worst leave a stale cache file that the next open catches up.

Index type by size (measured in benchmarks/bench_knowledge.py, see `hnsw_threshold` in its
output): exact `IndexIDMap2(IndexFlatIP)` below `HNSW_THRESHOLD` live vectors, HNSW
(M=32, inner product) above. Flat deletes are batched `remove_ids`; HNSW cannot remove, so
deleted ids are masked with an IDSelector and the index is rebuilt once they pass 20%.
Vectors are L2-normalised: cosine distance = 1 - inner product.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faiss as _faiss
import numpy as np

from kbsql.engine.knowledge.store import ChunkStore

faiss: Any = _faiss  # faiss's SWIG-generated stubs are partial (no SearchParametersHNSW)

HNSW_THRESHOLD = 20_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 64
REBUILD_DELETED_FRACTION = 0.2
PERSIST_EVERY = 5_000  # changed vectors before the cache file is rewritten (also on close)
_MAGIC = b"KBSQLIDX1\n"

faiss.omp_set_num_threads(1)  # single queries: 1 thread is 2x faster than 2 (platform facts)
EXACT_SUBSET = 20_000  # filtered HNSW searches over at most this many rows are exact
BULK = 2_000  # adds at least this big use every core (HNSW builds are CPU-bound)


@contextlib.contextmanager
def _all_cores(count: int) -> Iterator[None]:
    if count < BULK:
        yield
        return
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(1)


class VectorIndex:
    def __init__(self, path: Path, store: ChunkStore, hnsw_threshold: int | None = None):
        self.path = path
        self.store = store
        self.hnsw_threshold = hnsw_threshold or HNSW_THRESHOLD
        self.lock = threading.RLock()
        self.index: Any = None  # a faiss.Index once built
        self.kind = "flat"
        self.version = -1
        self.max_seq = 0
        self.deleted: set[int] = set()  # HNSW only: ids still in the graph but gone from the rows
        self.unsaved = 0
        self._load()

    # persistence ------------------------------------------------------------------------
    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
            if not raw.startswith(_MAGIC):
                return
            header_end = raw.index(b"\n", len(_MAGIC))
            header = json.loads(raw[len(_MAGIC):header_end])
            index = faiss.deserialize_index(np.frombuffer(raw, dtype=np.uint8, offset=header_end + 1))
        except (OSError, ValueError, RuntimeError):
            return  # no cache or a bad one: rebuilt from the rows by sync()
        self.index, self.kind = index, header["kind"]
        self.version, self.max_seq = int(header["version"]), int(header["max_seq"])
        self.deleted = set(header.get("deleted", []))

    def save(self) -> None:
        """Write the cache: temp file + fsync + os.replace, so a reader sees old or new."""
        with self.lock:
            if self.index is None or self.unsaved == 0:
                return
            header = {"kind": self.kind, "version": self.version, "max_seq": self.max_seq,
                      "deleted": sorted(self.deleted)}
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "wb") as f:
                f.write(_MAGIC + json.dumps(header).encode() + b"\n")
                f.write(faiss.serialize_index(self.index).tobytes())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self.unsaved = 0

    # catching up ------------------------------------------------------------------------
    def sync(self) -> None:
        """Bring the index to the store's current state (cheap when nothing changed)."""
        version = self.store.version()
        with self.lock:
            if version == self.version and self.index is not None:
                return
            dim = self.store.dim()
            if dim is None:  # nothing ever inserted
                self.version = version
                return
            if self.index is None or self.index.d != dim:
                self._rebuild(dim)
            else:
                with self.store.snapshot():  # one consistent state of rows and tombstones
                    version = self.store.version()
                    removed = self.store.removed_since(self.version, self.max_seq)
                    self._remove(removed)
                    for ids, vectors in self.store.vectors_after(self.max_seq, dim):
                        with _all_cores(len(ids)):
                            self.index.add_with_ids(vectors, ids)
                        self.max_seq = int(ids[-1])
                        self.unsaved += len(ids)
                self.version = version
                self.unsaved += len(removed)
            self._maybe_switch(dim)
            if self.unsaved >= PERSIST_EVERY:
                self.save()

    def _new_index(self, dim: int, kind: str) -> Any:
        if kind == "hnsw":
            inner = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        else:
            inner = faiss.IndexFlatIP(dim)
        return faiss.IndexIDMap2(inner)

    def _rebuild(self, dim: int, kind: str | None = None) -> None:
        live = self.store.count()
        kind = kind or ("hnsw" if live >= self.hnsw_threshold else "flat")
        index = self._new_index(dim, kind)
        with self.store.snapshot():
            version = self.store.version()
            max_seq = 0
            for ids, vectors in self.store.vectors_after(0, dim):
                with _all_cores(len(ids)):
                    index.add_with_ids(vectors, ids)
                max_seq = int(ids[-1])
        self.index, self.kind, self.version, self.max_seq = index, kind, version, max_seq
        self.deleted = set()
        self.unsaved = max(1, index.ntotal)

    def _remove(self, ids: np.ndarray) -> None:
        if len(ids) == 0:
            return
        if self.kind == "flat":
            self.index.remove_ids(faiss.IDSelectorBatch(ids))
        else:
            self.deleted.update(int(i) for i in ids)

    def _maybe_switch(self, dim: int) -> None:
        live = self.index.ntotal - len(self.deleted)
        if self.kind == "flat" and live >= self.hnsw_threshold:
            self._rebuild(dim, "hnsw")
        elif self.kind == "hnsw" and (live < self.hnsw_threshold // 2
                                      or len(self.deleted) > REBUILD_DELETED_FRACTION * self.index.ntotal):
            self._rebuild(dim)

    # search -----------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int,
               allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (inner products, ids) for one normalised query; `allowed` restricts to those ids.

        Exact for flat indexes, and for HNSW under a filter matching up to EXACT_SUBSET rows
        (their vectors are read back from the graph's storage). Past that, HNSW searches with
        the filter as a selector; the caller falls back to an exact search if it comes back short.
        """
        with self.lock:
            if self.index is None or self.index.ntotal == 0 or k <= 0:
                return np.empty(0, np.float32), np.empty(0, np.int64)
            if allowed is not None:  # rows committed by another process after our last sync
                allowed = allowed[allowed <= self.max_seq]
                if len(allowed) == 0:
                    return np.empty(0, np.float32), np.empty(0, np.int64)
            if self.kind == "hnsw" and allowed is not None and len(allowed) <= EXACT_SUBSET:
                vectors = self.index.reconstruct_batch(allowed)
                scores = vectors @ query
                top = np.argsort(-scores, kind="stable")[:k]
                return scores[top].astype(np.float32), allowed[top]
            selector = None
            if allowed is not None:
                selector = faiss.IDSelectorBatch(allowed)
            elif self.deleted:
                selector = faiss.IDSelectorNot(faiss.IDSelectorBatch(np.fromiter(self.deleted, np.int64)))
            k = min(k, self.index.ntotal)
            if self.kind == "hnsw":
                params = faiss.SearchParametersHNSW(efSearch=max(64, 2 * k))
                if selector is not None:
                    params.sel = selector
            elif selector is not None:
                params = faiss.SearchParameters(sel=selector)
            else:
                params = None
            scores, ids = self.index.search(query.reshape(1, -1), k, params=params)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    @property
    def live(self) -> int:
        return 0 if self.index is None else self.index.ntotal - len(self.deleted)
