"""The local storage of a knowledge base: SQLite rows (store.py) + a FAISS cache (index.py),
in `data_dir/knowledge_bases/<kb id>/`, behind the `KbStorage` interface (storage.py).

The SQL over `chunks.sqlite` and the FAISS reads a search needs live here too (the module
functions below): the generic search (search.py) asks this storage through
`SearchableStorage` and never comes back down to SQLite itself."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.knowledge.allowed import AllowedSeqs, KnownKeys
from kbsql.engine.knowledge.index import VectorIndex
from kbsql.engine.knowledge.search import WORD, Conditions, Filter, FilterGroup, group_sql, op_sql
from kbsql.engine.knowledge.settings import IndexSettings
from kbsql.engine.knowledge.storage import ChunkBatch, StoragePlace, check_query_dim, stamped_batches
from kbsql.engine.knowledge.store import FTS_DEFERRED, ChunkStore, metadata_expr
from kbsql.engine.sqlite_files import ReadOnlyData
from kbsql.interface.control import checkpoint

log = logging.getLogger(__name__)


class _Writer:
    def __init__(self, db: Any, dim: int | None):
        self.db, self.dim = db, dim

    def set_dim(self, dim: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dim', ?)", (dim,))
        self.dim = dim

    def replace(self, doc_ids: list[str], chunks: list[Any], vectors: np.ndarray, stamp: str) -> None:
        """Documents `doc_ids` replaced by `chunks`, inside the caller's write transaction.
        Their full-text entries are added in one statement after the rows (`FTS_DEFERRED`):
        new rows are exactly those above the table's seq counter, as seq only grows."""
        self.db.executemany("DELETE FROM chunks WHERE id = ?", [(d,) for d in doc_ids])
        row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunks'").fetchone()
        last = int(row[0]) if row else 0
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, 1)", (FTS_DEFERRED,))
        # a failure below needs no cleanup: the caller's transaction (ChunkStore.write) rolls
        # back the rows and the flag together, and a second statement here could only hide
        # the first error (a full disk, a damaged page)
        self.db.executemany(
            "INSERT INTO chunks (id, chunk_id, content, metadata, embedding, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(c.doc_id, c.chunk_id, c.content, json.dumps(c.metadata, default=str),
              vectors[i].tobytes(), stamp) for i, c in enumerate(chunks)])
        self.db.execute("INSERT INTO chunks_fts(rowid, content) SELECT seq, content FROM chunks"
                        " WHERE seq > ?", (last,))
        self.db.execute("DELETE FROM meta WHERE key = ?", (FTS_DEFERRED,))


class LocalBackend:
    """Storage backend `kbsql_faiss` (the default): the KB's own directory in the data dir."""

    def open(self, place: StoragePlace) -> LocalStorage:
        return LocalStorage(place.directory, read_only=place.read_only)


class LocalStorage:
    def __init__(self, directory: Path, read_only: bool = False):
        self.directory = directory
        self.read_only = read_only
        self.store = ChunkStore(directory / "chunks.sqlite", read_only=read_only)
        self.index = VectorIndex(directory / "index.faiss", self.store)
        self.allowed = AllowedSeqs(self.store, matching_seqs)
        self.keys = KnownKeys(self.store)

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
        where, args = filter_sql(filters)
        with self.write() as w:
            return w.db.execute("DELETE FROM chunks" + (f" WHERE {where}" if where else ""), args).rowcount

    def index_metadata(self, columns: list[str]) -> None:
        self.store.index_metadata(columns)

    def sync(self) -> None:
        self.index.sync()

    @contextmanager
    def writers_held(self) -> Iterator[None]:
        """No write of this process commits inside (search's last attempt reads the index
        and the rows of one state under it; a search takes milliseconds)."""
        with self.store.write_lock:
            yield

    def count(self) -> int:
        return self.store.count()

    def export(self, batch: int) -> Iterator[ChunkBatch]:
        """`ExportsChunks`: pages by `seq` (each page one short read: searches go on)."""
        dim, after = self.store.dim(), 0
        while dim:
            rows = self.store.query("SELECT seq, id, chunk_id, content, metadata, embedding, updated_at "
                                    "FROM chunks WHERE seq > ? ORDER BY seq LIMIT ?", (after, int(batch)))
            if not rows:
                return
            after = rows[-1][0]
            yield from stamped_batches([(r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows],
                                       lambda blob: np.frombuffer(blob, np.float32))

    def chunks_by_id(self, chunk_ids: list[str]) -> dict[str, tuple[str, str, dict[str, Any], np.ndarray]]:
        found: dict[str, tuple[str, str, dict[str, Any], np.ndarray]] = {}
        for start in range(0, len(chunk_ids), 500):
            part = chunk_ids[start:start + 500]
            rows = self.store.query("SELECT chunk_id, id, content, metadata, embedding FROM chunks "
                                    f"WHERE chunk_id IN ({', '.join('?' * len(part))})", part)
            found.update({r[0]: (r[1], r[2], json.loads(r[3]), np.frombuffer(r[4], np.float32))
                          for r in rows})
        return found

    def sample(self, limit: int) -> tuple[list[str], list[dict[str, Any]], np.ndarray]:
        dim = self.store.dim()
        rows = self.store.query("SELECT chunk_id, metadata, embedding FROM chunks ORDER BY seq LIMIT ?",
                                (int(limit),)) if dim else []
        vectors = (np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(-1, dim or 0)
                   if rows else np.zeros((0, dim or 0), np.float32))
        return [r[0] for r in rows], [json.loads(r[1]) for r in rows], vectors

    def plain_rows(self, filters: Conditions, limit: int | None, offset: int = 0) -> list[list[Any]]:
        return plain_rows(self.store, filters, limit, offset)

    def plain_batches(self, filters: Conditions, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """`StreamsChunks`: (id, chunk_id, content, metadata JSON text) of the matching rows,
        in seq order, `size` at a time, from one committed state."""
        where, args = filter_sql(filters)
        sql = "SELECT id, chunk_id, content, metadata FROM chunks" + (f" WHERE {where}" if where else "")
        return self.store.batches(sql + " ORDER BY seq", args, size)

    def count_matching(self, filters: Conditions) -> int:
        """`CountsChunks`: the matching rows counted by SQLite, none of them read."""
        return self.store.count_where(*filter_sql(filters))

    def has_metadata_key(self, key: str) -> bool:
        """`KnowsKeys` (allowed.KnownKeys: read once per key and store version)."""
        return self.keys.has(key)

    def vector_top(self, query: np.ndarray, k: int, filters: Conditions) -> tuple[np.ndarray, np.ndarray]:
        check_query_dim(self.store.dim(), query)
        return vector_top(self.store, self.index, query, k, filters, self.allowed.seqs)

    def keyword_top(self, text: str, k: int, filters: Conditions) -> dict[int, float]:
        return keyword_top(self.store, text, k, filters)

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]:
        return similarities(self.store, query, keys)

    def load_rows(self, keys: list[int]) -> dict[int, tuple[Any, ...]]:
        return load_rows(self.store, keys)

    def create_index(self, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE: store the index settings (settings.py; over the
        defaults: none given = the defaults) and rebuild the index with them now."""
        if self.read_only:
            raise ReadOnlyData()
        settings = IndexSettings.from_params(params)
        with self.index.lock:
            settings.save(self.index.path.with_name("index_settings.json"), given=params)
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
            self.index.wait_compaction()
            if not self.read_only:
                self.index.try_save()
        finally:
            self.store.close()

    def discard(self) -> None:
        """Close without saving the index: its knowledge base is gone (dropped here or by
        another process on the same catalog), and a save would only fail on the removed
        folder, or write into a folder a new knowledge base has taken."""
        self.index.wait_compaction()
        self.index.reset()
        self.store.close()

    def drop(self) -> None:
        self.discard()
        shutil.rmtree(self.directory, ignore_errors=True)


# the local store's SQL and FAISS reads -----------------------------------------------
def filter_sql(filters: Conditions, alias: str = "") -> tuple[str, list[Any]]:
    """`WHERE`-ready SQL (without the keyword) and its parameters; '' when no filter."""
    args: list[Any] = []
    parts = [_condition_sql(f, alias, args) for f in filters]
    return " AND ".join(parts), args


def _condition_sql(f: Filter | FilterGroup, alias: str, args: list[Any]) -> str:
    if isinstance(f, FilterGroup):
        return group_sql(f, lambda i: _condition_sql(i, alias, args), "1", "0")
    op = op_sql(f)
    column = f.column.lower()
    is_id = column in ("id", "chunk_id")
    if is_id:
        expr = f"{alias}{column}"
    elif column in ("chunk_content", "content"):
        expr = f"{alias}content"
    else:
        expr = metadata_expr(f.column, alias)
    value = f.value
    if is_id and op in ("<", "<=", ">", ">=") and isinstance(value, int | float):
        expr, is_id = f"CAST({expr} AS REAL)", False  # ids are text; `id < 40` means numbers
    if op in ("IN", "NOT IN"):
        values = list(value) if isinstance(value, list | tuple | set) else [value]
        if not values:
            return "0" if op == "IN" else "1"
        args.extend(_sql_value(v, is_id) for v in values)
        return f"{expr} {op} ({', '.join('?' * len(values))})"
    if op in ("IS", "IS NOT"):
        return f"{expr} {op} NULL"
    args.append(_sql_value(value, is_id))
    return f"{expr} {op} ?"


def _sql_value(value: Any, as_text: bool) -> Any:
    if as_text and value is not None:
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def plain_rows(store: ChunkStore, filters: Conditions, limit: int | None,
               offset: int = 0) -> list[list[Any]]:
    where, args = filter_sql(filters)
    sql = "SELECT id, chunk_id, content, metadata FROM chunks"
    if where:
        sql += f" WHERE {where}"
    sql += " ORDER BY seq"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        args = [*args, int(limit), int(offset)]
    return [[r[0], r[1], r[2], json.loads(r[3]), None, None] for r in store.query(sql, args)]


def matching_seqs(store: ChunkStore, where: str, args: list[Any]) -> np.ndarray:
    """The seqs of the rows matching a rendered filter (`filter_sql`), in no set order. One
    text of them all, parsed by numpy: fetching one row per seq built a tuple each (2.8 ms for
    10k seqs; 1.6 ms this way); the count of commas checks the parse took every one."""
    text = store.query(f"SELECT group_concat(seq) FROM chunks WHERE {where}", args)[0][0]
    if not text:
        return np.empty(0, np.int64)
    seqs = np.fromstring(text, dtype=np.int64, sep=",")
    if len(seqs) != text.count(",") + 1:
        raise ValueError(f"unreadable seq list from the chunk store: {text[:80]!r}")
    return seqs


def _exact(store: ChunkStore, query: np.ndarray, seqs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k over a candidate subset, from the stored vectors (ties: lower seq first,
    as an exact index orders them)."""
    scores_all, ids_all = [], []
    dim = query.shape[0]
    for start in range(0, len(seqs), 20000):
        checkpoint()  # a search for every row (one feeding an aggregate) scores them all
        part = seqs[start:start + 20000].tolist()
        rows = store.query(f"SELECT seq, embedding FROM chunks WHERE seq IN ({','.join('?' * len(part))})",
                           part)
        if not rows:
            continue
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)
        # row by row (einsum), not BLAS's matrix-vector product, whose float32 sum for a row
        # depends on its place in the block: equal scores came out 1 ulp apart (30 of 1,015
        # searches at 100k near-duplicates), so the tie order below was not lower seq first,
        # and it changed with which other rows were read (`_rescored` reads fewer)
        scores_all.append(np.einsum("ij,j->i", vectors, query))
        ids_all.append(np.array([r[0] for r in rows], dtype=np.int64))
    if not scores_all:
        return np.empty(0, np.float32), np.empty(0, np.int64)
    scores, ids = np.concatenate(scores_all), np.concatenate(ids_all)
    top = np.lexsort((ids, -scores))[:k]
    return scores[top], ids[top]


FP16_ERROR = 1.1e-3
"""Bound on |a candidate's score from its float16 code - its exact score| (unit vectors, the
only ones stored: index.py). Float16 rounds each coordinate to within 2^-11 of its value, so
the scan's codes (of the vectors) are off by at most 2^-11 |q|.|x| <= 4.9e-4, and the IVF's
(of the residual to a cell's centroid, |r| <= 2) by at most 9.8e-4; float32 sums add < 5e-5.
Measured on bench_vs_chroma's 100k rows: at most 4.0e-4 (scan, unfiltered), 2.5e-4 (filtered)."""


def _rescored(store: ChunkStore, query: np.ndarray, approx: np.ndarray, seqs: np.ndarray,
              k: int) -> tuple[np.ndarray, np.ndarray]:
    """`_exact` over the candidates (`seqs`, their float16-code scores `approx`) that can be in
    the exact top k: a candidate more than 2 x FP16_ERROR below the k-th best code score is
    beaten, exactly, by k others, so reading its vector cannot change the answer. Under a filter
    the index answers k + 64 candidates and ~31 of them are left to read at 100k (each a SQLite
    row, ~5 us); unfiltered, the near-duplicates' 20 lie within the bound. Should a row of the
    pool be gone (a concurrent delete), every candidate is read, as before, so the answer stays
    the top k of all of them."""
    if len(seqs) > k:  # (on lists: numpy calls on 20 scores cost more than they save)
        approx_list = approx.tolist()
        floor = sorted(approx_list, reverse=True)[k - 1] - 2 * FP16_ERROR
        if min(approx_list) < floor:
            pool = seqs[[i for i, score in enumerate(approx_list) if score >= floor]]
            scores, ids = _exact(store, query, pool, len(pool))
            if len(ids) == len(pool):
                return scores[:k], ids[:k]
    return _exact(store, query, seqs, k)


def vector_top(store: ChunkStore, index: VectorIndex, query: np.ndarray, k: int, filters: Conditions,
               allowed_seqs: Callable[[str, list[Any]], np.ndarray] | None = None,
               ) -> tuple[np.ndarray, np.ndarray]:
    """(cosine similarities, seqs) of the true top-k among rows matching `filters`, whose
    seqs come from `allowed_seqs` (the storage's AllowedSeqs; None: read here)."""
    allowed = (allowed_seqs or partial(matching_seqs, store))(*filter_sql(filters)) if filters else None
    if allowed is not None and len(allowed) == 0:
        return np.empty(0, np.float32), np.empty(0, np.int64)
    scores, ids, exact = index.search(query, k, allowed)
    if not exact:  # approximate candidates: the true scores from the stored vectors decide
        scores, ids = _rescored(store, query, scores, ids, k)
    expected = min(k, index.live if allowed is None else len(allowed))
    if len(ids) < expected:  # IVF came back short under a selective filter
        scores, ids = _exact(store, query, allowed if allowed is not None else
                             np.array([r[0] for r in store.query("SELECT seq FROM chunks")], np.int64), k)
    return scores, ids


def keyword_top(store: ChunkStore, text: str, k: int, filters: Conditions) -> dict[int, float]:
    """BM25 (SQLite FTS5) scores scaled to [0, 1] by the best one, for rows matching `filters`."""
    words = WORD.findall(text)
    if not words:
        return {}
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    where, args = filter_sql(filters, alias="c.")
    sql = ("SELECT f.rowid, bm25(chunks_fts) AS s FROM chunks_fts f JOIN chunks c ON c.seq = f.rowid "
           "WHERE chunks_fts MATCH ?" + (f" AND {where}" if where else "") + " ORDER BY s LIMIT ?")
    rows = store.query(sql, [match, *args, k])
    if not rows:
        return {}
    best = max(-r[1] for r in rows) or 1.0
    return {int(r[0]): max(0.0, -r[1]) / best for r in rows}


def similarities(store: ChunkStore, query: np.ndarray, seqs: list[int]) -> dict[int, float]:
    if not seqs:
        return {}
    scores, ids = _exact(store, query, np.array(seqs, np.int64), len(seqs))
    return dict(zip(ids.tolist(), scores.tolist(), strict=True))


def load_rows(store: ChunkStore, seqs: list[int]) -> dict[int, tuple[Any, ...]]:
    out: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(seqs), 900):
        if start % 18000 == 0:
            checkpoint()
        part = seqs[start:start + 900]
        for r in store.query("SELECT seq, id, chunk_id, content, metadata FROM chunks WHERE seq IN "
                             f"({','.join('?' * len(part))})", part):
            out[int(r[0])] = r[1:]
    return out
