"""Rows over HTTP: `PUT /api/projects/{p}/knowledge_bases/{kb}` with `{"knowledge_base": {"rows": [...]}}`
and SQL through `POST /api/sql/query`, against a real `kbsql serve`."""

from __future__ import annotations

import warnings

import httpx

from tests.knowledge.conftest import HASH_MODEL

ONE = "SELECT chunk_content FROM kb WHERE id = 1"


def test_put_rows_then_search_over_http(server_url: str) -> None:
    base = f"{server_url}/api/projects/mindsdb/knowledge_bases"
    created = httpx.post(base, json={"knowledge_base": {
        "name": "kb", "embedding_model": HASH_MODEL, "metadata_columns": ["kind"]}})
    assert created.status_code == 201, created.text
    rows = [{"id": i, "content": f"note {i} about {'rivers' if i % 2 else 'mountains'}", "kind": i % 2}
            for i in range(20)]
    put = httpx.put(f"{base}/kb", json={"knowledge_base": {"rows": rows}})
    assert put.status_code == 200 and put.json()["name"] == "kb"
    query = "SELECT id, metadata, relevance FROM kb WHERE content = 'rivers' AND kind = 1 LIMIT 3"
    answer = httpx.post(f"{server_url}/api/sql/query", json={"query": query}).json()
    assert answer["type"] == "table" and answer["column_names"] == ["id", "metadata", "relevance"]
    assert len(answer["data"]) == 3 and all(r[1]["kind"] == 1 and r[2] > 0 for r in answer["data"])
    # an upsert and a bad row over HTTP: the bad request stores nothing
    bad_rows = [{"id": 1, "content": "replaced"}, {"id": 99, "text": "no content"}]
    put = httpx.put(f"{base}/kb", json={"knowledge_base": {"rows": bad_rows}})
    assert put.status_code == 400 and "content" in put.json()["detail"]
    count = httpx.post(f"{server_url}/api/sql/query", json={"query": ONE})
    assert count.json()["data"] == [["note 1 about rivers"]]
    inserted = httpx.post(f"{server_url}/api/sql/query", json={
        "query": "INSERT INTO kb (id, content, kind) VALUES (1, 'replaced', 5)"}).json()
    assert inserted["type"] == "ok" and inserted["affected_rows"] == 1
    count = httpx.post(f"{server_url}/api/sql/query", json={"query": ONE})
    assert count.json()["data"] == [["replaced"]]


def test_put_rows_with_null_content_keeps_the_stored_document(server_url: str) -> None:
    base = f"{server_url}/api/projects/mindsdb/knowledge_bases"
    created = httpx.post(base, json={"knowledge_base": {"name": "kb", "embedding_model": HASH_MODEL}})
    assert created.status_code == 201, created.text
    put = httpx.put(f"{base}/kb", json={"knowledge_base": {"rows": [{"id": 1, "content": "the original"}]}})
    assert put.status_code == 200, put.text
    put = httpx.put(f"{base}/kb", json={"knowledge_base": {"rows": [
        {"id": 1, "content": None}, {"id": 2, "content": "   "}, {"id": 3, "content": "new"}]}})
    assert put.status_code == 200, put.text
    assert put.json()["inserted_rows"] == 1  # only the row with content was stored
    answer = httpx.post(f"{server_url}/api/sql/query", json={"query": "SELECT id, chunk_content FROM kb"})
    assert sorted(answer.json()["data"]) == [["1", "the original"], ["3", "new"]]
    inserted = httpx.post(f"{server_url}/api/sql/query", json={
        "query": "INSERT INTO kb (id, content) VALUES (1, NULL), (4, 'four')"}).json()
    assert inserted["type"] == "ok" and inserted["affected_rows"] == 1
    answer = httpx.post(f"{server_url}/api/sql/query", json={"query": ONE})
    assert answer.json()["data"] == [["the original"]]


def test_client_insert_counts_stored_rows_on_both_transports(client) -> None:
    """`client.knowledge_bases.insert` reports rows stored, embedded and over HTTP alike."""
    import pandas as pd

    client.knowledge_bases.create("kb", embedding_model=HASH_MODEL)
    assert client.knowledge_bases.insert("kb", [{"id": 1, "content": "kept"}]) == 1
    frame = pd.DataFrame({"id": [1, 2, 3], "content": [float("nan"), "two", "three"]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert client.knowledge_bases.insert("kb", frame, batch_size=2) == 2
    # the user is told, embedded and remote alike, and the warning points at their line
    skipped = [w for w in caught if "skipped" in str(w.message)]
    assert len(skipped) == 1 and "1 of 3 rows" in str(skipped[0].message)
    assert skipped[0].filename == __file__
    rows = client.sql("SELECT id, chunk_content FROM kb").to_pandas()
    assert sorted(rows.itertuples(index=False, name=None)) == [("1", "kept"), ("2", "two"), ("3", "three")]
