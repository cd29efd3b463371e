"""docs/rest/ (mindsdb/mindsdb): knowledge_bases/insert.mdx and alter.mdx (PUT with rows,
query, alter fields), files/upload|list|delete.mdx, agents/update.mdx and sql.mdx (params,
response_format), against a real `kbsql serve` with the requests as the docs write them."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from tests.conftest import start_server, stop_server
from tests.dialect.conftest import ORDERS
from tests.knowledge.fakes import FakeProvider

KB = "/api/projects/mindsdb/knowledge_bases"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    base = tmp_path_factory.mktemp("rest")
    db = base / "sample.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE orders (order_id VARCHAR, product VARCHAR, notes VARCHAR)")
        con.executemany("INSERT INTO orders VALUES (?, ?, ?)", ORDERS)
    proc, url = start_server(base / "server")
    with httpx.Client(base_url=url, timeout=60) as client:
        create = ("CREATE DATABASE sample_data WITH ENGINE = 'duckdb', "
                  f"PARAMETERS = {{\"database\": \"{db}\"}}")
        sql = client.post("/api/sql/query", json={"query": create})
        assert sql.json()["type"] == "ok", sql.text
        yield client
    stop_server(proc)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider()
    yield server
    server.close()


def _kb(api: httpx.Client, name: str, **extra: object) -> None:
    body = {"name": name, "embedding_model": {"provider": "kbsql", "model_name": "hash-64"},
            "metadata_columns": ["product"], "content_columns": ["notes"], "id_column": "order_id",
            **extra}
    assert api.post(KB, json={"knowledge_base": body}).status_code == 201


def _count(api: httpx.Client, name: str) -> int:
    answer = api.post("/api/sql/query", json={"query": f"SELECT count(*) AS n FROM {name}"})
    return answer.json()["data"][0][0]


def test_insert_rows_and_query_together(api: httpx.Client) -> None:
    """rest/knowledge_bases/insert.mdx: the example body sends `rows` and `query` together."""
    _kb(api, "ins_kb")
    body = {"knowledge_base": {
        "rows": [{"order_id": "123", "product": "Widget A", "notes": "Great product, would buy again"},
                 {"order_id": "124", "product": "Widget B", "notes": "Poor quality"}],
        "query": "SELECT * FROM sample_data.orders"}}
    answer = api.put(f"{KB}/ins_kb", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["inserted_rows"] == 5
    assert _count(api, "ins_kb") == 5
    only_query = api.put(f"{KB}/ins_kb", json={"knowledge_base": {
        "query": "SELECT order_id, product, 'changed' AS notes FROM sample_data.orders "
                 "WHERE order_id = 'A1B'"}})
    assert only_query.status_code == 200 and only_query.json()["inserted_rows"] == 1
    assert _count(api, "ins_kb") == 5  # the id was replaced, not added


def test_insert_errors_are_400_and_store_nothing(api: httpx.Client) -> None:
    _kb(api, "err_kb")
    for body, words in (({"query": "SELECT * FROM sample_data.nope"}, "nope"),
                        ({"query": "DROP TABLE x"}, "SELECT"),
                        ({"urls": ["https://docs.mindsdb.com"]}, "not supported by the local engine"),
                        ({"bogus": 1}, "bogus"),
                        ({}, "rows")):
        answer = api.put(f"{KB}/err_kb", json={"knowledge_base": body})
        assert answer.status_code == 400, (body, answer.text)
        assert words in answer.json()["detail"], (body, answer.text)
    assert api.put(f"{KB}/nope_kb", json={"knowledge_base": {"query": "SELECT 1"}}).status_code == 404
    assert _count(api, "err_kb") == 0


def test_alter_by_put(api: httpx.Client, fake: FakeProvider) -> None:
    """rest/knowledge_bases/alter.mdx: api_key rotation, reranking model, columns, id_column."""
    embedding = {"provider": "openai", "model_name": "text-embedding-3-small", "api_key": "sk-old",
                 "base_url": f"{fake.url}/v1"}
    _kb(api, "alt_kb", embedding_model=embedding)
    body = {"knowledge_base": {
        "embedding_model": {"api_key": "sk-xxx"},
        "reranking_model": {"provider": "openai", "model_name": "gpt-4o", "api_key": "sk-xxx",
                            "base_url": f"{fake.url}/v1"},
        "content_columns": ["notes"], "metadata_columns": ["product"], "id_column": "order_id"}}
    answer = api.put(f"{KB}/alt_kb", json=body)
    assert answer.status_code == 200, answer.text
    kb = answer.json()
    assert kb["embedding_model"]["model_name"] == "text-embedding-3-small"
    assert set(kb["embedding_model"]["api_key"]) == {"*"}
    assert kb["reranking_model"]["model_name"] == "gpt-4o"
    before = len(fake.requests)
    row = {"order_id": "1", "notes": "x", "product": "p"}
    api.put(f"{KB}/alt_kb", json={"knowledge_base": {"rows": [row]}})
    assert fake.requests[before][2]["Authorization"] == "Bearer sk-xxx"
    changed = api.put(f"{KB}/alt_kb", json={"knowledge_base": {"embedding_model": {"model_name": "other"}}})
    assert changed.status_code == 400 and "api_key" in changed.json()["detail"]


def test_files_upload_list_delete(api: httpx.Client) -> None:
    """rest/files/upload.mdx, list.mdx, delete.mdx: multipart upload as mindsdb_sdk sends it;
    the file is the table files.<name> (MindsDB's files database), listed with its row count
    and columns; deleting a missing file is MindsDB's 400 "Error deleting file"."""
    csv = b"id,body\n1,alpha\n2,beta\n"
    answer = api.put("/api/files/notes", data={"original_file_name": "notes.csv", "name": "notes",
                                               "source_type": "file"},
                     files={"file": ("notes.csv", io.BytesIO(csv))})
    assert answer.status_code == 200, answer.text
    listed = api.get("/api/files").json()
    assert {"name": "notes", "row_count": 2, "columns": ["id", "body"]} in listed
    rows = api.post("/api/sql/query", json={"query": "SELECT body FROM files.notes ORDER BY id"}).json()
    assert rows["data"] == [["alpha"], ["beta"]]
    assert api.delete("/api/files/notes").status_code == 200
    assert "notes" not in [f["name"] for f in api.get("/api/files").json()]
    missing = api.delete("/api/files/notes")
    assert missing.status_code == 400 and missing.json()["title"] == "Error deleting file"
    bad = api.put("/api/files/x", files={"other": ("x.csv", io.BytesIO(csv))})
    assert bad.status_code == 400


def test_sdk_style_dataframe_upload_has_no_extension(api: httpx.Client, tmp_path: Path) -> None:
    """mindsdb_sdk names the part after the table (no extension) and sends CSV."""
    answer = api.put("/api/files/plain", files={"file": ("plain", io.BytesIO(b"a,b\n1,2\n"))})
    assert answer.status_code == 200 and answer.json() == ""  # MindsDB answers an empty string
    assert {"name": "plain", "row_count": 1, "columns": ["a", "b"]} in json.loads(api.get("/api/files").text)


def test_sql_response_formats(api: httpx.Client) -> None:
    """rest/sql.mdx: response_format null (one JSON), 'sse' and 'jsonlines' (header, then rows)."""
    query = "SELECT order_id FROM sample_data.orders ORDER BY order_id"
    whole = api.post("/api/sql/query", json={"query": query}).json()
    assert whole["data"] == [["3XZ"], ["A1B"], ["Q7P"]]
    lines = api.post("/api/sql/query", json={"query": query, "response_format": "jsonlines"})
    assert lines.headers["content-type"].startswith("application/jsonlines")
    parsed = [json.loads(x) for x in lines.text.splitlines()]
    assert parsed[0]["type"] == "table" and parsed[0]["column_names"] == ["order_id"]
    assert [r for batch in parsed[1:] for r in batch] == whole["data"]
    events = api.post("/api/sql/query", json={"query": query, "response_format": "sse"})
    assert events.headers["content-type"].startswith("text/event-stream")
    data = [json.loads(x[len("data: "):]) for x in events.text.split("\n\n") if x.startswith("data: ")]
    assert data[0]["column_names"] == ["order_id"] and data[1] == whole["data"]
    error = api.post("/api/sql/query", json={"query": "SELECT * FROM nope.t", "response_format": "jsonlines"})
    assert json.loads(error.text.splitlines()[0])["type"] == "error"
    bad = api.post("/api/sql/query", json={"query": query, "response_format": "xml"})
    assert bad.status_code == 400


def test_knowledge_base_rest_lifecycle(api: httpx.Client, fake: FakeProvider) -> None:
    """rest/knowledge_bases/create.mdx (the example body), get.mdx, list.mdx, query.mdx
    (`SELECT * FROM my_kb` over /api/sql/query) and delete.mdx."""
    body = {"knowledge_base": {
        "name": "doc_kb", "storage": {"database": "my_kb_chromadb", "table": "default_collection"},
        "embedding_model": {"provider": "openai", "model_name": "text-embedding-3-small", "api_key": "sk-xxx",
                            "base_url": f"{fake.url}/v1"},
        "reranking_model": {"provider": "openai", "model_name": "gpt-4o", "api_key": "sk-xxx",
                            "base_url": f"{fake.url}/v1"},
        "content_columns": ["notes"], "metadata_columns": ["product"], "id_column": "order_id"}}
    # the example's storage is the reference's own chromadb database: refused in one line
    refused = api.post(KB, json=body)
    assert refused.status_code == 400 and "my_kb_chromadb" in refused.json()["detail"]
    assert "\n" not in refused.json()["detail"] and "sk-xxx" not in refused.text
    del body["knowledge_base"]["storage"]  # the local store, as when `storage` is left out
    created = api.post(KB, json=body)
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "doc_kb"
    assert "sk-xxx" not in created.text
    assert api.get(f"{KB}/doc_kb").json()["name"] == "doc_kb"
    assert "doc_kb" in [k["name"] for k in api.get(KB).json()]
    api.put(f"{KB}/doc_kb", json={"knowledge_base": {"query": "SELECT * FROM sample_data.orders"}})
    result = api.post("/api/sql/query", json={"query": "SELECT * FROM doc_kb;"}).json()
    assert result["column_names"] == ["id", "chunk_id", "chunk_content", "metadata", "relevance", "distance"]
    a1b = next(r for r in result["data"] if r[0] == "A1B")
    assert a1b[1] == "A1B:notes:1of1:0to20" and a1b[3]["product"] == "Wireless Mouse"
    assert api.delete(f"{KB}/doc_kb").status_code == 200
    assert api.get(f"{KB}/doc_kb").status_code == 404


def test_agent_rest_lifecycle(api: httpx.Client) -> None:
    """rest/agents/create.mdx, get.mdx, list.mdx, query.mdx (the stream), update.mdx, delete.mdx,
    with the offline model standing in for gpt-4o."""
    agents = "/api/projects/mindsdb/agents"
    api.post(KB, json={"knowledge_base": {"name": "agent_docs", "embedding_model": {
        "provider": "kbsql", "model_name": "hash-64"}}})
    rows = [{"id": 1, "content": "MindsDB is a platform"}]
    api.put(f"{KB}/agent_docs", json={"knowledge_base": {"rows": rows}})
    body = {"agent": {"name": "my_agent", "model": {"provider": "kbsql", "model_name": "retrieval"},
                      "data": {"knowledge_bases": ["mindsdb.agent_docs"], "tables": []},
                      "prompt_template": "mindsdb.agent_docs stores documentation of MindsDB"}}
    created = api.post(agents, json=body)
    assert created.status_code == 201, created.text
    assert api.get(f"{agents}/my_agent").json()["prompt_template"].startswith("mindsdb.agent_docs")
    assert "my_agent" in [a["name"] for a in api.get(agents).json()]
    stream = api.post(f"{agents}/my_agent/completions/stream",
                      json={"messages": [{"question": "What is MindsDB?", "answer": ""}]})
    events = [json.loads(x[len("data: "):]) for x in stream.text.split("\n\n") if x.startswith("data: ")]
    assert events[0]["type"] == "start" and events[-1] == {"type": "end"}
    assert any("platform" in e.get("output", "") for e in events)
    model = {"provider": "openai", "model_name": "gpt-4.1", "api_key": "sk-xxx",
             "base_url": "http://127.0.0.1:9/v1"}
    updated = api.put(f"{agents}/my_agent", json={"agent": {"model": model}})
    assert updated.status_code == 200, updated.text
    assert updated.json()["model"]["model_name"] == "gpt-4.1"
    assert updated.json()["data"]["knowledge_bases"] == ["mindsdb.agent_docs"]
    assert api.delete(f"{agents}/my_agent").status_code == 204  # as MindsDB's code answers (issue 23)
    assert api.get(f"{agents}/my_agent").status_code == 404
