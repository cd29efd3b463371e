"""Writing back to data sources and views, against the real server the MySQL door's tests
share (`door`, tests/mysql/conftest.py): every write statement on each source kind (a
DuckDB file, a SQLite file, a real PostgreSQL when KBSQL_TEST_POSTGRES_DSN is set, and the
built-in `files`) through HTTP and through the MySQL door, a knowledge-base search joined
with a table saved in one statement, views (in joins, listed where MindsDB lists them) and
the REST tables routes. Everything made here is named `wb*` and removed at the end, so the
door's other tests see the server as seeded.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pymysql
import pytest

from kbsql.engine.settings_table import BY_NAME
from kbsql.server.process import ServerProcess, spawn
from tests.mysql.conftest import connect, http_sql

PG_DSN = os.environ.get("KBSQL_TEST_POSTGRES_DSN")


def _pg_parameters(dsn: str, schema: str) -> str:
    return f"{{'dsn': '{dsn}', 'schema': '{schema}'}}"


def _attach(prefix: str, duck_path: Path, lite_path: Path, pg_sql: str = ""
            ) -> tuple[dict[str, str], list[str], str]:
    """(kind -> database name, the CREATE DATABASE statements, the PostgreSQL schema) of the
    sources `<prefix>_duck`, `<prefix>_lite` and, with a PostgreSQL, `<prefix>_pg` in a schema
    of its own (made here, `pg_sql` run in it)."""
    made = {"duckdb": f"{prefix}_duck", "sqlite": f"{prefix}_lite"}
    statements = [
        f"CREATE DATABASE {prefix}_duck WITH ENGINE = 'duckdb', PARAMETERS = {{'database': '{duck_path}'}}",
        f"CREATE DATABASE {prefix}_lite WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': '{lite_path}'}}"]
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    if PG_DSN:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as pg:
            pg.execute(f"CREATE SCHEMA {schema}; SET search_path TO {schema}; {pg_sql}")
        statements.append(f"CREATE DATABASE {prefix}_pg WITH ENGINE = 'postgres', PARAMETERS = "
                          f"{_pg_parameters(PG_DSN, schema)}")
        made["postgres"] = f"{prefix}_pg"
    return made, statements, schema


@pytest.fixture(scope="module")
def sources(door: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Data sources `wb_duck`, `wb_lite` (each with table `base`: (1, 'x'), (2, 'y'), and
    `wb_lite.paint`: a hex per document of `kb`) and, with a PostgreSQL, `wb_pg` (its own schema);
    kind -> database name, plus the files to look into."""
    folder = tmp_path_factory.mktemp("writeback")
    duck_path, lite_path = folder / "wb.duckdb", folder / "wb.sqlite"
    con = duckdb.connect(str(duck_path))
    con.execute("CREATE TABLE base (id INTEGER, b TEXT); INSERT INTO base VALUES (1, 'x'), (2, 'y')")
    con.close()
    lite = sqlite3.connect(lite_path)
    lite.executescript("CREATE TABLE base (id INTEGER, b TEXT); INSERT INTO base VALUES (1, 'x'), (2, 'y');"
                       "CREATE TABLE paint (doc TEXT, hex TEXT);"
                       "INSERT INTO paint VALUES ('1', '#f00'), ('3', '#00f'), ('4', '#0f0');")
    lite.commit()
    lite.close()
    made, statements, schema = _attach("wb", duck_path, lite_path)
    made["files"] = "files"
    statements.append("CREATE PROJECT wb")
    for query in statements:
        body = http_sql(door.url, query)
        assert body["type"] == "ok", body
    yield {"db": made, "sqlite": lite_path, "duckdb": duck_path, "schema": schema}
    for query in ("DROP VIEW IF EXISTS wb.red_docs", "DROP TABLE IF EXISTS files.wb_kept", "DROP DATABASE wb",
                  "DROP DATABASE wb_duck", "DROP DATABASE wb_lite", "DROP DATABASE IF EXISTS wb_pg"):
        http_sql(door.url, query)
    if PG_DSN:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as pg:
            pg.execute(f"DROP SCHEMA {schema} CASCADE")


def over_http(server: ServerProcess, query: str) -> tuple[str, Any]:
    """("ok", affected rows) | ("table", rows as tuples) | ("error", message)."""
    body = http_sql(server.url, query)
    if body["type"] == "ok":
        return "ok", body.get("affected_rows")
    if body["type"] == "table":
        return "table", [tuple(r) for r in body["data"]]
    return "error", body["error_message"]


def over_mysql(conn: pymysql.connections.Connection, query: str) -> tuple[str, Any]:
    try:
        with conn.cursor() as cursor:
            affected = cursor.execute(query)
            if cursor.description:
                return "table", [tuple(r) for r in cursor.fetchall()]
            return "ok", affected or None  # HTTP answers no count where MySQL says 0
    except pymysql.MySQLError as exc:
        return "error", str(exc.args[-1])


def _writes(run: Any, db: str, table: str) -> None:
    """Every write statement on `db.table`, each checked by what it answers and what is read
    back after it (`run` is one of the two doors)."""
    t = f"{db}.{table}"
    assert run(f"DROP TABLE IF EXISTS {t}") == ("ok", None)
    assert run(f"CREATE TABLE {t} (SELECT id, b FROM wb_duck.base)")[0] == "ok"
    kind, message = run(f"CREATE TABLE {t} (SELECT 1 AS id)")
    assert kind == "error" and f"Table '{table}' already exists" in message
    assert run(f"INSERT INTO {t} SELECT id + 10 AS id, b FROM wb_lite.base") == ("ok", 2)
    assert run(f"INSERT INTO {t} (id, b) VALUES (100, 'v')") == ("ok", 1)
    assert run(f"UPDATE {t} SET b = upper(b), id = id + 1 WHERE id > 10") == ("ok", 3)
    assert run(f"DELETE FROM {t} WHERE id = 1") == ("ok", 1)
    read = run(f"SELECT id, b FROM {t} ORDER BY id")
    assert read == ("table", [(2, "y"), (12, "X"), (13, "Y"), (101, "V")])
    if db != "files":  # update.mdx's FROM subquery "aliased as prediction_data" (MindsDB's parser refuses it)
        assert run(f"UPDATE {t} ON id FROM (SELECT 2 AS id, 'w' AS b) AS prediction_data") == ("ok", 1)
        assert run(f"SELECT b FROM {t} WHERE id = 2") == ("table", [("w",)])
        # a `*` (mindsdb_sdk's table.update(db.query(...), on=...)): its columns read from DESCRIBE
        assert run(f"UPDATE {t} ON id FROM (SELECT * FROM (SELECT 'u' AS b, 2 AS id))") == ("ok", 1)
        assert run(f"SELECT b FROM {t} WHERE id = 2") == ("table", [("u",)])
    # table.mdx's CREATE TABLE ... (SELECT ...) with any query, a UNION too
    assert run(f"CREATE OR REPLACE TABLE {t} (SELECT 7 AS z UNION ALL SELECT 8 AS z)")[0] == "ok"
    assert run(f"SELECT z FROM {t} ORDER BY z") == ("table", [(7,), (8,)])
    assert run(f"DROP TABLE {t}") == ("ok", None)
    kind, message = run(f"DROP TABLE {t}")
    assert kind == "error" and table in message
    kind, message = run(f"SELECT * FROM {t}")
    assert kind == "error" and "not found" in message


def _bytes(size: str) -> float:
    """DuckDB's '3.8 GiB' in bytes."""
    number, unit = size.split()
    return float(number) * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[unit]


def test_every_write_on_every_source_kind_through_both_doors(door: ServerProcess,
                                                             sources: dict[str, Any]) -> None:
    conn = connect(door)
    try:
        for kind, db in sources["db"].items():
            _writes(lambda q: over_http(door, q), db, "wb_http")
            _writes(lambda q: over_mysql(conn, q), db, "wb_mysql")
            # written into the source itself: another program reads the rows
            kept = over_mysql(conn, f"CREATE TABLE {db}.wb_kept (SELECT b FROM wb_lite.base)")
            assert kept == ("ok", 2), kind
    finally:
        conn.close()
    with sqlite3.connect(sources["sqlite"]) as lite:
        assert sorted(lite.execute("SELECT b FROM wb_kept").fetchall()) == [("x",), ("y",)]
    with duckdb.connect(str(sources["duckdb"]), read_only=True) as con:  # not held open for writing
        assert sorted(con.execute("SELECT b FROM wb_kept").fetchall()) == [("x",), ("y",)]
    if PG_DSN:
        import psycopg

        with psycopg.connect(PG_DSN) as pg:
            rows = pg.execute(f"SELECT b FROM {sources['schema']}.wb_kept").fetchall()
            assert sorted(rows) == [("x",), ("y",)]
    # a write runs under the statement's deadline: stopped, nothing written, the source usable
    slow = "CREATE TABLE wb_duck.wb_slow (SELECT sum(a.i + b.i) AS s FROM lab.big AS a, lab.big AS b)"
    body = httpx.post(f"{door.url}/api/sql/query", json={"query": slow, "timeout": 1}, timeout=60).json()
    assert body["type"] == "error" and "stopped" in body["error_message"], body
    assert over_http(door, "SELECT * FROM wb_duck.wb_slow")[0] == "error"
    assert over_http(door, "CREATE TABLE wb_duck.wb_slow (SELECT 1 AS s)")[0] == "ok"
    assert over_http(door, "DROP TABLE wb_duck.wb_slow") == ("ok", None)
    # and under the served SQL memory limit (a quarter of the machine), as a read is: a write on
    # a connection of its own would have DuckDB's default, 80% of the machine's memory
    limit = "SELECT current_setting('memory_limit') AS m"
    assert over_http(door, f"CREATE TABLE wb_duck.wb_mem ({limit})") == ("ok", 1)
    kind, rows = over_http(door, "SELECT m FROM wb_duck.wb_mem")
    assert kind == "table" and rows == over_http(door, limit)[1]
    served_mb = BY_NAME["sql_memory_mb"].default_for(served=True)
    assert _bytes(rows[0][0]) <= served_mb * (1 << 20) * 1.01, rows
    assert over_http(door, "DROP TABLE wb_duck.wb_mem") == ("ok", None)
    # a write to a project's name that is no knowledge base is refused in one line
    kind, message = over_http(door, "INSERT INTO mindsdb.nothing_here (a) VALUES (1)")
    assert kind == "error" and "\n" not in message


def test_a_search_joined_with_a_table_is_saved_and_kept_as_a_view(door: ServerProcess,
                                                                  sources: dict[str, Any]) -> None:
    target = sources["db"].get("postgres", "wb_duck")
    search = ("SELECT k.id, k.chunk_content, p.hex FROM mindsdb.kb AS k JOIN wb_lite.paint AS p "
              "ON k.id = p.doc WHERE k.content = 'cats purr' LIMIT 2")
    saved = over_http(door, f"CREATE OR REPLACE TABLE {target}.wb_hits ({search})")
    assert saved[0] == "ok", saved
    kind, rows = over_http(door, f"SELECT id, hex FROM {target}.wb_hits ORDER BY id")
    assert kind == "table" and ("1", "#f00") in rows and len(rows) == 2
    # MindsDB's UPDATE FROM SELECT, both forms: results written onto the rows they match
    assert over_http(door, f"UPDATE {target}.wb_hits ON id FROM (SELECT k.id, 'seen' AS hex FROM mindsdb.kb "
                           "AS k WHERE k.content = 'cats purr' LIMIT 1)") == ("ok", 1)
    assert over_http(door, f"UPDATE {target}.wb_hits SET chunk_content = d.note FROM (SELECT '1' AS id, "
                           "'noted' AS note) AS d WHERE id = d.id") == ("ok", 1)
    assert over_http(door, f"SELECT hex, chunk_content FROM {target}.wb_hits WHERE id = '1'") == \
        ("table", [("seen", "noted")])
    # the same search as a view: read alone, joined with a table, through either door
    assert over_http(door, f"CREATE VIEW wb.red_docs AS ({search})") == ("ok", None)
    kind, message = over_http(door, "CREATE VIEW wb.red_docs AS (SELECT 1)")
    assert kind == "error" and "already exists" in message
    # MindsDB's Project.create_view runs the SELECT once (LIMIT 1): a missing table refuses the view
    kind, message = over_http(door, "CREATE VIEW wb.wb_bad AS (SELECT * FROM wb_duck.no_such_table)")
    assert kind == "error" and "no_such_table" in message
    assert over_http(door, "SELECT * FROM wb.wb_bad")[0] == "error"
    kind, message = over_http(door, "CREATE VIEW wb.wb_bad AS (SELECT * FROM wb_nowhere.t)")
    assert kind == "error" and "not found in the database" in message  # MindsDB's words
    assert over_http(door, "CREATE OR REPLACE VIEW wb.red_docs AS "
                           f"({search.replace('LIMIT 2', 'LIMIT 3')})") == ("ok", None)
    kind, rows = over_http(door, "SELECT id, hex FROM wb.red_docs ORDER BY id")
    assert kind == "table" and ("1", "#f00") in rows
    conn = connect(door, database="wb")
    try:
        joined = over_mysql(conn, "SELECT v.id, t.b FROM red_docs AS v JOIN wb_duck.base AS t "
                                  "ON v.id = CAST(t.id AS TEXT) ORDER BY v.id")
        assert joined == ("table", [("1", "x")])
        kind, shown = over_mysql(conn, "SHOW VIEWS")  # MindsDB's shape: NAME, PROJECT, QUERY
        assert kind == "table" and [r[:2] for r in shown] == [("red_docs", "wb")] and "LIMIT 3" in shown[0][2]
        assert ("red_docs", "VIEW") in over_mysql(conn, "SHOW FULL TABLES")[1]
    finally:
        conn.close()
    kind, rows = over_http(door, "SELECT table_schema, table_name FROM information_schema.tables "
                                 "WHERE table_type = 'VIEW'")
    assert ("wb", "red_docs") in rows
    listed = httpx.get(f"{door.url}/api/databases/wb/tables").json()
    assert {"name": "red_docs", "type": "view"} in listed
    _rest_views(door)
    assert over_http(door, "DROP VIEW wb.red_docs") == ("ok", None)
    kind, message = over_http(door, "DROP VIEW wb.red_docs")
    assert kind == "error" and "View not found" in message and "does not exist" in message  # MindsDB's words
    assert over_http(door, "DROP VIEW IF EXISTS wb.red_docs") == ("ok", None)
    assert over_http(door, "SELECT * FROM wb.red_docs")[0] == "error"


def test_rest_tables_create_from_a_select_and_drop(door: ServerProcess, sources: dict[str, Any]) -> None:
    """MindsDB's /api/databases/{db}/tables on every source kind: POST a table from a SELECT
    (409 when it exists, `replace` to overwrite, 400 for a bad SELECT), DELETE it."""
    for kind, db in sources["db"].items():
        _rest_tables(door, db, kind, sources)


def _sqlite_tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as lite:
        return [r[0] for r in lite.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def _rest_tables(door: ServerProcess, db: str, kind: str, sources: dict[str, Any]) -> None:
    base = f"{door.url}/api/databases/{db}/tables"
    made = httpx.post(base, json={"table": {"name": "wb_rest",
                                            "select": "SELECT id * 2 AS d FROM wb_duck.base"}})
    assert made.status_code == 201, (kind, made.text)
    assert made.json() == {"name": "wb_rest", "type": "data"}
    assert over_http(door, f"SELECT d FROM {db}.wb_rest ORDER BY d") == ("table", [(2,), (4,)]), kind
    assert {"name": "wb_rest", "type": "data"} in httpx.get(base).json(), kind
    if kind == "sqlite":  # written into the source's own file
        assert "wb_rest" in _sqlite_tables(sources["sqlite"])
    again = httpx.post(base, json={"table": {"name": "wb_rest", "select": "SELECT 1 AS d"}})
    assert again.status_code == 409, kind
    # MindsDB's tables_test: a SELECT naming a column that does not exist is a 400, not a 500
    for select in ("SELECT wattt FROM wb_duck.base", "SELECT AN ERROR AWWW YEAH"):
        bad = httpx.post(base, json={"table": {"name": "wb_bad", "select": select, "replace": True}})
        assert bad.status_code == 400 and bad.json()["title"] == "Error", (kind, bad.text)
        assert "\n" not in bad.json()["detail"]
    replaced = httpx.post(base, json={"table": {"name": "wb_rest", "select": "SELECT 5 AS d",
                                                "replace": True}})
    assert replaced.status_code == 201, kind
    assert over_http(door, f"SELECT d FROM {db}.wb_rest") == ("table", [(5,)]), kind
    assert httpx.delete(f"{base}/wb_rest").status_code == 204, kind
    assert "wb_rest" not in [t["name"] for t in httpx.get(base).json()], kind
    assert httpx.delete(f"{base}/wb_rest").status_code == 404, kind
    assert over_http(door, f"SELECT d FROM {db}.wb_rest")[0] == "error", kind
    if kind == "sqlite":
        assert "wb_rest" not in _sqlite_tables(sources["sqlite"])


def _rest_views(door: ServerProcess) -> None:
    """MindsDB's /api/projects/{project}/views over the same views."""
    base = f"{door.url}/api/projects/wb/views"
    assert [v["name"] for v in httpx.get(base).json()] == ["red_docs"]
    made = httpx.post(base, json={"view": {"name": "wb_rest_view", "query": "SELECT b FROM wb_lite.base"}})
    assert made.status_code == 201 and set(made.json()) == {"id", "name", "query"}, made.text
    assert httpx.post(base, json={"view": {"name": "wb_rest_view", "query": "SELECT 1"}}).status_code == 409
    assert httpx.post(base, json={"view": {"name": "x"}}).status_code == 400
    upper = {"view": {"query": "SELECT upper(b) AS b FROM wb_lite.base"}}
    changed = httpx.put(f"{base}/wb_rest_view", json=upper)
    assert changed.status_code == 200
    assert over_http(door, "SELECT b FROM wb.wb_rest_view ORDER BY b") == ("table", [("X",), ("Y",)])
    assert httpx.get(f"{base}/wb_rest_view").json()["query"].startswith("SELECT upper(b)")
    assert httpx.delete(f"{base}/wb_rest_view").status_code == 204
    assert httpx.get(f"{base}/wb_rest_view").status_code == 404
    assert httpx.get(f"{door.url}/api/projects/nowhere/views").status_code == 404


def test_a_postgres_tables_columns_in_mindsdbs_mysql_types(door: ServerProcess,
                                                          sources: dict[str, Any]) -> None:
    """MindsDB's postgres handler tells `varchar(n)` from `text` and reads `json` as JSON
    (DuckDB reads all three as VARCHAR): SHOW COLUMNS and information_schema.COLUMNS (what
    DBeaver, JDBC and SQLAlchemy size their fields by) show them apart, as in its
    test_mysql_api.py::test_show_columns."""
    if "postgres" not in sources["db"]:
        pytest.skip("no postgres server: set KBSQL_TEST_POSTGRES_DSN to run this test")
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {sources['schema']}.wb_typed (n integer, location character varying(100), "
                   "free character varying, note text, doc jsonb)")
    kind, shown = over_http(door, "SHOW COLUMNS FROM wb_pg.wb_typed")
    assert kind == "table" and [r[:2] for r in shown] == [
        ("n", "int"), ("location", "varchar(100)"), ("free", "varchar(1024)"), ("note", "text"),
        ("doc", "json")]
    conn = connect(door)
    try:
        kind, rows = over_mysql(conn, "SELECT column_name, data_type, column_type, character_maximum_length, "
                                      "character_octet_length, numeric_precision, original_type "
                                      "FROM information_schema.columns WHERE table_schema = 'wb_pg' "
                                      "AND table_name = 'wb_typed' ORDER BY ordinal_position")
    finally:
        conn.close()
    assert kind == "table" and rows[:2] == [("n", "int", "int", None, None, 10, "integer"),
                                            ("location", "varchar", "varchar(100)", 100, 400, None,
                                             "character varying")]
    # DESCRIBE: DuckDB's types (what SQL over the table uses) beside PostgreSQL's own
    kind, described = over_http(door, "DESCRIBE wb_pg.wb_typed")
    assert kind == "table" and described[1] == ("location", "VARCHAR", "character varying")
    assert over_http(door, "DROP TABLE wb_pg.wb_typed") == ("ok", None)


def test_a_postgres_columns_result_types_are_mindsdbs(door: ServerProcess, sources: dict[str, Any]) -> None:
    """A SELECT's columns that are PostgreSQL columns as stored go over the MySQL door with
    MindsDB's types (its test_response_types): text, char(n) and money as TEXT (252, BLOB
    flag, text), json/jsonb as JSON (245), bytea as BINARY (254), varchar as VARCHAR; a
    char(n) keeps its padding, as PostgreSQL and MindsDB answer it (DuckDB trims it). A
    computed column keeps its engine type: no guessing."""
    if "postgres" not in sources["db"]:
        pytest.skip("no postgres server: set KBSQL_TEST_POSTGRES_DSN to run this test")
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {sources['schema']}.wb_wire (c char(6), v varchar(20), t text, j jsonb, "
                   "b bytea, m money, n integer)")
        pg.execute(f"INSERT INTO {sources['schema']}.wb_wire VALUES ('ab', 'ab', 'ab', '{{\"k\": 1}}', "
                   "'\\x6869', 2.5, 7)")
    conn = connect(door)
    try:
        with conn.cursor() as cursor:
            for _ in range(2):  # the second run's plan comes from the plan cache
                cursor.execute("SELECT w.c, v, t AS tt, j, b, m, n, upper(t) AS up FROM wb_pg.wb_wire w")
                row = cursor.fetchone()
                fields = [(f.name, f.type_code, f.flags & 0xF0) for f in cursor._result.fields]
            cursor.execute("SELECT * FROM wb_pg.wb_wire")
            star = [(f.name, f.type_code) for f in cursor._result.fields]
            # a column after a star is marked where it is in the result, not at its place in the
            # select list (which named `v`: varchar padded as char(6) would be a wrong value)
            cursor.execute("SELECT w.*, w.c AS c2 FROM wb_pg.wb_wire w")
            after_star = cursor.fetchone()
            after_types = [(f.name, f.type_code) for f in cursor._result.fields]
    finally:
        conn.close()
    blob, binary = 16, 128
    assert fields == [("c", 252, blob), ("v", 253, 0), ("tt", 252, blob), ("j", 245, blob | binary),
                      ("b", 254, binary), ("m", 252, blob), ("n", 3, 0), ("up", 253, 0)]
    assert row[0] == "ab    " and row[2] == "ab" and row[4] == b"hi" and row[7] == "AB"
    assert star == [("c", 252), ("v", 253), ("t", 252), ("j", 245), ("b", 254), ("m", 252), ("n", 3)]
    assert after_star[1] == "ab" and after_star[-1] == "ab    ", after_star
    assert after_types[1] == ("v", 253) and after_types[-1] == ("c2", 252), after_types
    kind, rows = over_http(door, "SELECT c FROM wb_pg.wb_wire")
    assert (kind, rows) == ("table", [("ab    ",)])  # the padded value on every door
    assert over_http(door, "DROP TABLE wb_pg.wb_wire") == ("ok", None)


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[ServerProcess, dict[str, str], Path]]:
    """A server whose operator made data sources read-only (`--read-only-sources`), with its
    own duckdb, sqlite and (with a PostgreSQL) postgres source, each holding `base`: (1, 'x'),
    (2, 'y'). Own files and schema: the door's writes never meet its attachments."""
    folder = tmp_path_factory.mktemp("read-only")
    lite_path = folder / "ro.sqlite"
    base = "CREATE TABLE base (id INTEGER, b TEXT); INSERT INTO base VALUES (1, 'x'), (2, 'y');"
    with sqlite3.connect(lite_path) as lite:
        lite.executescript(base)
    duck = duckdb.connect(str(folder / "ro.duckdb"))
    duck.execute(base)
    duck.close()
    made, statements, schema = _attach("ro", folder / "ro.duckdb", lite_path, base)
    try:
        with spawn(folder / "data", args=("--mysql-port", "0", "--read-only-sources")) as server:
            for query in statements:
                assert http_sql(server.url, query)["type"] == "ok"
            yield server, made, lite_path
    finally:
        if PG_DSN:
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True) as pg:
                pg.execute(f"DROP SCHEMA {schema} CASCADE")


READ_ONLY_WRITES = ["CREATE TABLE {t}_new (SELECT 1 AS id)", "CREATE OR REPLACE TABLE {t} (SELECT 1 AS id)",
                    "INSERT INTO {t} (id, b) VALUES (3, 'z')", "INSERT INTO {t} SELECT id + 10, b FROM {t}",
                    "UPDATE {t} SET b = 'w' WHERE id = 1", "DELETE FROM {t} WHERE id = 1", "DROP TABLE {t}",
                    "DROP TABLE IF EXISTS {t}"]


def test_read_only_sources_refuse_every_write_on_every_door(
        read_only: tuple[ServerProcess, dict[str, str], Path]) -> None:
    """`--read-only-sources`: every write to a data source, on every source kind, is refused in
    one line naming the flag (HTTP's error result, MySQL's 1227, REST's 403) and changes
    nothing; reads go on, and `files` stays writable (it is kbsql's own store)."""
    server, made, lite_path = read_only
    conn = connect(server)
    try:
        for kind, db in made.items():
            for write in READ_ONLY_WRITES:
                query = write.format(t=f"{db}.base")
                answer, message = over_http(server, query)
                assert answer == "error" and "--read-only-sources" in message, (kind, query, message)
                assert "\n" not in message
                with pytest.raises(pymysql.MySQLError) as refused, conn.cursor() as cursor:
                    cursor.execute(query)
                assert refused.value.args[0] == 1227 and "--read-only-sources" in refused.value.args[1]
            kept = over_http(server, f"SELECT id, b FROM {db}.base ORDER BY id")
            assert kept == ("table", [(1, "x"), (2, "y")]), kind
    finally:
        conn.close()
    rest = f"{server.url}/api/databases/ro_lite/tables"
    posted = httpx.post(rest, json={"table": {"name": "ro_new", "select": "SELECT 1 AS a"}})
    assert posted.status_code == 403 and "--read-only-sources" in posted.json()["detail"], posted.text
    assert httpx.delete(f"{rest}/base").status_code == 403
    with sqlite3.connect(lite_path) as lite:  # the source's file as it was
        assert lite.execute("SELECT id, b FROM base ORDER BY id").fetchall() == [(1, "x"), (2, "y")]
        assert _sqlite_tables(lite_path) == ["base"]
    assert over_http(server, "CREATE TABLE files.ro_kept (SELECT 1 AS a)") == ("ok", 1)
    assert over_http(server, "SELECT a FROM files.ro_kept") == ("table", [(1,)])
