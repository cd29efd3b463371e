"""The full-text index of the local store follows its rows: an insert adds its rows' entries
in one statement after them (store.FTS_DEFERRED) instead of row by row from the trigger;
what a user notices must not change: keyword search finds exactly the stored rows, after
inserts, upserts, deletes and a failed insert, and every other writer keeps the trigger."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from kbsql.engine.knowledge.ingest import Chunk
from kbsql.engine.knowledge.local import LocalStorage, keyword_top
from kbsql.engine.knowledge.store import FTS_DEFERRED, ChunkStore

OLD_TRIGGER = """CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, content) VALUES (new.seq, new.content);
END"""


def chunks(docs: dict[str, str]) -> tuple[list[str], list[Chunk], np.ndarray]:
    made = [Chunk(d, f"{d}:content:1of1", text, {"n": i}) for i, (d, text) in enumerate(docs.items())]
    vectors = np.eye(len(made), 4, dtype=np.float32)
    return list(docs), made, vectors


def put(storage: LocalStorage, docs: dict[str, str]) -> None:
    with storage.write() as w:
        if w.dim is None:
            w.set_dim(4)
        w.replace(*chunks(docs), "2026-01-01 00:00:00")


def found(storage: LocalStorage, word: str) -> set[str]:
    seqs = keyword_top(storage.store, word, 10_000, [])
    rows = storage.load_rows(list(seqs))
    return {r[0] for r in rows.values()}


def assert_consistent(storage: LocalStorage) -> None:
    db = storage.store.db
    # FTS5's own check of an external-content index against its content table
    db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
    assert db.execute("SELECT count(*) FROM meta WHERE key = ?", (FTS_DEFERRED,)).fetchone()[0] == 0


def test_insert_upsert_delete_keep_keyword_search_exact(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "kb")
    put(storage, {str(i): f"alpha common row{i}" for i in range(300)})
    assert found(storage, "alpha") == {str(i) for i in range(300)}
    assert found(storage, "row7") == {"7"}
    put(storage, {"7": "beta common replaced", "1000": "beta common new"})  # upsert + new
    assert found(storage, "row7") == set()
    assert found(storage, "beta") == {"7", "1000"}
    assert len(found(storage, "alpha")) == 299
    storage.delete([])  # everything
    assert found(storage, "common") == set()
    assert_consistent(storage)
    storage.close()


def test_failed_insert_leaves_nothing_and_the_flag_is_never_committed(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "kb")
    put(storage, {"1": "gamma kept"})
    ids, made, vectors = chunks({"2": "delta lost", "3": "delta lost too"})
    made[1].chunk_id = None  # type: ignore[assignment]  # NOT NULL: the second row fails
    with pytest.raises(sqlite3.IntegrityError), storage.write() as w:
        w.replace(ids, made, vectors, "2026-01-01 00:00:00")
    assert found(storage, "delta") == set()
    assert found(storage, "gamma") == {"1"}
    assert_consistent(storage)
    put(storage, {"4": "delta after"})
    assert found(storage, "delta") == {"4"}
    assert_consistent(storage)
    storage.close()


def test_other_writers_keep_the_trigger(tmp_path: Path) -> None:
    """A row inserted by any other statement (another tool, an older kbsql) is indexed."""
    storage = LocalStorage(tmp_path / "kb")
    put(storage, {"1": "epsilon one"})
    with storage.store.write() as db:
        db.execute("INSERT INTO chunks (id, chunk_id, content, metadata, embedding, updated_at)"
                   " VALUES ('2', '2:c', 'epsilon two', '{}', ?, 'now')",
                   (np.zeros(4, np.float32).tobytes(),))
    assert found(storage, "epsilon") == {"1", "2"}
    assert_consistent(storage)
    storage.close()


def test_a_file_with_the_old_trigger_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "kb" / "chunks.sqlite"
    storage = LocalStorage(tmp_path / "kb")
    put(storage, {"1": "zeta before"})
    storage.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TRIGGER chunks_ai")
    db.execute(OLD_TRIGGER)
    db.close()
    assert FTS_DEFERRED not in _trigger_sql(path)
    storage = LocalStorage(tmp_path / "kb")
    assert FTS_DEFERRED in _trigger_sql(path)
    put(storage, {"2": "zeta after"})
    assert found(storage, "zeta") == {"1", "2"}  # each row indexed once
    assert_consistent(storage)
    storage.close()
    ChunkStore(path).close()  # opening again changes nothing


def _trigger_sql(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_ai'").fetchone()[0]
    finally:
        db.close()
