"""MindsDB's `/api/databases` through a real `kbsql serve` (rest/databases/*.mdx and
mindsdb/api/http/namespaces/databases.py): each route with MindsDB's codes, titles and
bodies, over the same catalog as CREATE DATABASE (SQL and REST see the same sources)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from tests.conftest import start_server, stop_server

DEAD_PG = {"host": "127.0.0.1", "port": 9, "user": "u", "password": "s3cret", "database": "d"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    base = tmp_path_factory.mktemp("databases")
    for name in ("shop", "shop2"):
        with duckdb.connect(str(base / f"{name}.duckdb")) as con:
            con.execute("CREATE TABLE orders AS SELECT * FROM (VALUES ('A1B', 3), ('3XZ', 5)) t(order_id, n)")
    proc, url = start_server(base / "server")
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client, base
    stop_server(proc)


def problem(response: httpx.Response, status: int, title: str, detail: str = "") -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["title"] == title and detail in body["detail"], body
    return body


def sql(client: httpx.Client, query: str) -> dict[str, Any]:
    return client.post("/api/sql/query", json={"query": query}).json()


def test_list_and_get_built_in_databases(served: tuple[httpx.Client, Path]) -> None:
    client, _ = served
    listed = client.get("/api/databases")
    assert listed.status_code == 200
    by_name = {d["name"]: d for d in listed.json()}
    assert by_name["information_schema"] == {"name": "information_schema", "type": "system", "id": None,
                                             "engine": None, "visible": True, "deletable": False}
    assert by_name["mindsdb"]["type"] == "project" and isinstance(by_name["mindsdb"]["id"], int)
    assert by_name["mindsdb"]["deletable"] is False
    assert by_name["log"] == {"name": "log", "type": "system", "id": None, "engine": None, "visible": True,
                              "deletable": False}
    assert "files" not in by_name and "df" not in by_name  # MindsDB's list; they answer by name
    assert client.get("/api/databases/files").json()["engine"] == "files"
    assert client.get("/api/databases/log/tables").json() == [{"name": "llm_log", "type": "system view"},
                                                              {"name": "jobs_history", "type": "system view"}]
    assert sql(client, "SELECT COUNT(*) AS n FROM log.llm_log")["data"] == [[0]]  # no model called yet
    shown = sql(client, "SHOW FULL DATABASES")
    assert shown["column_names"] == ["Database", "TYPE", "ENGINE"]
    assert ["information_schema", "system", None] in shown["data"]
    assert ["log", "system", None] in shown["data"]
    assert ["files", "data", "files"] in shown["data"]  # kbsql's own, in SQL as in MindsDB's SHOW
    assert client.get("/api/databases/mindsdb").json() == {"name": "mindsdb", "type": "project",
                                                           "id": by_name["mindsdb"]["id"], "engine": None}
    problem(client.get("/api/databases/nowhere"), 404, "Database not found",
            "Database with name nowhere does not exist.")


def test_create_a_source_in_rest_and_use_it_in_sql(served: tuple[httpx.Client, Path]) -> None:
    client, base = served
    problem(client.post("/api/databases", json={}), 400, "Wrong argument", 'Must provide "database"')
    problem(client.post("/api/databases", json={"database": {"engine": "duckdb"}}), 400, "Wrong argument",
            'Missing "name" field')
    problem(client.post("/api/databases", json={"database": {"name": "x"}}), 400, "Wrong argument",
            'Missing "engine" field')
    shop = {"database": str(base / "shop.duckdb")}
    body = {"database": {"name": "shop", "engine": "duckdb", "parameters": shop}}
    created = client.post("/api/databases", json=body)
    assert created.status_code == 201, created.text
    assert {k: created.json()[k] for k in ("name", "type", "engine")} == {"name": "shop", "type": "data",
                                                                            "engine": "duckdb"}
    problem(client.post("/api/databases", json=body), 409, "Name conflict",
            "Database with name shop already exists.")
    assert sql(client, "SELECT sum(n) AS n FROM shop.orders")["data"] == [[8]]
    assert "shop" in [r[0] for r in sql(client, "SHOW DATABASES")["data"]]
    record = client.get("/api/databases/shop?check_connection=true").json()
    assert record["type"] == "data" and record["engine"] == "duckdb" and record["id"] == created.json()["id"]
    assert record["connection_status"] == {"success": True, "error_message": None}
    assert client.get("/api/databases/shop/tables").json() == [{"name": "orders", "type": "data"}]
    assert client.get("/api/databases/shop/tables/orders").json() == {"name": "orders", "type": "data"}
    problem(client.get("/api/databases/shop/tables/nope"), 404, "Table not found")
    big = {"name": "big", "select": "SELECT * FROM shop.orders WHERE n > 1"}
    made = client.post("/api/databases/shop/tables", json={"table": big})
    assert made.status_code == 201 and made.json() == {"name": "big", "type": "data"}, made.text
    assert client.delete("/api/databases/shop/tables/big").status_code == 204  # written back, then dropped
    assert client.get("/api/databases/shop/tables").json() == [{"name": "orders", "type": "data"}]


def test_a_source_is_stored_without_connecting_unless_asked(served: tuple[httpx.Client, Path]) -> None:
    client, _ = served
    stored = client.post("/api/databases", json={"database": {"name": "pg_later", "engine": "postgres",
                                                              "parameters": DEAD_PG}})
    assert stored.status_code == 201, stored.text  # MindsDB does not connect unless asked
    record = client.get("/api/databases/pg_later?check_connection=true").json()
    assert record["connection_data"]["password"] != "s3cret"  # masked (MindsDB shows secrets)
    assert record["connection_status"]["success"] is False and record["connection_status"]["error_message"]
    pg_now = {"name": "pg_now", "engine": "postgres", "parameters": DEAD_PG}
    checked = client.post("/api/databases", json={"database": pg_now, "check_connection": True})
    assert checked.status_code == 200 and checked.json()["status"] == "connection_error"
    assert "pg_now" not in [d["name"] for d in client.get("/api/databases").json()]
    status = client.post("/api/databases/status", json={"engine": "postgres", **DEAD_PG})
    assert status.status_code == 200 and status.json()["status"] == "connection_error"
    problem(client.post("/api/databases/status", json={"host": "x"}), 400, "Wrong argument")
    assert client.delete("/api/databases/pg_later").status_code == 204


def test_incomplete_parameters_are_stored_and_fail_only_when_used(served: tuple[httpx.Client, Path]) -> None:
    """MindsDB's own route tests: a postgres source with `{}` or only a user is stored (201)
    and the record answers MindsDB's fields; using it fails in one line naming what is
    missing (never a connection to a default local server)."""
    client, _ = served
    created = client.post("/api/databases", json={"database": {"name": "pg_bare", "engine": "postgres",
                                                               "parameters": {}}})
    assert created.status_code == 201, created.text
    assert created.json() == {"name": "pg_bare", "engine": "postgres", "type": "data",
                              "id": created.json()["id"]}
    updated = client.put("/api/databases/pg_bare", json={"database": {"parameters": {"user": "bear",
                                                                                       "password": "pw-9"}}})
    assert updated.status_code == 200, updated.text
    record = updated.json()
    assert set(record) == {"id", "name", "type", "engine", "connection_data", "class_type", "permanent",
                           "date_last_update"}
    assert record["class_type"] == "sql" and record["permanent"] is False
    assert record["connection_data"] == {"user": "bear", "password": "******"}  # masked, on purpose
    used = sql(client, "SELECT * FROM pg_bare.t")
    assert used["type"] == "error" and "needs PARAMETERS with host" in used["error_message"]
    problem(client.get("/api/databases/pg_bare/tables"), 400, "Error", "needs PARAMETERS with host")
    checked = client.post("/api/databases", json={"database": {"name": "pg_bare2", "engine": "postgres",
                                                               "parameters": {}}, "check_connection": True})
    assert checked.status_code == 200 and checked.json()["status"] == "connection_error"
    problem(client.post("/api/databases", json={"database": {"name": "odd", "engine": "no_such_engine"}}),
            400, "Wrong argument")
    assert client.delete("/api/databases/pg_bare").status_code == 204


def test_put_creates_updates_and_checks(served: tuple[httpx.Client, Path]) -> None:
    client, base = served
    problem(client.put("/api/databases/shop_put", json={"database": {"parameters": {}}}), 400,
            "Wrong argument", 'Missing "engine" field for new database')
    first = {"database": {"engine": "duckdb", "parameters": {"database": str(base / "shop.duckdb")}}}
    created = client.put("/api/databases/shop_put", json=first)
    assert created.status_code == 201 and created.json()["name"] == "shop_put"
    moved = {"database": {"parameters": {"database": str(base / "shop2.duckdb")}}, "check_connection": True}
    updated = client.put("/api/databases/shop_put", json=moved)
    assert updated.status_code == 200, updated.text
    assert updated.json()["connection_data"]["database"] == str(base / "shop2.duckdb")
    assert sql(client, "SELECT count(*) AS n FROM shop_put.orders")["data"] == [[2]]
    problem(client.put("/api/databases/shop_put", json={"database": {"parameters": {
        "database": str(base / "missing.duckdb")}}, "check_connection": True}), 400, "Connection error")
    kept = client.get("/api/databases/shop_put").json()
    assert kept["connection_data"]["database"] == str(base / "shop2.duckdb")  # nothing changed
    pg_put = {"database": {"engine": "postgres", "parameters": DEAD_PG}, "check_connection": True}
    problem(client.put("/api/databases/pg_put", json=pg_put), 400, "Connection error")
    assert client.get("/api/databases/pg_put").status_code == 404


def test_delete_codes(served: tuple[httpx.Client, Path]) -> None:
    client, base = served
    client.post("/api/databases", json={"database": {"name": "gone", "engine": "duckdb",
                                                     "parameters": {"database": str(base / "shop.duckdb")}}})
    deleted = client.delete("/api/databases/gone")
    assert deleted.status_code == 204 and deleted.content == b""
    assert "Database 'gone' not found" in sql(client, "SELECT * FROM gone.orders")["error_message"]
    problem(client.delete("/api/databases/gone"), 404, "Database not found")
    problem(client.delete("/api/databases/information_schema"), 400, "Error", "Cannot delete database")
    problem(client.delete("/api/databases/files"), 400, "Error", "is system database")
    problem(client.delete("/api/databases/mindsdb"), 400, "Error", "Cannot delete database mindsdb")
    assert sql(client, "CREATE PROJECT busy")["type"] == "ok"
    sql(client, "CREATE KNOWLEDGE_BASE busy.kb USING embedding_model = "
                "{\"provider\": \"kbsql\", \"model_name\": \"hash-64\"}")
    problem(client.delete("/api/databases/busy"), 400, "Error", "knowledge base")
    sql(client, "DROP KNOWLEDGE_BASE busy.kb")
    assert client.delete("/api/databases/busy").status_code == 204


def test_tables_of_files_projects_and_the_errors(served: tuple[httpx.Client, Path]) -> None:
    client, _ = served
    new = {"table": {"name": "cheap", "select": "SELECT 'A1B' AS order_id, 3 AS n"}}
    created = client.post("/api/databases/files/tables", json=new)
    assert created.status_code == 201 and created.json() == {"name": "cheap", "type": "data"}
    assert sql(client, "SELECT n FROM files.cheap")["data"] == [[3]]
    problem(client.post("/api/databases/files/tables", json=new), 409, "Name conflict",
            "Table with name cheap already exists")
    replaced = client.post("/api/databases/files/tables",
                           json={"table": {**new["table"], "select": "SELECT 7 AS n", "replace": True}})
    assert replaced.status_code == 201 and sql(client, "SELECT n FROM files.cheap")["data"] == [[7]]
    assert {"name": "cheap", "type": "data"} in client.get("/api/databases/files/tables").json()
    problem(client.post("/api/databases/files/tables", json={}), 400, "Wrong argument", '"table"')
    problem(client.post("/api/databases/files/tables", json={"table": {"name": "x"}}), 400, "Wrong argument",
            'Missing "select"')
    problem(client.post("/api/databases/files/tables", json={"table": {"name": "x", "select": "SELEC 1"}}),
            400, "Error", "Could not parse select statement")
    problem(client.post("/api/databases/files/tables", json={"table": {"name": "x", "select": "SELECT * FROM "
                                                                                            "df.nowhere"}}),
            400, "Error", "nowhere")
    problem(client.post("/api/databases/mindsdb/tables", json=new), 400, "Error", "is a project")
    problem(client.post("/api/databases/nowhere/tables", json=new), 404, "Database not exists")
    frame_t = {"table": {"name": "frame_t", "select": "SELECT 1 AS a"}}
    frame = client.post("/api/databases/df/tables", json=frame_t)
    assert frame.status_code == 201 and sql(client, "SELECT a FROM df.frame_t")["data"] == [[1]]
    sql(client, "CREATE KNOWLEDGE_BASE tkb USING embedding_model = {\"provider\": \"kbsql\", "
                "\"model_name\": \"hash-64\"}")
    assert {"name": "tkb", "type": "knowledge base"} in client.get("/api/databases/mindsdb/tables").json()
    problem(client.delete("/api/databases/mindsdb/tables/tkb"), 400, "Error", "is a project")
    assert client.delete("/api/databases/files/tables/cheap").status_code == 204
    problem(client.delete("/api/databases/files/tables/cheap"), 404, "Table not found")
    problem(client.delete("/api/databases/nowhere/tables/t"), 404, "Database not found")
    problem(client.get("/api/databases/nowhere/tables"), 404, "Database not found")


def test_a_source_altered_or_dropped_under_readers_never_shows_its_internal_name(
        served: tuple[httpx.Client, Path]) -> None:
    """DROP and ALTER DATABASE detach a source at once (not behind the swap gate), and the
    next reader attached the new file under the same DuckDB name: with two readers and one
    user altering, dropping and re-creating a source for 8 s, DuckDB said 'INTERNAL Error:
    Database name kbsql_ds_19 was already used by a different database for this meta
    transaction', and then every statement of every user answered 'FATAL Error: ... database
    has been invalidated' (or the server died of SIGSEGV). Each attach now has a name of its
    own; a reader caught between reads one line saying what happened, never the internal
    name; every answer is of one file; and the server goes on."""
    import threading
    import time

    client, base = served
    shop, shop2 = base / "shop.duckdb", base / "shop2.duckdb"  # two rows each
    with duckdb.connect(str(base / "big.duckdb")) as con:
        con.execute("CREATE TABLE orders AS SELECT range AS n FROM range(200000)")  # 200,000
    make = "CREATE DATABASE churn WITH ENGINE = 'duckdb', PARAMETERS = {{\"database\": \"{}\"}}"
    assert sql(client, make.format(shop))["type"] == "ok"
    stop = time.monotonic() + 8
    seen: list[str] = []

    def read() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=60) as own:
            while time.monotonic() < stop:
                answer = sql(own, "SELECT count(*) AS a, (SELECT count(*) FROM churn.orders) AS b "
                                  "FROM churn.orders")
                seen.append(str(answer.get("data") or answer.get("error_message")))

    def churn() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=60) as own:
            k = 0
            while time.monotonic() < stop:
                k += 1
                path = [shop, base / "big.duckdb", shop2][k % 3]
                sql(own, f"ALTER DATABASE churn PARAMETERS = {{\"database\": \"{path}\"}}")
                if k % 4 == 0:
                    sql(own, "DROP DATABASE churn")
                    sql(own, make.format(shop))

    threads = [threading.Thread(target=f) for f in (read, read, churn)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sql(client, "DROP DATABASE churn")
    bad = [s for s in seen if "kbsql_ds_" in s or "FATAL" in s or "INTERNAL" in s]
    assert not bad, bad[:3]
    assert sql(client, "SELECT 1 AS one")["data"] == [[1]]
    assert {s for s in seen if s.startswith("[[")} <= {"[[2, 2]]", "[[200000, 200000]]"}, set(seen)
