"""The FAISS cache and the SQLite rows always agree: true filtered top-k on flat, scan and IVF
indexes, deletes, a stale cache file, and a second engine on the same data directory (the
scan's own deletes, updates and reopening: test_scan_index.py)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge import index as index_mod
from kbsql.engine.models.embeddings import HashEmbedder
from tests.knowledge.conftest import HASH_MODEL, sql, sql_error, table

WORDS = ("river mountain forest desert ocean city village castle bridge tower garden harbor "
         "valley island canyon glacier meadow volcano lake road").split()


def _rows(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": i, "content": " ".join(rng.choices(WORDS, k=8)), "group": i % 7, "tag": f"t{i % 3}"}
            for i in range(n)]


def _kb(engine: Engine, rows: list[dict]) -> None:
    engine.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": HASH_MODEL,
                                             "metadata_columns": ["group", "tag"]})
    engine.insert_rows(engine.catalog.knowledge_base("mindsdb", "kb"), rows)


def _brute(rows: list[dict], query: str, keep, k: int) -> list[str]:
    emb = HashEmbedder(256)
    subset = [r for r in rows if keep(r)]
    sims = emb.embed([r["content"] for r in subset]) @ emb.embed([query])[0]
    order = sorted(range(len(subset)), key=lambda i: (-round(float(sims[i]), 5), subset[i]["id"]))
    return [round(float(sims[i]), 5) for i in order[:k]]


@pytest.mark.parametrize("kind", ["flat", "scan", "ivf"])
def test_filtered_search_is_the_true_top_k(tmp_path: Path, monkeypatch, kind: str) -> None:
    monkeypatch.setattr(index_mod, "APPROX_THRESHOLD", 10**9 if kind == "flat" else 500)
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 0 if kind == "ivf" else 10**9)
    rows = _rows(1500)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        handle = eng.knowledge.handle(eng.catalog.knowledge_base("mindsdb", "kb"))
        assert handle.index.kind == kind
        for where, keep in [("group = 3", lambda r: r["group"] == 3),
                            ("group IN (1, 2) AND tag != 't0'",
                             lambda r: r["group"] in (1, 2) and r["tag"] != "t0"),
                            ("id < 40", lambda r: r["id"] < 40),
                            ("tag LIKE 't2'", lambda r: r["tag"] == "t2")]:
            got = table(eng, f"SELECT id, metadata, distance FROM kb WHERE content = 'river castle' "
                             f"AND {where} LIMIT 15")
            assert len(got) == 15 and all(keep({**g["metadata"], "id": int(g["id"])}) for g in got)
            expected = _brute(rows, "river castle", keep, 15)
            assert [round(1 - g["distance"], 5) for g in got] == pytest.approx(expected, abs=1e-4)


def test_ivf_deletes_leave_the_index_then_it_turns_exact(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(index_mod, "APPROX_THRESHOLD", 400)
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 0)
    rows = _rows(1000)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        index = eng.knowledge.handle(eng.catalog.knowledge_base("mindsdb", "kb")).index
        assert index.kind == "ivf"
        sql(eng, "DELETE FROM kb WHERE group = 0")
        assert index.live == index.index.ntotal == sum(r["group"] != 0 for r in rows)
        got = table(eng, "SELECT metadata FROM kb WHERE content = 'ocean lake' LIMIT 50")
        assert len(got) == 50 and all(g["metadata"]["group"] != 0 for g in got)
        sql(eng, "DELETE FROM kb WHERE group IN (1, 2, 3, 4, 5)")  # under half the threshold: exact
        assert index.kind == "flat" and index.live == sum(r["group"] > 5 for r in rows)
        sql(eng, "DELETE FROM kb WHERE id >= 0")
        assert table(eng, "SELECT id FROM kb WHERE content = 'ocean'") == []


def test_a_second_engine_sees_writes_of_the_first(tmp_path: Path) -> None:
    rows = _rows(300)
    with Engine(tmp_path / "shared") as a:
        _kb(a, rows[:200])
        with Engine(tmp_path / "shared") as b:  # e.g. a notebook next to `kbsql serve`
            assert len(table(b, "SELECT id FROM kb WHERE content = 'glacier'")) == 10
            a.insert_rows(a.catalog.knowledge_base("mindsdb", "kb"),
                          [{"id": 9999, "content": "zebra unicorn zebra", "group": 1, "tag": "new"}])
            got = table(b, "SELECT id FROM kb WHERE content = 'zebra unicorn' LIMIT 1")
            assert got[0]["id"] == "9999"
            sql(a, "DELETE FROM kb WHERE id = 9999")
            got = table(b, "SELECT id FROM kb WHERE content = 'zebra unicorn' LIMIT 300")
            assert "9999" not in {g["id"] for g in got} and len(got) == 200


def test_a_repeated_filter_sees_every_write_whoever_made_it(tmp_path: Path) -> None:
    """The rows a filter allows are kept between searches (knowledge/allowed.py): the same
    filtered search after an insert, an upsert moving a row out of the filter, a delete,
    from this engine or another one, answers from the rows as they are now."""
    rows = _rows(300)
    query = "SELECT id FROM kb WHERE content = 'zebra unicorn' AND group = 1 LIMIT 3"
    with Engine(tmp_path / "shared") as a:
        _kb(a, rows)
        record = a.catalog.knowledge_base("mindsdb", "kb")
        with Engine(tmp_path / "shared") as b:
            before = [g["id"] for g in table(b, query)]
            assert before == [g["id"] for g in table(b, query)] and "9999" not in before
            a.insert_rows(record, [{"id": 9999, "content": "zebra unicorn zebra", "group": 1, "tag": "x"}])
            for eng in (a, b):
                assert [g["id"] for g in table(eng, query)] == ["9999", *before[:2]]
            a.insert_rows(record, [{"id": 9999, "content": "zebra unicorn zebra", "group": 2, "tag": "x"}])
            for eng in (a, b):
                assert [g["id"] for g in table(eng, query)] == before
                assert table(eng, query.replace("group = 1", "group = 2"))[0]["id"] == "9999"
            b.insert_rows(record, [{"id": 9999, "content": "zebra unicorn zebra", "group": 1, "tag": "x"}])
            assert [g["id"] for g in table(a, query)] == ["9999", *before[:2]]
            sql(b, "DELETE FROM kb WHERE id = 9999")
            for eng in (a, b):
                assert [g["id"] for g in table(eng, query)] == before


def test_filters_equal_in_python_but_not_in_sqlite_are_kept_apart(engine: Engine) -> None:
    """1 == 1.0 in Python, but SQLite's LIKE compares their text ('1' and '1.0'): the rows
    kept for `group LIKE 1` must not answer `group LIKE 1.0` (they did, before the kept
    filters were told apart by type and repr)."""
    _kb(engine, _rows(60))
    query = "SELECT id FROM kb WHERE content = 'river' AND group LIKE {} LIMIT 60"
    ones = {g["id"] for g in table(engine, query.format(1))}
    assert ones == {str(i) for i in range(60) if i % 7 == 1}
    assert table(engine, query.format("1.0")) == []
    assert {g["id"] for g in table(engine, query.format(1))} == ones


def test_a_stale_or_broken_cache_file_is_caught_up(tmp_path: Path) -> None:
    rows = _rows(400)
    data = tmp_path / "e"
    with Engine(data) as eng:
        _kb(eng, rows[:200])
        kb_dir = eng.knowledge.storage_dir(eng.catalog.knowledge_base("mindsdb", "kb"))
    old = tmp_path / "old.faiss"
    shutil.copy(kb_dir / "index.faiss", old)  # the cache as of 200 rows
    with Engine(data) as eng:
        handle = eng.knowledge.handle(eng.catalog.knowledge_base("mindsdb", "kb"))
        assert handle.index.index is not None and handle.index.index.ntotal == 200  # loaded, not rebuilt
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "kb"), rows[200:])
        sql(eng, "DELETE FROM kb WHERE group = 5")
    shutil.copy(old, kb_dir / "index.faiss")  # as if the process died before rewriting it
    expected = sum(r["group"] != 5 for r in rows)
    with Engine(data) as eng:
        got = table(eng, "SELECT id, metadata FROM kb WHERE content = 'meadow' LIMIT 1000")
        assert len(got) == expected and all(g["metadata"]["group"] != 5 for g in got)
    (kb_dir / "index.faiss").write_bytes(b"garbage")
    with Engine(data) as eng:
        assert len(table(eng, "SELECT id FROM kb WHERE content = 'meadow' LIMIT 1000")) == expected


def test_plain_select_limit_offset_and_columns(engine: Engine) -> None:
    _kb(engine, _rows(30))
    got = sql(engine, "SELECT chunk_id, tag AS t FROM kb LIMIT 5 OFFSET 10")
    assert got.column_names == ["chunk_id", "t"]
    assert [r[0].split(":")[0] for r in got.data] == [str(i) for i in range(10, 15)]
    assert got.data[0][1] == "t1"


def test_delete_refuses_search_terms_and_keeps_rows(engine: Engine) -> None:
    _kb(engine, _rows(20))
    message = sql_error(engine, "DELETE FROM kb WHERE content = 'river'")
    assert "search terms" in message
    assert len(table(engine, "SELECT id FROM kb")) == 20
    assert sql(engine, "DELETE FROM kb WHERE id IN (1, 2, 3) AND tag = 't1'").affected_rows == 1
    got = table(engine, "SELECT content FROM kb WHERE id = 4")
    assert [r["content"] for r in got] == [_rows(20)[4]["content"]]


def test_ivf_cells_are_trained_on_rows_from_oldest_to_newest() -> None:
    """A retrain comes when the rows double: a sample of the oldest rows only would train the
    cells on the half the index already had, and new topics would crowd a few cells."""
    import numpy as np

    class Rows:  # the store's batched read, rows 0..n-1 whose vector's first value is its position
        def __init__(self, n: int):
            self.n = n

        def vectors_after(self, seq: int, dim: int, batch: int = 4096):
            for start in range(0, self.n, batch):
                count = min(batch, self.n - start)
                vectors = np.zeros((count, dim), np.float32)
                vectors[:, 0] = np.arange(start, start + count)
                yield np.arange(start, start + count), vectors

    from kbsql.engine.knowledge.index_build import training_sample

    for live, size in ((100_000, 50_560), (60_000, 39_160), (1_000, 5_000), (7, 3)):
        sample = training_sample(Rows(live), 4, live, size)
        positions = sample[:, 0]
        assert len(sample) == min(size, live)
        assert len(np.unique(positions)) == len(sample)  # no row twice
        assert positions.min() == 0 and positions.max() >= live - live / len(sample) - 1  # to the newest


@pytest.mark.parametrize("dim", [8, 256, 384])
def test_a_search_text_embeds_as_the_same_text_stored(dim: int) -> None:
    """A search embeds its one text on its own path (HashEmbedder._embed_one); the vector must
    be the one an insert's batch gives the same text, bit for bit, or a stored copy of the
    question would not score as exactly as it was stored (and ties would reorder)."""
    texts = [" ".join(row["content"].split()[:n]) for n, row in zip(range(1, 9), _rows(8), strict=True)]
    texts += ["", "   ", "?!", "River river RIVER", "café naïve", "river " * 300]
    emb = HashEmbedder(dim)
    batch = emb.embed(texts)
    for i, text in enumerate(texts):
        one = HashEmbedder(dim).embed([text])  # (a fresh cache: the slot is computed, not looked up)
        assert one.dtype == batch.dtype and one.shape == (1, dim)
        assert one.tobytes() == batch[i:i + 1].tobytes(), text
