"""PostgreSQL's own faults under a server on a shared catalog: it stops, it comes back.

A real `kbsql serve` on a PostgreSQL of its own (started here, so it can be stopped and
started again without touching the session's). While PostgreSQL is away every request that
needs it answers 503 `application/problem+json` with Retry-After (never 500, never a
quietly empty result), `/api/status` still answers and says the catalog does not; once
PostgreSQL is back the same server process serves again by itself, nothing lost.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

import kbsql
from kbsql.interface import Unavailable
from kbsql.server.process import spawn
from tests import pgvector_server

HASH_MODEL = {"provider": "kbsql", "model_name": "hash-64"}


@pytest.fixture
def own_pg() -> Iterator[pgvector_server.PgVectorServer]:
    """A PostgreSQL + pgvector this test may stop and start (not the session's)."""
    if os.environ.get(pgvector_server.DSN_ENV):
        pytest.skip("an external PostgreSQL ($KBSQL_TEST_PGVECTOR_DSN) cannot be restarted here")
    server = pgvector_server.start_for_test("the PostgreSQL fault tests")
    yield server
    server.stop()


def test_a_postgresql_restart_answers_503_then_serves_again(own_pg, tmp_path):
    server = spawn(tmp_path / "s", env={"KBSQL_CATALOG_URL": own_pg.dsn})
    search = {"query": "SELECT id FROM docs WHERE content = 'row text' AND n < 10 LIMIT 3"}
    kb_path = "/api/projects/mindsdb/knowledge_bases/docs"
    try:
        with kbsql.connect(server.url) as client, httpx.Client(base_url=server.url) as http:
            client.knowledge_bases.create("docs", embedding_model=HASH_MODEL, metadata_columns=["n"])
            client.knowledge_bases.insert("docs", [{"id": i, "content": f"row {i} text", "n": i}
                                                   for i in range(20)])
            assert http.get("/api/status").json()["catalog"]["ok"] is True

            # an insert in flight when PostgreSQL stops: 200 (it committed first) or 503,
            # and either every one of its rows is there afterwards or none is
            big = [{"id": f"big{i}", "content": f"bulk row {i} " + "word " * 30, "n": 100}
                   for i in range(4000)]
            in_flight: list[httpx.Response] = []
            worker = threading.Thread(target=lambda: in_flight.append(
                httpx.put(f"{server.url}{kb_path}", json={"knowledge_base": {"rows": big}}, timeout=120)))
            worker.start()
            time.sleep(0.5)
            own_pg.halt("fast")  # as an operator's restart: sessions are cut
            worker.join(timeout=120)
            assert in_flight and in_flight[0].status_code in (200, 503), in_flight[0].text
            answers = [http.post("/api/sql/query", json=search), http.get(kb_path),
                       http.put(kb_path, json={"knowledge_base": {"rows": [{"id": 99, "content": "x"}]}}),
                       http.post("/api/sql/query", json={"query": "SELECT * FROM information_schema.tables"})]
            for answer in answers:
                assert answer.status_code == 503, answer.text
                assert answer.headers["content-type"] == "application/problem+json"
                assert int(answer.headers["retry-after"]) >= 1
                body = answer.json()
                assert body["title"] == "Storage unavailable" and "127.0.0.1" in body["detail"]
                assert pgvector_server.PASSWORD not in answer.text
            with pytest.raises(Unavailable):  # the client keeps the class: callers can retry on it
                client.sql(search["query"]).to_pandas()
            status = http.get("/api/status")
            assert status.status_code == 200
            assert status.json()["catalog"]["ok"] is False
            assert pgvector_server.PASSWORD not in status.text

            own_pg.start_again()
            # the pool reconnects on its own schedule (backing off while PostgreSQL was away)
            deadline = time.monotonic() + 90
            while True:
                answer = http.post("/api/sql/query", json=search)
                if answer.status_code == 200 or time.monotonic() > deadline:
                    break
                assert answer.status_code == 503, answer.text
                time.sleep(0.2)
            found = answer.json()["data"]
            assert len(found) == 3 and all(int(r[0]) < 10 for r in found)
            client.knowledge_bases.insert("docs", [{"id": 20, "content": "row 20, after", "n": 20}])
            rows = set(client.sql("SELECT id FROM docs").to_pandas()["id"])
            assert {str(i) for i in range(21)} <= rows
            bulk = {r for r in rows if r.startswith("big")}
            assert len(bulk) in (0, len(big)), len(bulk)  # whole or not at all
            assert len(bulk) == len(big) or in_flight[0].status_code == 503  # acknowledged: kept
            assert len(rows) == 21 + len(bulk)
            assert http.get("/api/status").json()["catalog"]["ok"] is True
        assert server.process.poll() is None  # the same process throughout
        assert "Traceback" not in server.log_text() and "unhandled error" not in server.log_text()
    finally:
        server.stop()
