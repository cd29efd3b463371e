"""The chunk rows of one knowledge base in SQLite: the source of truth.

Why SQLite: one insert is one transaction (atomic under kill -9 thanks to WAL), metadata
filters become SQL, FTS5 gives BM25 for hybrid search, and two processes (a notebook and
`kbsql serve`) can share the file. Embeddings are stored as float32 BLOBs so the FAISS
index is only a cache that can always be rebuilt or caught up from here.

Versioning: `meta.version` grows by one per committed write; `seq` (the FAISS id) grows
monotonically; `tombstones` records (seq, version) of every removed chunk. An index tagged
(version v, max_seq s) is brought up to date by adding rows with seq > s and removing
tombstones with version > v.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.sqlite_files import ReadOnlyData, open_read_only, private_file
from kbsql.interface.control import checkpoint, current

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_id ON chunks(id);
CREATE TABLE IF NOT EXISTS tombstones (seq INTEGER PRIMARY KEY, version INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS tombstones_by_version ON tombstones(version);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
INSERT OR IGNORE INTO meta (key, value) VALUES ('version', 0);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(content, content='chunks', content_rowid='seq',
    tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks
    WHEN (SELECT value FROM meta WHERE key = 'fts_deferred') IS NULL BEGIN
    INSERT INTO chunks_fts(rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT OR REPLACE INTO tombstones (seq, version)
        VALUES (old.seq, (SELECT value FROM meta WHERE key = 'version'));
END;
"""

FTS_DEFERRED = "fts_deferred"
"""A `meta` key set only inside a write transaction (`ChunkWriter.replace`) while it inserts
rows whose full-text entries it then adds in one statement: FTS5 indexes a batch in one
`INSERT ... SELECT` 2x faster than row by row from the trigger (it flushes its pending terms
at every trigger statement). Never committed, so every other writer keeps the trigger."""


def metadata_expr(column: str, alias: str = "") -> str:
    """The SQL reading one metadata key (shared by filters and their indexes).

    A quoted JSON path label (`$."key"`) takes any key except one holding `"`: SQLite's
    path syntax has no escape for it, so such a key is read with json_each (slower, and
    not indexable, but it matches)."""
    literal = column.replace("'", "''")
    if '"' in column:
        return f"(SELECT value FROM json_each({alias}metadata) WHERE key = '{literal}')"
    return f"json_extract({alias}metadata, '$.\"{literal}\"')"


class ChunkStore:
    """One SQLite file with two connections: a writer and a reader, each behind its own lock.

    Two because a long insert holds its write transaction while it embeds; searches in
    other threads must keep reading the last committed state meanwhile (WAL allows it).
    """

    def __init__(self, path: Path, read_only: bool = False):
        self.path = path
        self.write_lock = threading.RLock()
        self.lock = threading.RLock()  # the reader's
        self.read_only = read_only
        self._dim: int | None = None  # (`dim`: kept once set)
        if read_only:  # one immutable connection serves as both (writes fail on it)
            self.db = self.reader = open_read_only(path)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        private_file(path)
        self.db = self._connect()
        with self.write_lock:
            self.db.executescript(_SCHEMA)
            self._migrate_insert_trigger()
        self.reader = self._connect()

    def _migrate_insert_trigger(self) -> None:
        """Files made before the `fts_deferred` flag have the unconditional insert trigger:
        replace it (in one transaction, so no writer ever sees neither)."""
        row = self.db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'"
                              " AND name = 'chunks_ai'").fetchone()
        if row is None or FTS_DEFERRED in row[0]:
            return
        create = _SCHEMA[_SCHEMA.index("CREATE TRIGGER IF NOT EXISTS chunks_ai"):]
        create = create[:create.index("END;") + 4]
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("DROP TRIGGER chunks_ai")
            self.db.execute(create)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def close(self) -> None:
        with self.write_lock, self.lock:
            self.db.close()
            if self.reader is not self.db:
                self.reader.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; bumps the version first so the delete trigger tags
        tombstones with the version this transaction commits."""
        if self.read_only:
            raise ReadOnlyData()
        with self.write_lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("UPDATE meta SET value = value + 1 WHERE key = 'version'")
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # SQLite has already rolled back after some errors
                    self.db.execute("ROLLBACK")  # (a full disk, a damaged page): the cause is raised
                raise

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one committed state (a read transaction on the reader)."""
        with self.lock:
            self.reader.execute("BEGIN")
            try:
                yield
            finally:
                self.reader.execute("COMMIT")

    def batches(self, sql: str, args: Any, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of one SELECT, `size` at a time, from one committed state, on a connection
        of their own: a long read (every chunk of a knowledge base, streamed into DuckDB) holds
        neither the shared reader's lock, which every search of this knowledge base takes, nor
        more than one batch of rows in Python. The connection closes when the read ends or is
        abandoned (a statement stopped mid-scan)."""
        db = self._own_connection()
        try:
            db.execute("BEGIN")
            cursor = db.execute(sql, args)
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            db.close()

    def _own_connection(self) -> sqlite3.Connection:
        """A connection for one long read, apart from the shared reader and its lock."""
        return open_read_only(self.path) if self.read_only else \
            sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60)

    def count_where(self, where: str, args: Any) -> int:
        """count(*) of the chunks `where` keeps, without reading them (`SELECT count(*) FROM
        kb` over 200,000 chunks read every row into Python: 1.2-2.8 s), on a connection of
        its own. The statement's deadline and cancel stop it: SQLite asks the handler every
        10,000 steps, and a nonzero answer interrupts the count."""
        db = self._own_connection()
        work = current()
        if work is not None:
            db.set_progress_handler(lambda: int(work.stopped or work.expired()), 10_000)
        try:
            sql = "SELECT count(*) FROM chunks" + (f" WHERE {where}" if where else "")
            return int(db.execute(sql, args).fetchone()[0])
        except sqlite3.OperationalError:
            checkpoint()  # interrupted by the handler: the deadline's (or the cancel's) line
            raise
        finally:
            db.close()

    def every_vector(self, size: int = 4096) -> Iterator[list[tuple[Any, ...]]]:
        """(seq, embedding, store version) of every row in seq order, `size` at a time, from
        one committed state on a connection of its own (a scan's compaction, index.py)."""
        return self.batches("SELECT seq, embedding, (SELECT value FROM meta WHERE key = 'version') "
                            "FROM chunks ORDER BY seq", (), size)

    def index_metadata(self, columns: list[str]) -> None:
        """An expression index per declared metadata column, so `WHERE col = x` (and IN,
        ranges) reads a few rows instead of parsing every row's JSON (130 ms at 100k chunks).
        The expression must be exactly the one `search.filter_sql` writes."""
        if self.read_only:
            return
        with self.write_lock:
            for column in columns:
                if '"' in column:  # read through json_each: no expression index possible
                    continue
                name = "meta_" + hashlib.md5(column.encode()).hexdigest()[:12]
                self.db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON chunks({metadata_expr(column)})")

    # reads ------------------------------------------------------------------------------
    def version(self) -> int:
        with self.lock:
            return int(self.reader.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0])

    def dim(self) -> int | None:
        """The vectors' dimension, None before the first insert. Read from the file until it
        is set, then kept: it is written once, by the first insert (`set_dim` only when none is
        stored; other sizes are refused), and never removed, so every search need not read it
        again (one SQL statement and a lock round trip of a ~1 ms search, issue 37)."""
        if self._dim is not None:
            return self._dim
        with self.lock:
            row = self.reader.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        if row:
            self._dim = int(row[0])
        return self._dim

    def count(self) -> int:
        with self.lock:
            return int(self.reader.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def query(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return self.reader.execute(sql, args).fetchall()

    def vectors_after(self, seq: int, dim: int,
                      batch: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, vectors) of rows with seq > `seq`, in batches (memory stays bounded)."""
        last = seq
        while True:
            rows = self.query("SELECT seq, embedding FROM chunks WHERE seq > ? ORDER BY seq LIMIT ?",
                              (last, batch))
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)
            yield ids, vectors
            last = int(ids[-1])

    def removed_since(self, version: int, max_seq: int) -> np.ndarray:
        rows = self.query("SELECT seq FROM tombstones WHERE version > ? AND seq <= ?", (version, max_seq))
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def max_seq(self) -> int:
        # sqlite_sequence survives deletes, so a re-used seq can never alias an old vector
        row = self.query("SELECT seq FROM sqlite_sequence WHERE name = 'chunks'")
        return int(row[0][0]) if row else 0
