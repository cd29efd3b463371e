"""Real MySQL clients against a real `kbsql serve --mysql-port`: pymysql, mysql-connector-python
(text and binary protocol), SQLAlchemy `mysql+pymysql://` with pandas.read_sql, and Debian's
mariadb-client (`mysql -e`)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
import subprocess

import mysql.connector
import pandas as pd
import pymysql
import pytest
import sqlalchemy as sa

from kbsql.server.process import ServerProcess
from tests.mysql.conftest import connect, fetch

SEARCH = "SELECT id, chunk_content, metadata, relevance FROM kb WHERE content = 'refund policy' LIMIT 2"
JOIN = ("SELECT k.id, k.chunk_content, s.price, s.sold_on FROM kb AS k JOIN df.sales AS s "
        "ON k.id = s.doc_id WHERE k.content = 'refund policy' LIMIT 3")


def test_pymysql_searches_a_knowledge_base(door: ServerProcess) -> None:
    with connect(door) as conn:
        names, rows = fetch(conn, SEARCH)
        assert names == ["id", "chunk_content", "metadata", "relevance"]
        assert rows[0][0] == "3" and "refund" in rows[0][1]
        assert json.loads(rows[0][2])["color"] == "blue"  # metadata: JSON text
        assert isinstance(rows[0][3], float) and rows[0][3] >= rows[1][3]
        # the client binds its own parameters (text protocol): quotes are data
        _, quoted = fetch(conn, "SELECT id FROM kb WHERE content = %s AND color = %s LIMIT 5",
                          ("O'Brien's shop", "red"))
        assert {r[0] for r in quoted} <= {"1", "4"} and quoted


def test_mysql_connector_text_and_binary_protocols(door: ServerProcess) -> None:
    conn = mysql.connector.connect(host="127.0.0.1", port=door.mysql_port, user="mindsdb", password="",
                                   database="mindsdb", use_pure=True, connection_timeout=10)
    try:
        text = conn.cursor()
        text.execute(SEARCH)
        text_rows = text.fetchall()
        binary = conn.cursor(prepared=True)
        binary.execute("SELECT id, chunk_content, metadata, relevance FROM kb WHERE content = ? LIMIT 2",
                       ("refund policy",))
        assert binary.fetchall() == text_rows  # the same answer over both protocols
        assert [d[0] for d in binary.description] == ["id", "chunk_content", "metadata", "relevance"]
        # values of each type bound by the binary protocol, read back typed
        binary.execute("SELECT ? AS i, ? AS s, ? AS f, ? AS n, ? AS d, ? AS day, ? AS ts",
                       (7, "it's \\' -- not a comment", 2.5, None, decimal.Decimal("1.25"),
                        dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5)))
        assert binary.fetchall() == [(7, "it's \\' -- not a comment", decimal.Decimal("2.5"), None,
                                      decimal.Decimal("1.25"), "2024-01-02", "2024-01-02 03:04:05")]
        binary.execute("SELECT id, amount, order_date, created_at, status FROM shop.orders "
                       "WHERE id >= ? ORDER BY id", (2,))
        assert binary.fetchall() == [
            (2, decimal.Decimal("5.01"), dt.date(2024, 3, 2), dt.datetime(2024, 3, 2, 10, 0), None),
            (3, decimal.Decimal("100.00"), dt.date(2024, 3, 2), dt.datetime(2024, 3, 2, 11, 15, 30), "paid"),
            (4, decimal.Decimal("7.50"), dt.date(2024, 3, 5), dt.datetime(2024, 3, 5, 8, 0), "paid")]
        with pytest.raises(mysql.connector.errors.ProgrammingError) as refused:
            binary.execute("SELECT * FROM nowhere WHERE id = ?", (1,))
        assert refused.value.errno == 1146 and "nowhere" in refused.value.msg
        with pytest.raises(mysql.connector.errors.ProgrammingError) as refused:  # a search: a KB
            binary.execute("SELECT * FROM no_kb WHERE content = ?", ("refunds",))
        assert refused.value.errno == 1146 and "Knowledge base 'no_kb' doesn't exist" in refused.value.msg
        binary.execute("SELECT ? AS back", ("still works",))
        assert binary.fetchall() == [("still works",)]
    finally:
        conn.close()


def test_sqlalchemy_and_pandas_read_sql(door: ServerProcess) -> None:
    engine = sa.create_engine(f"mysql+pymysql://mindsdb@127.0.0.1:{door.mysql_port}/mindsdb")
    try:
        found = pd.read_sql(SEARCH, engine)
        assert list(found.columns) == ["id", "chunk_content", "metadata", "relevance"]
        assert found["relevance"].dtype == "float64" and found["id"].iloc[0] == "3"
        joined = pd.read_sql(JOIN, engine)
        assert list(joined.columns) == ["id", "chunk_content", "price", "sold_on"]
        assert joined.iloc[0]["id"] == "3" and joined.iloc[0]["price"] == 120.0
        assert joined["sold_on"].iloc[0] == pd.Timestamp("2024-02-03")
        with engine.connect() as conn:
            bound = conn.execute(sa.text("SELECT id FROM kb WHERE content = :q LIMIT 1"), {"q": "dogs"})
            assert bound.fetchall() == [("2",)]
        inspector = sa.inspect(engine)
        assert {"mindsdb", "information_schema"} <= set(inspector.get_schema_names())
        assert inspector.has_table("kb") and not inspector.has_table("no_such_table")
        assert [c["name"] for c in inspector.get_columns("kb")][:4] == ["id", "chunk_id", "chunk_content",
                                                                        "metadata"]
    finally:
        engine.dispose()


def test_the_mysql_command_line_client(door: ServerProcess) -> None:
    mysql_client = shutil.which("mysql") or shutil.which("mariadb")
    if mysql_client is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs mariadb-client (.ci/run): the mysql client must be tested")
        pytest.skip("no mysql client installed (apt-get install mariadb-client)")
    run = subprocess.run(
        [mysql_client, "--protocol=TCP", "-h", "127.0.0.1", "-P", str(door.mysql_port), "-u", "mindsdb",
         "--batch", "mindsdb", "-e",
         "SELECT id, chunk_content FROM kb WHERE content = 'refund policy' LIMIT 1; "
         "SELECT DATABASE(); SELECT * FROM nowhere"],
        capture_output=True, text=True, timeout=60)
    assert run.stdout.splitlines() == ["id\tchunk_content",
                                       "3\tthe refund policy allows returns within 30 days",
                                       "DATABASE()", "mindsdb"]
    assert run.returncode == 1
    assert "ERROR 1146 (42S02) at line 1: Table 'nowhere' not found in database 'mindsdb'" in run.stderr


def test_use_switches_the_project_and_a_session_keeps_it(door: ServerProcess) -> None:
    with connect(door) as admin:
        fetch(admin, "CREATE PROJECT IF NOT EXISTS other")
    with connect(door) as conn, connect(door) as neighbour:
        assert fetch(conn, "SELECT DATABASE()")[1] == [("mindsdb",)]
        fetch(conn, "USE other")
        assert fetch(conn, "SELECT DATABASE()")[1] == [("other",)]
        fetch(conn, "CREATE KNOWLEDGE_BASE only_here USING embedding_model = "
                    "{'provider': 'kbsql', 'model_name': 'hash-64'}")
        assert ("only_here",) in fetch(conn, "SHOW TABLES")[1]
        assert ("only_here",) not in fetch(neighbour, "SHOW TABLES")[1]  # still in mindsdb
        conn.select_db("mindsdb")  # COM_INIT_DB, as drivers switch
        assert fetch(conn, "SELECT DATABASE()")[1] == [("mindsdb",)]
        with pytest.raises(pymysql.err.OperationalError) as refused:
            conn.select_db("no_such_project")
        assert refused.value.args[0] == 1049
        fetch(conn, "DROP KNOWLEDGE_BASE other.only_here")
