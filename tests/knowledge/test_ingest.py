"""Ingestion rules: id/content/metadata defaults, DataFrames, bad rows, progress bars."""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pandas as pd
import pytest

from kbsql.engine import Engine
from kbsql.interface.errors import BadRequest
from tests.knowledge.conftest import HASH_MODEL, sql, sql_error, table


def _kb(engine: Engine, **spec) -> object:
    engine.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": HASH_MODEL, **spec})
    return engine.catalog.knowledge_base("mindsdb", "kb")


def test_defaults_id_from_id_column_or_md5_and_every_other_column_is_metadata(engine: Engine) -> None:
    record = _kb(engine)
    engine.insert_rows(record, [{"content": "no id here", "color": "red", "n": 3},
                                {"id": 7, "content": "has an id", "color": "blue"}])
    rows = {r["id"]: r for r in table(engine, "SELECT * FROM kb")}
    digest = hashlib.md5(b"no id here").hexdigest()[:16]
    assert set(rows) == {digest, "7"}
    assert rows[digest]["metadata"]["color"] == "red" and rows[digest]["metadata"]["n"] == 3
    assert "content" not in rows["7"]["metadata"] and "id" not in rows["7"]["metadata"]
    assert rows[digest]["chunk_id"] == f"{digest}:content:1of1:0to10"


def test_configured_columns(engine: Engine) -> None:
    record = _kb(engine, id_column="doc", content_columns=["title", "body"], metadata_columns=["lang"])
    engine.insert_rows(record, [{"doc": "a1", "title": "Hello", "body": "World of text", "lang": "en",
                                 "ignored": 1}])
    rows = table(engine, "SELECT chunk_id, metadata FROM kb")
    assert sorted(r["chunk_id"] for r in rows) == ["a1:body:1of1:0to13", "a1:title:1of1:0to5"]
    assert all(set(r["metadata"]) == {"lang", "chunk_index", "content_column", "start_char", "end_char",
                                      "original_doc_id", "original_row_index", "source"} for r in rows)


def test_a_bad_row_stores_nothing_of_the_insert(engine: Engine) -> None:
    record = _kb(engine, id_column="doc")
    engine.insert_rows(record, [{"doc": 1, "content": "kept"}])
    with pytest.raises(BadRequest, match="content columns"):
        engine.insert_rows(record, [{"doc": 2, "content": "fine"}, {"doc": 3, "body": "wrong column"}])
    with pytest.raises(BadRequest, match="id column 'doc'"):
        engine.insert_rows(record, [{"doc": 4, "content": "fine"}, {"content": "no id"}])
    assert [r["id"] for r in table(engine, "SELECT id FROM kb")] == ["1"]
    message = sql_error(engine, "INSERT INTO kb (doc, body) VALUES (5, 'x')")
    assert "content" in message
    assert [r["id"] for r in table(engine, "SELECT id FROM kb WHERE content = 'kept'")] == ["1"]


def test_dataframe_values_become_plain_json(engine: Engine) -> None:
    record = _kb(engine)
    frame = pd.DataFrame({"id": np.array([1, 2], dtype=np.int64), "content": ["one", "two"],
                          "score": [0.5, np.nan], "when": [pd.Timestamp("2024-01-02 03:04:05"), pd.NaT],
                          "day": [dt.date(2024, 1, 2), None]})
    assert engine.insert_rows(record, frame) == 2
    rows = {r["id"]: r["metadata"] for r in table(engine, "SELECT id, metadata FROM kb")}
    assert rows["1"]["score"] == 0.5 and rows["2"]["score"] is None
    assert rows["1"]["when"] == "2024-01-02 03:04:05" and rows["2"]["when"] is None
    assert rows["1"]["day"] == "2024-01-02"
    assert table(engine, "SELECT id FROM kb WHERE score >= 0.5") == [{"id": "1"}]


def test_an_object_column_gives_its_keys_and_other_metadata_text_stays_whole(engine: Engine) -> None:
    """As MindsDB's KnowledgeBaseTable makes metadata: an object value (a PUT row's
    "metadata": {...}, a struct) is merged, its keys found by a filter (they were nested under
    "metadata", so `WHERE genre = 'news'` found nothing); text that is not an object, a JSON
    array or object written as text included, is kept whole under its column's name."""
    record = _kb(engine)
    engine.insert_rows(record, [{"id": "a", "content": "one", "metadata": {"genre": "news", "year": 2024}},
                                {"id": "b", "content": "two", "metadata": "[1,2]"}])
    sql(engine, "INSERT INTO kb SELECT 'c' AS id, 'three' AS content, struct_pack(7) AS metadata")
    sql(engine, "INSERT INTO kb (id, content, metadata) VALUES ('d', 'four', '{\"genre\": \"news\"}')")
    rows = {r["id"]: r["metadata"] for r in table(engine, "SELECT id, metadata FROM kb")}
    assert rows["a"]["genre"] == "news" and rows["a"]["year"] == 2024 and "metadata" not in rows["a"]
    assert rows["b"]["metadata"] == "[1,2]" and rows["c"]["_0"] == 7
    assert rows["d"]["metadata"] == '{"genre": "news"}'
    assert table(engine, "SELECT id FROM kb WHERE genre = 'news'") == [{"id": "a"}]
    with pytest.raises(BadRequest, match="chunk_index"):  # a merged key may not pass for kbsql's own
        engine.insert_rows(record, [{"id": "e", "content": "five", "metadata": {"chunk_index": 9}}])


def test_progress_bar_for_long_inserts(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    """Outside a notebook the front end (`kbsql.connect`'s bars) draws tqdm on stderr; the
    engine itself only reports (tests/architecture: nothing else imports tqdm)."""
    from kbsql.client import Client
    from kbsql.notebook.progress_bar import notebook_or_tqdm

    _kb(engine)
    client = Client(engine, progress=notebook_or_tqdm)
    client.knowledge_bases.insert("kb", [{"id": i, "content": f"row {i}"} for i in range(1200)])
    assert "insert into kb" in capsys.readouterr().err  # auto: >= 1000 rows
    client.knowledge_bases.insert("kb", [{"id": i, "content": f"row {i}"} for i in range(10)], progress=True)
    assert "10/10" in capsys.readouterr().err
    client.knowledge_bases.insert("kb", [{"id": i, "content": f"row {i}"} for i in range(1200)],
                                  progress=False)
    assert "insert into kb" not in capsys.readouterr().err
    engine.insert_rows(engine.catalog.knowledge_base("mindsdb", "kb"),
                       [{"id": i, "content": f"row {i}"} for i in range(1200)])
    assert capsys.readouterr().err == ""  # the engine alone draws nothing
    assert sql(engine, "DELETE FROM kb").affected_rows == 1200
    assert table(engine, "SELECT id FROM kb WHERE content = 'row 5'") == []
