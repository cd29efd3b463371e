"""An SQL error keeps its kind from where it starts to both doors: the same failure is MySQL
1146 / SQLSTATE 42S02 on the MySQL door and `error_code` 1146 over HTTP (MindsDB's code, the
MySQL number), and so on for each kind. The code comes from the kind, never from the words:
statements whose messages read nothing like the old forms still get their kind's code.
"""

from __future__ import annotations

from pathlib import Path

import mysql.connector
import pytest

import kbsql
from kbsql.interface.errors import (
    KINDS,
    NotSupported,
    ParseError,
    PermissionDenied,
    UnknownDatabase,
    UnknownTable,
)
from kbsql.interface.results import ErrorResult
from kbsql.server.mysql.error_codes import code_of
from kbsql.server.process import ServerProcess
from tests.mysql.conftest import http_sql

CASES = {
    "unknown table": ("SELECT * FROM nowhere", 1146, "42S02"),
    "unknown knowledge base": ("DROP KNOWLEDGE_BASE no_such_kb", 1146, "42S02"),
    "unknown database": ("SELECT * FROM nodb.t", 1049, "42000"),
    # the message says "Cannot create a table ...": no form of "not found" the door once matched
    "unknown database, other words": ("CREATE TABLE nodb.t (SELECT 1)", 1049, "42000"),
    "parse error": ("SELEC 1", 1064, "42000"),
    "not supported": ("SELECT llm('x')", 1235, "42000"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_kind_gives_the_code_on_both_doors(door: ServerProcess, case: str) -> None:
    query, number, sqlstate = CASES[case]
    answer = http_sql(door.url, query)
    assert answer["type"] == "error" and answer["error_code"] == number
    assert set(answer) == {"type", "error_code", "error_message", "context"}  # MindsDB's shape
    conn = mysql.connector.connect(host="127.0.0.1", port=door.mysql_port, user="mindsdb", password="",
                                   database="mindsdb", use_pure=True, connection_timeout=10)
    try:
        with pytest.raises(mysql.connector.Error) as refused:
            cursor = conn.cursor()
            cursor.execute(query)
            cursor.fetchall()
        assert (refused.value.errno, refused.value.sqlstate) == (number, sqlstate)
        assert refused.value.msg == answer["error_message"]  # the same line on both doors
    finally:
        conn.close()


def test_a_reworded_message_keeps_its_code() -> None:
    """The MySQL code is read from the kind: a message in another kind's words changes nothing."""
    for cls, number in ((UnknownTable, 1146), (UnknownDatabase, 1049), (ParseError, 1064),
                        (NotSupported, 1235)):
        result = ErrorResult("Syntax error: Table 'x' not found, not supported", kind=cls.problem_type)
        assert result.error_code == number and code_of(result.kind) == number
    assert code_of(ErrorResult("Table 'x' not found in database 'y'").kind) == 1105  # no kind, no guess


def test_every_kind_has_one_mysql_number() -> None:
    numbers = [codes.mysql for codes in KINDS.values()]
    assert len(set(numbers)) == len(numbers)  # so error_code on the wire names one kind


def test_a_path_the_engine_may_not_open_is_a_permission(tmp_path: Path) -> None:
    """A data source inside the data directory: refused as a permission (MySQL 1227), with
    its own line, in SQL; still the 400 "Wrong argument" MindsDB's REST route answers."""
    client = kbsql.connect(data_dir=tmp_path / "data")
    try:
        client.sql("SELECT 1")
        query = f"CREATE DATABASE p WITH ENGINE = 'files', PARAMETERS = {{\"path\": \"{tmp_path / 'data'}\"}}"
        result = client.api.query(query, {"db": "mindsdb"})
        assert isinstance(result, ErrorResult) and "data directory" in result.error_message
        assert (result.kind, result.error_code) == (PermissionDenied.problem_type, 1227)
    finally:
        client.close()
