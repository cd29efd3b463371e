"""Results over the MySQL door: the same answers and errors as the HTTP SQL route, and column
types a MySQL client can use, over the text and the binary protocol."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from typing import Any

import mysql.connector
import pymysql
import pytest
from pymysql.constants import FIELD_TYPE

from kbsql.server.process import ServerProcess
from tests.mysql.conftest import BIG_ROWS, HASH, connect, fetch, http_sql
from tests.mysql.raw import logged_in, packet, read_packet

# statements the HTTP route answers, with a table, OK or error: the MySQL door must agree
SAME_ANSWER = [
    "SELECT 1",
    "SELECT id, chunk_content, metadata, relevance, distance FROM kb WHERE content = 'refund' LIMIT 3",
    "SELECT id, chunk_content FROM kb WHERE color = 'red' ORDER BY id",
    "SELECT k.id, s.price FROM kb AS k JOIN df.sales AS s ON k.id = s.doc_id "
    "WHERE k.content = 'cats' LIMIT 2",
    "SELECT customer_id, count(*) AS n FROM shop.orders GROUP BY customer_id ORDER BY customer_id",
    "SHOW DATABASES",
    "SHOW FULL TABLES",
    "SHOW TABLES FROM df",
    "SHOW KNOWLEDGE_BASES",
    "DESCRIBE kb",
    "DESCRIBE shop.orders",
    "SELECT NAME, TYPE FROM information_schema.databases",
    "SELECT * FROM information_schema.knowledge_bases",
    "SELECT * FROM files.sales",  # MindsDB's name for uploads: the same answer on both doors
    "SELECT * FROM nowhere",
    "SELECT * FROM other_project.kb",
    "SELECT FROM kb",
    "SELECT @undefined_variable",
    "INSERT INTO shop.no_such_table (id) VALUES (9)",  # a write error (shop.orders is shared)
    "CREATE KNOWLEDGE_BASE kb USING embedding_model = {'provider': 'kbsql', 'model_name': 'hash-64'}",
    "DROP KNOWLEDGE_BASE no_such_kb",
    "SELECT * FROM kb WHERE content = 'x' AND no_such_column = 1",
]


def _canonical(value: Any) -> Any:
    """A value as JSON gives it, to compare the two doors' answers."""
    if isinstance(value, decimal.Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat(sep=" ")
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@pytest.mark.parametrize("statement", SAME_ANSWER)
def test_the_same_answer_as_http(door: ServerProcess, statement: str) -> None:
    expected = http_sql(door.url, statement)
    with connect(door) as conn:
        try:
            names, rows = fetch(conn, statement)
        except pymysql.err.MySQLError as exc:
            assert expected["type"] == "error", f"HTTP answered {expected}"
            assert exc.args[1] == expected["error_message"]  # the same one line
            return
    assert expected["type"] != "error", f"MySQL answered, HTTP said {expected}"
    if expected["type"] == "ok":
        assert names == []
        return
    assert names == expected["column_names"]
    http_rows = [[_canonical(v) for v in row] for row in expected["data"]]
    assert [[_canonical(v) for v in row] for row in rows] == http_rows


def test_types_over_the_text_protocol(door: ServerProcess) -> None:
    with connect(door) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT * FROM lab.types")
        kinds = {d[0]: d[1] for d in cursor.description}
        row = dict(zip(kinds, cursor.fetchone(), strict=True))
    assert kinds == {
        "ti": FIELD_TYPE.TINY, "si": FIELD_TYPE.SHORT, "i": FIELD_TYPE.LONG, "bi": FIELD_TYPE.LONGLONG,
        "hi": FIELD_TYPE.NEWDECIMAL, "ub": FIELD_TYPE.NEWDECIMAL, "f": FIELD_TYPE.FLOAT,
        "d": FIELD_TYPE.DOUBLE, "nan": FIELD_TYPE.DOUBLE, "dec": FIELD_TYPE.NEWDECIMAL, "b": FIELD_TYPE.TINY,
        "day": FIELD_TYPE.DATE, "tm": FIELD_TYPE.TIME, "ts": FIELD_TYPE.DATETIME, "tz": FIELD_TYPE.DATETIME,
        "iv": FIELD_TYPE.VAR_STRING, "bl": FIELD_TYPE.BLOB, "l": FIELD_TYPE.JSON, "st": FIELD_TYPE.JSON,
        "s": FIELD_TYPE.VAR_STRING, "n": FIELD_TYPE.LONG}
    assert row == {
        "ti": 1, "si": -2, "i": 3, "bi": 9007199254740993,  # past a double's 2**53: exact
        "hi": decimal.Decimal("170141183460469231731687303715884105727"),
        "ub": decimal.Decimal("18446744073709551615"), "f": 1.5, "d": 0.1, "nan": None,
        "dec": decimal.Decimal("19.99"), "b": 1, "day": dt.date(2024, 2, 29),
        "tm": dt.timedelta(hours=12, minutes=34, seconds=56.5),
        "ts": dt.datetime(2024, 3, 1, 9, 30, 0, 123456),
        "tz": dt.datetime(2024, 3, 1, 10, 0),  # 12:00+02 as UTC
        "iv": "26:00:00", "bl": b"bytes", "l": "[1, 2]", "st": '{"a": 1, "b": "x"}', "s": "héllo ✓",
        "n": None}


def test_types_over_the_binary_protocol_match_the_text_protocol(door: ServerProcess) -> None:
    conn = mysql.connector.connect(host="127.0.0.1", port=door.mysql_port, user="mindsdb", password="",
                                   database="mindsdb", use_pure=True)
    try:
        text, binary = conn.cursor(), conn.cursor(prepared=True)
        text.execute("SELECT * FROM lab.types")
        text_rows, text_types = text.fetchall(), [d[1] for d in text.description]
        binary.execute("SELECT * FROM lab.types WHERE i = ?", (3,))
        assert [d[1] for d in binary.description] == text_types
        assert binary.fetchall() == text_rows and len(text_rows) == 1
    finally:
        conn.close()


def test_knowledge_base_columns(door: ServerProcess) -> None:
    with connect(door) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT id, metadata, relevance, distance FROM kb WHERE content = 'dogs' LIMIT 4")
        kinds = [d[1] for d in cursor.description]
        rows = cursor.fetchall()
        cursor.execute("SELECT id, relevance FROM kb WHERE color IS NULL")  # a plain read: no scores
        plain = cursor.fetchall()
    assert kinds == [FIELD_TYPE.VAR_STRING, FIELD_TYPE.JSON, FIELD_TYPE.DOUBLE, FIELD_TYPE.DOUBLE]
    metadata = {r[0]: json.loads(r[1]) for r in rows}
    assert metadata["2"]["color"] is None and metadata["1"]["color"] == "red"  # NULL as JSON null
    assert all(isinstance(r[2], float) and isinstance(r[3], float) for r in rows)
    assert plain == (("2", None),)  # NULL as NULL


def test_a_large_result_arrives_whole_in_order(door: ServerProcess) -> None:
    with connect(door, cursorclass=pymysql.cursors.SSCursor) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT i, s FROM lab.big ORDER BY i")
        count = 0
        for i, s in cursor:
            assert i == count and s == f"row {count}"
            count += 1
    assert count == BIG_ROWS


def test_a_cursor_fetches_a_prepared_result_in_pieces(door: ServerProcess) -> None:
    """COM_STMT_EXECUTE with a read-only cursor, then COM_STMT_FETCH (JDBC's useCursorFetch)."""
    sock = logged_in(door)
    try:
        sock.sendall(packet(0, b"\x16SELECT i FROM lab.big WHERE i < ? ORDER BY i"))
        _, prepared = read_packet(sock)
        statement, _, params = struct.unpack("<IHH", prepared[1:9])
        assert prepared[0] == 0 and params == 1
        read_packet(sock), read_packet(sock)  # the parameter's definition, EOF
        sock.sendall(packet(0, b"\x17" + struct.pack("<IBI", statement, 0x01, 1) + b"\x00\x01"
                            + b"\x08\x00" + struct.pack("<q", 5)))
        assert read_packet(sock)[1] == b"\x01"  # one column
        read_packet(sock)
        _, opened = read_packet(sock)
        assert opened[0] == 0xFE and struct.unpack("<H", opened[3:5])[0] & 0x40  # CURSOR_EXISTS

        def fetch_rows(count: int) -> tuple[list[int], int]:
            sock.sendall(packet(0, b"\x1c" + struct.pack("<II", statement, count)))
            values = []
            while True:
                _, row = read_packet(sock)
                if row[0] == 0xFE:
                    return values, struct.unpack("<H", row[3:5])[0]
                values.append(struct.unpack("<q", row[2:10])[0])

        rows, status = fetch_rows(2)
        assert rows == [0, 1] and status & 0x40 and not status & 0x80  # more to come
        rows, status = fetch_rows(10)
        assert rows == [2, 3, 4] and status & 0x80  # LAST_ROW_SENT
    finally:
        sock.close()


def test_knowledge_base_listings_keep_their_column_types(door: ServerProcess) -> None:
    """SHOW KNOWLEDGE_BASES, DESCRIBE and information_schema.knowledge_bases send each column's
    type whatever its values: a NULL RERANKING_MODEL or ERROR went as MySQL's NULL type, or as
    INT through information_schema, and as text once set (MindsDB sends text for them), which
    a client that keeps a column's type (JDBC, Metabase) then fails to read. Found running
    MindsDB's flows/test_mysql_api_extended.py (DESCRIBE KNOWLEDGE_BASE after ALTER)."""
    text = [FIELD_TYPE.VAR_STRING] * 11 + [FIELD_TYPE.LONGLONG, FIELD_TYPE.VAR_STRING, FIELD_TYPE.LONGLONG]
    with connect(door) as conn, conn.cursor() as cursor:
        for statement in ["SHOW KNOWLEDGE_BASES", "DESCRIBE KNOWLEDGE_BASE kb",
                          "SELECT * FROM information_schema.knowledge_bases",
                          "SELECT * FROM information_schema.knowledge_bases WHERE NAME = 'kb'",
                          "SHOW KNOWLEDGE_BASES WHERE NAME = 'kb'"]:
            cursor.execute(statement)
            row = next(r for r in cursor.fetchall() if r[0] == "kb")
            assert [d[1] for d in cursor.description] == text, statement
            assert row[3] is None and row[12] is None, statement  # no reranker, no error: NULL


def test_knowledge_base_params_show_its_preprocessing(door: ServerProcess) -> None:
    """PARAMS shows the preprocessing a knowledge base chunks with, as MindsDB's (its `params`
    keep it), after CREATE and after ALTER: it showed neither, so an ALTER could not be seen to
    have taken effect. MindsDB's flows/test_mysql_api_extended.py::test_alter_kb_preprocessing
    (an xfail there: MindsDB's ALTER forgets to update it)."""
    read = "SELECT PARAMS FROM information_schema.knowledge_bases WHERE NAME = 'chunked'"
    with connect(door) as conn:
        fetch(conn, f"CREATE KNOWLEDGE_BASE chunked USING embedding_model = {HASH}, "
                    "preprocessing = {'chunk_size': 200, 'chunk_overlap': 20}")
        try:
            created = json.loads(fetch(conn, read)[1][0][0])
            fetch(conn, "ALTER KNOWLEDGE_BASE chunked USING "
                        "preprocessing = {'chunk_size': 300, 'chunk_overlap': 50}")
            altered = json.loads(fetch(conn, read)[1][0][0])
            described = json.loads(fetch(conn, "DESCRIBE KNOWLEDGE_BASE chunked")[1][0][8])
        finally:
            fetch(conn, "DROP KNOWLEDGE_BASE chunked")
    assert created["preprocessing"] == {"chunk_size": 200, "chunk_overlap": 20}
    assert altered["preprocessing"] == described["preprocessing"] == {"chunk_size": 300, "chunk_overlap": 50}
    assert altered["created_embedding_model"] == "kb_embedding_chunked"


def test_an_empty_answer_sends_no_null_typed_columns(door: ServerProcess) -> None:
    """A knowledge base's answer with no rows (or an all-NULL column of Python values) sent
    MySQL's NULL type for `id` and `metadata`, a type no MindsDB column has (its object columns
    go as text): a client that keeps a column's type (JDBC, Metabase) then has no type to read
    the next answer's values by. Found running MindsDB's flows/test_mysql_api_extended.py
    (SELECT from a knowledge base before its insert) through mysql-connector."""
    with connect(door) as conn, conn.cursor() as cursor:
        fetch(conn, f"CREATE KNOWLEDGE_BASE empty_kb USING embedding_model = {HASH}")
        try:
            cursor.execute("SELECT id, chunk_content, metadata, relevance FROM empty_kb")
            kinds = [d[1] for d in cursor.description]
            assert cursor.fetchall() == ()
        finally:
            fetch(conn, "DROP KNOWLEDGE_BASE empty_kb")
    assert kinds == [FIELD_TYPE.VAR_STRING, FIELD_TYPE.VAR_STRING, FIELD_TYPE.VAR_STRING, FIELD_TYPE.DOUBLE]
