"""A real `kbsql serve --port 0 --mysql-port 0` for the MySQL door's tests, seeded once.

Seeded over HTTP, the other door: a knowledge base `kb` (the cheap deterministic `hash-64`
embedder) with a metadata column, DuckDB data sources `shop` (orders with decimals, dates,
timestamps and NULLs) and `lab` (a column of each type; `big`, BIG_ROWS rows), and an
uploaded Parquet table `sales`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pandas as pd
import pymysql
import pytest

from kbsql.interface.literals import quote_literal
from kbsql.server.process import ServerProcess, spawn
from tests.datasources.makers import make_duckdb

HASH = "{'provider': 'kbsql', 'model_name': 'hash-64'}"
BIG_ROWS = 100_000
DOCS = [(1, "cats purr when they are happy", "red"), (2, "dogs bark at strangers", None),
        (3, "the refund policy allows returns within 30 days", "blue"),
        (4, "O'Brien's shop sells \"quoted\" things", "red")]


def http_sql(url: str, query: str, db: str = "mindsdb") -> dict[str, Any]:
    answer = httpx.post(f"{url}/api/sql/query", json={"query": query, "context": {"db": db}}, timeout=60)
    answer.raise_for_status()
    return answer.json()


def make_lab(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("""CREATE TABLE types AS SELECT
        1::TINYINT AS ti, -2::SMALLINT AS si, 3::INTEGER AS i, 9007199254740993::BIGINT AS bi,
        170141183460469231731687303715884105727::HUGEINT AS hi, 18446744073709551615::UBIGINT AS ub,
        1.5::FLOAT AS f, 0.1::DOUBLE AS d, 'NaN'::DOUBLE AS nan, 19.99::DECIMAL(10, 2) AS dec,
        true AS b, DATE '2024-02-29' AS day, TIME '12:34:56.5' AS tm,
        TIMESTAMP '2024-03-01 09:30:00.123456' AS ts, TIMESTAMPTZ '2024-03-01 12:00:00+02' AS tz,
        INTERVAL 26 HOUR AS iv, 'bytes'::BLOB AS bl, [1, 2] AS l, {'a': 1, 'b': 'x'} AS st,
        'héllo ✓' AS s, NULL::INTEGER AS n""")
    con.execute(f"CREATE TABLE big AS SELECT range AS i, 'row ' || range AS s FROM range({BIG_ROWS})")
    con.close()
    return path


def seed(server: ServerProcess, folder: Path) -> None:
    url = server.url
    for query in [
        f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {HASH}, metadata_columns = ['color'], "
        "id_column = 'id'",
        "INSERT INTO kb (id, content, color) VALUES " + ", ".join(
            f"({i}, {quote_literal(text)}, {quote_literal(color)})" for i, text, color in DOCS),
        f"CREATE DATABASE shop WITH ENGINE = 'duckdb', PARAMETERS = {{'database': "
        f"'{make_duckdb(folder / 'shop.duckdb')}'}}",
        f"CREATE DATABASE lab WITH ENGINE = 'duckdb', PARAMETERS = {{'database': "
        f"'{make_lab(folder / 'lab.duckdb')}'}}",
    ]:
        body = http_sql(url, query)
        assert body["type"] != "error", body
    frame = pd.DataFrame({"doc_id": ["1", "3", "4"], "price": [9.5, 120.0, 3.25],
                          "sold_on": pd.to_datetime(["2024-01-02", "2024-02-03", "2024-03-04"])})
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    httpx.put(f"{url}/api/files/sales", content=buffer.getvalue(),
              headers={"Content-Type": "application/vnd.apache.parquet"}).raise_for_status()


@pytest.fixture(scope="session")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("mysql-door")
    with spawn(folder / "data", args=("--mysql-port", "0")) as server:
        assert server.mysql_port
        seed(server, folder)
        yield server


def connect(server: ServerProcess, **kwargs: Any) -> pymysql.connections.Connection:
    options: dict[str, Any] = {"host": "127.0.0.1", "port": server.mysql_port, "user": "mindsdb",
                               "database": "mindsdb", "connect_timeout": 10, "read_timeout": 60}
    options.update(kwargs)
    return pymysql.connect(**options)


def fetch(conn: pymysql.connections.Connection, query: str,
          args: Any = None) -> tuple[list[str], list[tuple]]:
    with conn.cursor() as cursor:
        cursor.execute(query, args)
        names = [d[0] for d in cursor.description or []]
        return names, list(cursor.fetchall())
