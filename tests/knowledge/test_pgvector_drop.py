"""DROP DATABASE of a pgvector data source a knowledge base stores its chunks in: refused with
one line naming the knowledge base, embedded and over HTTP (HTTP 200, `type: error`), also
with `IF EXISTS`; the chunks stay in PostgreSQL and the knowledge base keeps answering.
Once the knowledge base is dropped, the data source drops. A real PostgreSQL 16 + pgvector
(the `pgvector_dsn` fixture) and, for HTTP, a real `kbsql serve` on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import duckdb
import httpx
import psycopg
import pytest

from kbsql.engine import Engine
from tests.conftest import start_server, stop_server
from tests.knowledge.conftest import HASH_MODEL

Run = Callable[[str], dict[str, Any]]


@pytest.fixture(params=["embedded", "http"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Run]:
    """One SQL statement -> the answer's JSON body, as a user of either door sees it."""
    if request.param == "embedded":
        engine = Engine(tmp_path / "engine")
        yield lambda query: engine.query(query).to_json()
        engine.close()
        return
    server, url = start_server(tmp_path / "server")
    with httpx.Client(base_url=url, timeout=60) as http:
        def over_http(query: str) -> dict[str, Any]:
            response = http.post("/api/sql/query", json={"query": query, "context": {"db": "mindsdb"}})
            assert response.status_code == 200, response.text  # SQL errors are 200, type error
            return response.json()

        yield over_http
    stop_server(server)


def ok(run: Run, query: str) -> dict[str, Any]:
    body = run(query)
    assert body["type"] in ("ok", "table"), body
    return body


def test_a_pgvector_source_storing_a_kb_cannot_be_dropped(run: Run, pgvector_dsn: str) -> None:
    url = urlparse(pgvector_dsn)
    params = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"),
              "user": url.username, "password": url.password}
    ok(run, f"CREATE DATABASE vdb WITH ENGINE = 'pgvector', PARAMETERS = {json.dumps(params)}")
    ok(run, f"CREATE KNOWLEDGE_BASE kb USING storage = vdb.kb_chunks, "
            f"embedding_model = {json.dumps(HASH_MODEL)}")
    ok(run, "INSERT INTO kb (id, content) VALUES (1, 'refunds take five days'), (2, 'shipping is free')")

    for statement in ("DROP DATABASE vdb", "DROP DATABASE IF EXISTS vdb", "drop database VDB"):
        body = run(statement)
        assert body["type"] == "error", body
        assert set(body) == {"type", "error_code", "error_message", "context"}
        assert body["error_message"] == (
            "Cannot drop database 'vdb': knowledge base 'mindsdb.kb' stores its chunks there; "
            "drop the knowledge base first")

    # nothing was lost: the source, its table and the KB's answers are all still there
    databases = [r[0] for r in ok(run, "SHOW DATABASES")["data"]]
    assert "vdb" in databases
    with psycopg.connect(pgvector_dsn) as db:
        assert db.execute("SELECT count(*) FROM kb_chunks").fetchone()[0] == 2
    found = ok(run, "SELECT id FROM kb WHERE content = 'how long do refunds take' LIMIT 1")
    assert found["data"] == [["1"]]

    ok(run, "DROP KNOWLEDGE_BASE kb")
    ok(run, "DROP DATABASE vdb")
    assert "vdb" not in [r[0] for r in ok(run, "SHOW DATABASES")["data"]]
    ok(run, "DROP DATABASE IF EXISTS vdb")


def test_the_refusals_hold_on_a_shared_catalog(tmp_path: Path, pgvector_dsn: str) -> None:
    """Two engines on one PostgreSQL catalog: what one creates keeps the other from dropping
    (the check runs in the deleting transaction of the shared catalog)."""
    source = tmp_path / "shop.duckdb"
    with duckdb.connect(str(source)) as con:
        con.execute("CREATE TABLE items AS SELECT 1 AS id")
    with Engine(tmp_path / "a", catalog_url=pgvector_dsn) as a, \
            Engine(tmp_path / "b", catalog_url=pgvector_dsn) as b:
        shop = json.dumps({"database": str(source)})
        offline = json.dumps({"provider": "kbsql", "model_name": "retrieval"})
        reads = json.dumps({"tables": ["shop.items"]})
        for query in ("CREATE PROJECT team",
                      f"CREATE KNOWLEDGE_BASE team.kb USING embedding_model = {json.dumps(HASH_MODEL)}",
                      f"CREATE DATABASE shop WITH ENGINE = 'duckdb', PARAMETERS = {shop}",
                      f"CREATE AGENT reader USING model = {offline}, data = {reads}"):
            result = a.query(query)
            assert result.type == "ok", result
        assert b.query("DROP DATABASE team").error_message == (
            "Cannot drop project 'team': it contains knowledge base 'kb'; "
            "drop them first (DROP KNOWLEDGE_BASE, DROP AGENT)")
        assert b.query("DROP DATABASE shop").error_message == (
            "Cannot drop database 'shop': agent 'mindsdb.reader' reads its tables (data.tables); "
            "drop the agent or ALTER AGENT its data first")
        assert {p["name"] for p in a.list_projects()} == {"mindsdb", "team"}
        assert a.catalog.find_datasource("shop") is not None
        assert b.query("DROP KNOWLEDGE_BASE team.kb").type == "ok"
        assert b.query("DROP AGENT reader").type == "ok"
        assert b.query("DROP DATABASE team").type == "ok"
        assert b.query("DROP DATABASE shop").type == "ok"
        assert {p["name"] for p in a.list_projects()} == {"mindsdb"}
        assert a.catalog.find_datasource("shop") is None
