"""A UNION's parts keep the LIMIT and ORDER BY written inside their parentheses, over both protocols.

MindsDB's flows/test_mysql_api_extended.py::test_union_operator sends `(SELECT ... LIMIT 5) UNION
(SELECT ... LIMIT 5)` and expects rows of both parts (MySQL and MindsDB answer 10): the parser drops
the parentheses, and its rendering read as one LIMIT of the whole union answered 5 rows of the
first part alone. A LIMIT after an unparenthesized last part is still the union's, as MySQL reads it.
"""

from __future__ import annotations

import mysql.connector
import pymysql
import pytest

from kbsql.server.process import ServerProcess
from tests.mysql.conftest import connect, fetch

# shop.orders (tests/datasources/makers.py): ids 1, 2 of customer 10, 3 of 20, 4 of 30
ANSWERS = [
    ("(SELECT id FROM shop.orders WHERE customer_id = 10 ORDER BY id LIMIT 1) UNION ALL "
     "(SELECT id FROM shop.orders WHERE customer_id = 30 LIMIT 1)", [1, 4]),
    ("(SELECT id FROM shop.orders WHERE customer_id = 10 ORDER BY id DESC LIMIT 1) UNION "
     "(SELECT id FROM shop.orders WHERE customer_id = 20) UNION "
     "(SELECT id FROM shop.orders ORDER BY id LIMIT 1 OFFSET 3)", [2, 3, 4]),
    ("WITH c AS (SELECT id FROM shop.orders) (SELECT id FROM c ORDER BY id DESC LIMIT 1) UNION ALL "
     "(SELECT id FROM c WHERE id < 3)", [1, 2, 4]),  # the WITH reaches every part
    ("SELECT id FROM shop.orders WHERE customer_id = 10 UNION ALL "
     "SELECT id FROM shop.orders WHERE customer_id = 30 ORDER BY id DESC LIMIT 2", [4, 2]),
    ("(SELECT id FROM shop.orders WHERE customer_id = 10) UNION ALL "
     "(SELECT id FROM shop.orders WHERE customer_id = 30) ORDER BY id LIMIT 2", [1, 2]),
]


@pytest.mark.parametrize(("statement", "ids"), ANSWERS)
def test_each_part_keeps_its_own_limit(door: ServerProcess, statement: str, ids: list[int]) -> None:
    ordered = "ORDER BY id DESC LIMIT 2" in statement or "ORDER BY id LIMIT 2" in statement
    with connect(door) as conn:
        _, rows = fetch(conn, statement)
    got = [row[0] for row in rows]
    assert (got if ordered else sorted(got)) == ids
    conn = mysql.connector.connect(host="127.0.0.1", port=door.mysql_port, user="mindsdb", password="",
                                   database="mindsdb", use_pure=True)
    try:
        cursor = conn.cursor(prepared=True)
        cursor.execute(statement)
        got = [row[0] for row in cursor.fetchall()]
    finally:
        conn.close()
    assert (got if ordered else sorted(got)) == ids


def test_an_offset_after_a_parenthesized_last_part_is_refused(door: ServerProcess) -> None:
    """The parser hangs `OFFSET 3` on the part whose LIMIT is inside the parentheses: one line."""
    with connect(door) as conn, pytest.raises(pymysql.err.MySQLError) as caught:
        fetch(conn, "(SELECT id FROM shop.orders) UNION (SELECT id FROM shop.orders LIMIT 2) OFFSET 3")
    assert caught.value.args[1] == (
        "A UNION's last part has a LIMIT inside its parentheses and an OFFSET after them: "
        "wrap the UNION in a subquery (SELECT * FROM (...) AS u LIMIT ... OFFSET ...)")


def test_a_parser_without_the_rule_refuses_parts_with_their_own_limit(monkeypatch, tmp_path) -> None:
    """mindsdb_sql_parser is not pinned: a version whose grammar lacks the `( select )` rule
    parses every statement as before, and a UNION whose last part has a LIMIT (the part's or
    the whole UNION's: without the rule it cannot be told) is refused in one line rather than
    read one way silently (it raised RuntimeError on every statement)."""
    import kbsql
    from kbsql.engine.sql.parse import union_parts
    from kbsql.interface.errors import SqlError

    monkeypatch.setattr(union_parts, "_installed", False)
    monkeypatch.setattr(union_parts, "_missing", True)
    with kbsql.connect(tmp_path / "d") as client:
        assert client.sql("SELECT 1 AS a UNION ALL SELECT 2").data == [[1], [2]]
        assert client.sql("(SELECT 1 AS a LIMIT 1) UNION ALL (SELECT 2)").data == [[1], [2]]
        with pytest.raises(SqlError) as caught:
            client.sql("(SELECT 1 AS a LIMIT 1) UNION ALL (SELECT 2 LIMIT 1)")
    assert "not supported with this version of mindsdb_sql_parser" in str(caught.value)
