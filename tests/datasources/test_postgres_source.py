"""The postgres data source against a real server.

Runs when `KBSQL_TEST_POSTGRES_DSN` (e.g. postgresql://postgres:pw@127.0.0.1:5432/postgres)
names a reachable server; skipped with the reason otherwise. The unreachable-server case
runs always (a refused loopback port).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import pandas as pd
import pytest

from kbsql.engine import Engine
from tests.datasources.makers import ok, rows

DSN_ENV = "KBSQL_TEST_POSTGRES_DSN"


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        pytest.skip(f"no postgres server: set {DSN_ENV} to run this test")
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.skip(f"postgres at {DSN_ENV} is not reachable: {exc}")
    yield dsn


@pytest.fixture
def pg_schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh schema with a table of awkward types; dropped afterwards."""
    import psycopg

    schema = f"kbsql_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'CREATE TABLE "{schema}".invoices (id int, customer text, total numeric(10,2), '
                   "issued date, paid_at timestamp)")
        db.execute(f'INSERT INTO "{schema}".invoices VALUES '
                   "(1, 'ann', 12.50, '2024-01-31', '2024-02-01 10:00:00'), "
                   "(2, 'bob', 99.99, '2024-02-29', NULL), (3, 'ann', 0.01, '2024-03-01', NULL)")
    yield schema
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _params(dsn: str, schema: str) -> dict[str, object]:
    url = urlparse(dsn)
    return {"host": url.hostname, "port": url.port or 5432, "user": url.username,
            "password": url.password, "database": (url.path or "/postgres").lstrip("/"),
            "schema": schema}


def test_postgres_source_query_join_and_masking(engine: Engine, postgres_dsn: str,
                                                 pg_schema: str) -> None:
    params = _params(postgres_dsn, pg_schema)
    ok(engine, f"CREATE DATABASE pg WITH ENGINE = 'postgres', PARAMETERS = {json.dumps(params)}")
    assert ["invoices"] in rows(engine, "SHOW TABLES FROM pg")
    assert rows(engine, "SELECT id, total, issued, paid_at FROM pg.invoices ORDER BY id LIMIT 2") == [
        [1, 12.5, "2024-01-31", "2024-02-01 10:00:00.000000"], [2, 99.99, "2024-02-29", None]]
    engine.register_dataframe("customers", pd.DataFrame({"name": ["ann", "bob"], "tier": ["gold", "basic"]}))
    assert rows(engine, "SELECT c.tier, sum(i.total) AS s FROM pg.invoices i JOIN df.customers c "
                        "ON c.name = i.customer GROUP BY c.tier ORDER BY s DESC") == [
        ["basic", 99.99], ["gold", 12.51]]
    shown = rows(engine, "SELECT CONNECTION_DATA FROM information_schema.databases WHERE NAME = 'pg'")
    assert json.loads(shown[0][0])["password"] == "******"
    assert params["password"] not in json.dumps(rows(engine, "SELECT * FROM information_schema.databases"))


def test_unreachable_postgres_is_a_clear_error_and_stores_nothing(engine: Engine) -> None:
    result = engine.query("CREATE DATABASE pg ENGINE = 'postgres', PARAMETERS = {\"host\": \"127.0.0.1\", "
                          "\"port\": 1, \"user\": \"u\", \"password\": \"secret-pw\", \"database\": \"d\"}")
    assert result.type == "error"
    assert "Cannot connect to postgres data source pg at 127.0.0.1:1" in result.error_message
    assert "secret-pw" not in result.error_message
    # libpq's own sentence follows the address, not DuckDB's quote of kbsql's libpq options
    # ('Unable to connect to Postgres at "connect_timeout=... passfile=/dev/null/kbsql-no-passfile"')
    assert result.error_message.startswith("Cannot connect to postgres data source pg at 127.0.0.1:1/d: "
                                           "connection to server at"), result.error_message
    assert "passfile" not in result.error_message and "IO Error" not in result.error_message
    assert ["pg"] not in rows(engine, "SHOW DATABASES")


def test_postgres_scan_pushes_filters_and_sees_new_tables(engine: Engine, postgres_dsn: str,
                                                          pg_schema: str) -> None:
    import psycopg

    from tests.datasources.test_native_scanners import explain

    ok(engine, f"CREATE DATABASE pg ENGINE = 'postgres', PARAMETERS = "
               f"{json.dumps(_params(postgres_dsn, pg_schema))}")
    query = "SELECT customer FROM pg.invoices WHERE id = 2"
    assert rows(engine, query) == [["bob"]]
    plan = explain(engine, query)
    assert "POSTGRES_SCAN" in plan and "id=2" in plan.replace(" ", "")  # filtered by the server
    assert "paid_at" not in plan  # and only the needed columns travel
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f'CREATE TABLE "{pg_schema}".late (a int)')
        db.execute(f'INSERT INTO "{pg_schema}".late VALUES (7)')
        db.execute(f'ALTER TABLE "{pg_schema}".invoices ADD COLUMN note text DEFAULT \'n\'')
    assert ["late"] in rows(engine, "SHOW TABLES FROM pg")
    assert rows(engine, "SELECT a FROM pg.late") == [[7]]
    assert rows(engine, "SELECT note FROM pg.invoices WHERE id = 1") == [["n"]]


def test_postgres_dsn_password_is_masked_and_kept_out_of_errors(engine: Engine, postgres_dsn: str,
                                                                pg_schema: str) -> None:
    url = urlparse(postgres_dsn)
    ok(engine, f"CREATE DATABASE pgdsn ENGINE = 'postgres', PARAMETERS = "
               f"{json.dumps({'dsn': postgres_dsn, 'schema': pg_schema})}")
    assert rows(engine, "SELECT sum(total) FROM pgdsn.invoices WHERE customer = 'ann'") == [[12.51]]
    shown = json.dumps(rows(engine, "SELECT * FROM information_schema.databases"))
    assert url.password not in shown and "******" in shown
    wrong = postgres_dsn.replace(f":{url.password}@", ":not-the-pw-42@")
    result = engine.query(f"CREATE DATABASE pgbad ENGINE = 'postgres', PARAMETERS = "
                          f"{json.dumps({'dsn': wrong})}")
    assert result.type == "error" and "Cannot connect to postgres data source pgbad" in \
        result.error_message
    assert "not-the-pw-42" not in result.error_message
    assert ["pgbad"] not in rows(engine, "SHOW DATABASES")


def test_a_time_with_time_zone_reads_in_utc(engine: Engine, postgres_dsn: str, pg_schema: str) -> None:
    """PostgreSQL's `timetz` 14:30:45+03 is 11:30:45 UTC, as MindsDB answers it (its
    test_mysql_api.py::test_response_types); DuckDB's Arrow export would drop the offset and
    say 14:30:45, a silently wrong time."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f'CREATE TABLE "{pg_schema}".shifts (id int, starts timetz, plain time)')
        db.execute(f"INSERT INTO \"{pg_schema}\".shifts VALUES (1, '14:30:45+03:00', '14:30:45'), "
                   "(2, NULL, NULL)")
    ok(engine, f"CREATE DATABASE pg ENGINE = 'postgres', PARAMETERS = "
               f"{json.dumps(_params(postgres_dsn, pg_schema))}")
    assert rows(engine, "SELECT id, starts, plain FROM pg.shifts ORDER BY id") == [
        [1, "11:30:45.000000", "14:30:45.000000"], [2, None, None]]
    # two columns of one name stay apart (each read in UTC, by position)
    assert rows(engine, "SELECT a.starts, b.starts FROM pg.shifts AS a JOIN pg.shifts AS b ON a.id = b.id "
                        "WHERE a.id = 1") == [["11:30:45.000000", "11:30:45.000000"]]


def test_a_native_query_runs_on_the_postgres_source_read_only(engine: Engine, postgres_dsn: str,
                                                               pg_schema: str) -> None:
    """MindsDB's native query, `FROM pg (<PostgreSQL's own SQL>)` (its test_executor.py
    TestWithNativeQuery; mindsdb_sdk's `db.query(...)` fed to a table or a view): the text runs
    on the server as it is (`::numeric`, `||`), its rows feed the rest of the statement, a view
    keeps it, and nothing in it can write (a read-only transaction: nextval, a DELETE)."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f'CREATE SEQUENCE "{pg_schema}".numbers')
    params = _params(postgres_dsn, pg_schema)
    ok(engine, f"CREATE DATABASE pg WITH ENGINE = 'postgres', PARAMETERS = {json.dumps(params)}")
    native = f"SELECT customer || '!' AS who, total::numeric * 2 AS twice FROM {pg_schema}.invoices"
    assert rows(engine, f"SELECT who, sum(twice) AS s FROM pg ({native}) GROUP BY who ORDER BY who") == [
        ["ann!", 25.02], ["bob!", 199.98]]
    engine.register_dataframe("tiers", pd.DataFrame({"name": ["ann!", "bob!"], "tier": ["gold", "basic"]}))
    assert rows(engine, f"SELECT t.tier, n.twice FROM pg ({native}) AS n JOIN df.tiers t ON t.name = n.who "
                        "WHERE n.twice > 1 ORDER BY n.twice") == [["gold", 25.0], ["basic", 199.98]]
    ok(engine, f"CREATE VIEW paid FROM pg (SELECT id FROM {pg_schema}.invoices WHERE paid_at IS NOT NULL)")
    assert rows(engine, "SELECT * FROM paid") == [[1]]
    copied = f"SELECT id, customer FROM {pg_schema}.invoices"
    ok(engine, f"CREATE TABLE files.copied (SELECT * FROM pg ({copied}))")
    assert rows(engine, "SELECT count(*) FROM files.copied") == [[3]]
    for write, words in ((f"DELETE FROM {pg_schema}.invoices RETURNING id", "syntax error"),
                         (f"SELECT nextval('{pg_schema}.numbers')", "read-only transaction"),
                         (f"SELECT nope FROM {pg_schema}.invoices", 'column "nope" does not exist')):
        error = engine.query(f"SELECT * FROM pg ({write})").error_message  # type: ignore[union-attr]
        assert error.startswith("PostgreSQL refused the query: ") and words in error, error
        assert "\n" not in error
    assert rows(engine, "SELECT count(*) FROM pg.invoices") == [[3]]  # nothing written
    assert engine.query("SELECT * FROM nope (SELECT 1)").error_message.startswith(  # type: ignore[union-attr]
        "Unknown data source 'nope'")


def test_a_native_query_stops_at_the_statement_timeout_on_the_server_too(tmp_path, postgres_dsn: str,
                                                                          pg_schema: str) -> None:
    """DuckDB's interrupt does not reach a query waiting in libpq: `SELECT pg_sleep(20)` as a
    native query under a 2 s statement timeout answered 'stopped' only after 20 s, its worker
    held all along (pg_sleep(1e9) would hold it for good). The source's connections carry the
    statement timeout, after the source's own `options`, which cannot lift it."""
    import time

    import psycopg

    (tmp_path / "config.json").write_text(json.dumps({"statement_timeout": 2}))
    params = {**_params(postgres_dsn, pg_schema), "options": "-c statement_timeout=0"}
    with Engine(tmp_path) as engine:
        ok(engine, f"CREATE DATABASE pg WITH ENGINE = 'postgres', PARAMETERS = {json.dumps(params)}")
        start = time.monotonic()
        error = engine.query("SELECT * FROM pg (SELECT pg_sleep(20) AS slept)").error_message  # type: ignore[union-attr]
        assert time.monotonic() - start < 8, time.monotonic() - start
        assert error.startswith("The statement was stopped: it ran past its time limit (2 s"), error
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            sleeping = db.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                  "AND query LIKE '%pg_sleep(20)%' AND pid <> pg_backend_pid()").fetchone()
        assert sleeping == (0,)
        assert rows(engine, "SELECT count(*) FROM pg.invoices") == [[3]]


def test_a_native_query_reads_the_source_s_schema_as_its_plain_tables_do(tmp_path, postgres_dsn: str,
                                                                           pg_schema: str) -> None:
    """mindsdb_sdk's `db.query(sql)` fetched reads `invoices` in the source's `schema`; fed to
    a table or a view the SDK sends the same text as a native query, which found no `invoices`
    ('relation "invoices" does not exist'): MindsDB sets the connection's search_path to the
    schema (then public), so both forms read the same table. A live server, the SDK's calls."""
    mindsdb_sdk = pytest.importorskip("mindsdb_sdk")
    from tests.conftest import start_server, stop_server

    server, url = start_server(tmp_path / "server")
    try:
        sdk = mindsdb_sdk.connect(url)
        pg = sdk.databases.create("pg", engine="postgres", connection_args=_params(postgres_dsn, pg_schema))
        text = "SELECT id, customer || '!' AS who FROM invoices WHERE id < 3 ORDER BY id"
        assert pg.query(text).fetch().values.tolist() == [[1, "ann!"], [2, "bob!"]]
        sdk.databases.files.tables.create("copied", pg.query(text))
        assert sdk.query("SELECT * FROM files.copied ORDER BY id").fetch().values.tolist() == [
            [1, "ann!"], [2, "bob!"]]
        sdk.views.create("who", pg.query(text))
        made = pg.tables.create("made", pg.query(text))  # CREATE TABLE pg.made (SELECT * FROM pg (...))
        # UPDATE pg.made ON id FROM (SELECT * FROM pg (...)): the `*` was refused
        made.update(pg.query("SELECT id, customer AS who FROM invoices WHERE id = 2"), on=["id"])
        assert made.fetch().sort_values("id").values.tolist() == [[1, "ann!"], [2, "bob"]]
        assert sdk.views.get("who").fetch()["who"].tolist() == ["ann!", "bob!"]
        path = sdk.query("SELECT * FROM pg (SELECT current_setting('search_path') AS p)").fetch()
        assert path["p"].tolist() == [f'"{pg_schema}",public']  # the schema first, then public
    finally:
        stop_server(server)


def test_a_schema_with_a_backslash_and_a_space_reads_on_both_paths(engine: Engine, postgres_dsn: str) -> None:
    """libpq's `options` reads a backslash as an escape: the search_path of a schema
    `we\\ird x` reached PostgreSQL as `weird x`, so a native query found no table there
    ('relation "t" does not exist') while the plain `pg.t` read it."""
    import psycopg

    schema = f"we\\ird {uuid.uuid4().hex[:6]}"
    quoted = '"' + schema + '"'
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {quoted}")
        db.execute(f"CREATE TABLE {quoted}.t (a int)")
        db.execute(f"INSERT INTO {quoted}.t VALUES (1), (2)")
    try:
        params = _params(postgres_dsn, "SCHEMA")
        text = json.dumps(params).replace('"SCHEMA"', '"' + schema + '"')  # the backslash as typed
        ok(engine, f"CREATE DATABASE pg WITH ENGINE = 'postgres', PARAMETERS = {text}")
        assert rows(engine, "SELECT a FROM pg.t ORDER BY a") == [[1], [2]]
        assert rows(engine, "SELECT * FROM pg (SELECT a FROM t ORDER BY a)") == [[1], [2]]
        assert rows(engine, "SELECT * FROM pg (SELECT current_schema() AS s)") == [[schema]]
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {quoted} CASCADE")


def test_a_one_letter_password_is_masked_without_garbling_the_error(engine: Engine,
                                                                    postgres_dsn: str) -> None:
    """The password was replaced wherever its text occurred: a password `p` turned the
    connection error into '******assword authentication failed for user "******ostgres"'.
    A short secret is masked only where it stands alone (interface.secrets.scrub_secret)."""
    params = {**_params(postgres_dsn, "public"), "password": "p"}
    result = engine.query(f"CREATE DATABASE pgp WITH ENGINE = 'postgres', PARAMETERS = {json.dumps(params)}")
    message = getattr(result, "error_message", "")
    assert "password authentication failed" in message and "postgres" in message, result
    assert "******" not in message, message
