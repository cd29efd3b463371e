"""MindsDB's REST API as its docs/openapi.yml documents it, sent to a real `kbsql serve`:
the documented request bodies, and what a body the spec types differently (a name that is
not a string) does. Each such body is refused in one line, never stored under a made-up
name (`str(None)` made a view `None`, and a table `None` in the user's own database); a
documented field kbsql cannot honour (an agent's `skills`, a new `engine` on PUT) is refused,
not dropped; one it can (ISO 8601 job dates) is taken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from tests.conftest import start_server, stop_server

VIEWS = "/api/projects/mindsdb/views"
NOT_NAMES: list[Any] = [None, 7, "", ["x"], {"a": 1}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    base = tmp_path_factory.mktemp("openapi")
    with duckdb.connect(str(base / "shop.duckdb")) as con:
        con.execute("CREATE TABLE orders AS SELECT * FROM (VALUES ('A1B', 3), ('3XZ', 5)) t(order_id, n)")
    proc, url = start_server(base / "server")
    with httpx.Client(base_url=url, timeout=60) as client:
        created = client.post("/api/databases", json={"database": {
            "name": "shop", "engine": "duckdb", "parameters": {"database": str(base / "shop.duckdb")}}})
        assert created.status_code == 201, created.text
        yield client, base
    stop_server(proc)


def refused(response: httpx.Response, words: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["title"] == "Wrong argument" and words in body["detail"] and "\n" not in body["detail"], body


def test_a_view_s_name_and_query_must_be_text(served: tuple[httpx.Client, Path]) -> None:
    """openapi.yml's POST /api/projects/{projectName}/views: `view.name` and `view.query`
    are strings. Any other name made a view called 'None', '7', "['x']" (or one with no
    name at all) and answered 201."""
    client, _ = served
    for name in NOT_NAMES:
        refused(client.post(VIEWS, json={"view": {"name": name, "query": "SELECT 1"}}),
                "'name' must be")
    refused(client.post(VIEWS, json={"view": {"name": "v_num", "query": 5}}), "'query' must be")
    refused(client.put(f"{VIEWS}/v_num", json={"view": {"query": 5}}), "'query' must be")
    assert client.get(VIEWS).json() == []
    made = client.post(VIEWS, json={"view": {"name": "v1", "query": "SELECT * FROM shop.orders"}})
    assert made.status_code == 201 and made.json()["name"] == "v1", made.text
    assert [v["name"] for v in client.get(VIEWS).json()] == ["v1"]


def test_a_table_s_name_and_select_must_be_text(served: tuple[httpx.Client, Path]) -> None:
    """openapi.yml's POST /api/databases/{databaseName}/tables: `table.name` and
    `table.select` are strings. Any other name wrote a table 'None', '7', "['x']" (or,
    for "", one named 'main') into the user's duckdb file, then answered 404 "Table not
    found"."""
    client, base = served
    for name in NOT_NAMES:
        refused(client.post("/api/databases/shop/tables",
                            json={"table": {"name": name, "select": "SELECT 1 AS a"}}), "'name' must be")
    refused(client.post("/api/databases/shop/tables", json={"table": {"name": "t5", "select": 5}}),
            "'select' must be")
    assert client.get("/api/databases/shop/tables").json() == [{"name": "orders", "type": "data"}]
    made = client.post("/api/databases/shop/tables",
                       json={"table": {"name": "big", "select": "SELECT * FROM shop.orders WHERE n > 3",
                                       "replace": False}})
    assert made.status_code == 201 and made.json() == {"name": "big", "type": "data"}, made.text
    client.delete("/api/databases/shop/tables/big")
    with duckdb.connect(str(base / "shop.duckdb"), read_only=True) as con:
        assert con.execute("SELECT table_name FROM information_schema.tables").fetchall() == [("orders",)]


AGENTS = "/api/projects/mindsdb/agents"


def test_an_agent_s_skills_are_refused_not_dropped(served: tuple[httpx.Client, Path]) -> None:
    """openapi.yml's Agent has `skills` ("one or more skills that an agent can use"), as
    MindsDB's CREATE AGENT ... USING skills = [...] does. kbsql has no skills: the agent was
    made without them, answering from no data, with 201. Now a 400 naming `data`, where its
    knowledge bases and tables go, from REST and SQL alike; nothing is stored."""
    client, _ = served
    model = {"provider": "kbsql", "model_name": "retrieval"}
    for body in ({"name": "a_sk", "skills": ["docs"]}, {"name": "a_sk", "model": model, "skills": ["s"]}):
        answer = client.post(AGENTS, json={"agent": body})
        assert answer.status_code == 400, answer.text
        detail = answer.json()["detail"]
        assert "skills" in detail and '"data"' in detail and "\n" not in detail, detail
    assert client.get(f"{AGENTS}/a_sk").status_code == 404
    statement = "CREATE AGENT a_sk USING skills = ['docs_skill']"
    sql = client.post("/api/sql/query", json={"query": statement}).json()
    assert sql["type"] == "error" and "skills" in sql["error_message"], sql
    empty = client.post(AGENTS, json={"agent": {"name": "a_sk", "skills": []}})  # nothing is lost
    assert empty.status_code == 201, empty.text
    updated = client.put(f"{AGENTS}/a_sk", json={"agent": {"skills": ["docs_skill"]}})
    assert updated.status_code == 400 and "skills" in updated.json()["detail"], updated.text
    asked = client.post(f"{AGENTS}/a_sk/completions", json={"messages": [{"question": "hi", "answer": None}]})
    assert asked.status_code == 200 and set(asked.json()["message"]) >= {"role", "content"}, asked.text


def test_a_source_s_engine_is_not_changed_by_put(served: tuple[httpx.Client, Path]) -> None:
    """openapi.yml's PUT /api/databases/{databaseName} sends `engine` beside the new
    `parameters`. An engine other than the source's was ignored: the parameters were merged
    into the old engine's (a duckdb source pointed at a sqlite file) with 200. Now a 400
    naming both engines; the same engine in another spelling or alias still updates."""
    client, base = served
    before = client.get("/api/databases/shop").json()
    moved = client.put("/api/databases/shop", json={"database": {
        "engine": "sqlite", "parameters": {"database": str(base / "other.db")}}})
    refused(moved, "duckdb")
    assert "sqlite" in moved.json()["detail"]
    assert client.get("/api/databases/shop").json()["connection_data"] == before["connection_data"]
    same = client.put("/api/databases/shop", json={"database": {
        "engine": "DuckDB", "parameters": {"database": str(base / "shop.duckdb")}}})
    assert same.status_code == 200 and same.json()["engine"] == "duckdb", same.text
    dead = {"host": "127.0.0.1", "port": 9, "user": "u", "password": "pw", "database": "d"}
    made = client.post("/api/databases", json={"database": {"name": "pg", "engine": "postgresql",
                                                            "parameters": dead}})
    assert made.status_code == 201, made.text
    alias = client.put("/api/databases/pg", json={"database": {"engine": "postgres",
                                                               "parameters": {"port": 10}}})
    assert alias.status_code == 200 and alias.json()["connection_data"]["port"] == 10, alias.text


def test_a_database_name_or_engine_that_is_not_text_is_named_so(served: tuple[httpx.Client, Path]) -> None:
    """openapi.yml's POST /api/databases: `database.name` and `database.engine` are strings.
    A number was answered 'Missing "name" field' (it was there) or '"engine" 5 makes a
    project' (it makes nothing), in /api/databases/status too."""
    client, _ = served
    for body, words in (({"name": 5, "engine": "duckdb"}, '"name" must be a string'),
                        ({"name": "n5", "engine": 5}, '"engine" must be a string')):
        answer = client.post("/api/databases", json={"database": {**body, "parameters": {}}})
        refused(answer, words)
        assert "Missing" not in answer.json()["detail"] and "project" not in answer.json()["detail"]
    status = client.post("/api/databases/status", json={"engine": 5}).json()
    assert status["status"] == "connection_error" and '"engine" must be a string' in status["detail"], status
    refused(client.post("/api/databases", json={"database": {"name": None, "engine": "duckdb"}}),
            'Missing "name" field')


def test_the_views_routes_answer_mindsdb_s_titles(served: tuple[httpx.Client, Path]) -> None:
    """The views routes' errors carry the titles of MindsDB's namespaces/views.py (their
    details already did): they read 'Not Found', 'Conflict', 'Bad Request'."""
    client, _ = served
    client.post(VIEWS, json={"view": {"name": "v_titled", "query": "SELECT 1 AS a"}})
    for response, status, title in (
            (client.get("/api/projects/nowhere/views"), 404, "Project not found"),
            (client.get(f"{VIEWS}/nope"), 404, "View not found"),
            (client.delete(f"{VIEWS}/nope"), 404, "View not found"),
            (client.post(VIEWS, json={"view": {"name": "v_titled", "query": "SELECT 2"}}), 409,
             "Name conflict"),
            (client.post(VIEWS, json={}), 400, "Wrong argument"),
            (client.post(VIEWS, json={"view": {"name": "v_x"}}), 400, "Wrong argument"),
            (client.put(f"{VIEWS}/v_new", json={"view": {}}), 400, "Wrong argument")):
        assert response.status_code == status and response.json()["title"] == title, response.text


def test_a_job_s_dates_may_be_iso_8601_as_the_spec_types_them(served: tuple[httpx.Client, Path]) -> None:
    """openapi.yml's Job has `start_at` / `end_at` of `format: date-time` (RFC 3339:
    '2030-01-01T00:00:00Z'); MindsDB's parser and kbsql's took only 'YYYY-MM-DD[ HH:MM:SS]'
    and answered "Can't parse date". Now an offset is turned into UTC, the time jobs keep."""
    client, _ = served
    job = {"name": "j_iso", "query": "SELECT 1", "schedule_str": "every 1 hour",
           "start_at": "2030-01-01T00:00:00Z", "end_at": "2031-01-01T02:30:00+02:00"}
    made = client.post("/api/projects/mindsdb/jobs", json={"job": job})
    assert made.status_code == 200, made.text
    assert made.json()["start_at"].startswith("2030-01-01 00:00:00"), made.json()
    assert made.json()["end_at"].startswith("2031-01-01 00:30:00"), made.json()
    bad = client.post("/api/projects/mindsdb/jobs", json={"job": {**job, "name": "j_bad", "end_at": "soon"}})
    assert bad.status_code == 400 and "ISO 8601" in bad.json()["detail"], bad.text
    assert client.delete("/api/projects/mindsdb/jobs/j_iso").status_code == 204
