"""MindsDB's REST API as its docs/openapi.yml documents it, sent to a real `kbsql serve`:
the documented request bodies, and what a body the spec types differently (a name that is
not a string) does. Each such body is refused in one line, never stored under a made-up
name (`str(None)` made a view `None`, and a table `None` in the user's own database)."""

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
