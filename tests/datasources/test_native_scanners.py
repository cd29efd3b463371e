"""SQLite tables are scanned by DuckDB's sqlite scanner, not read whole into Python.

The large-table test is what a user of a big SQLite file notices: a filtered query over
200k rows allocates next to nothing in Python (the old reader built a Python tuple per
row, tens of MB here), and DuckDB's plan reads the file with SQLITE_SCAN fetching only
the columns the query uses.
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path

from mindsdb_sql_parser import parse_sql

from kbsql.engine import Engine
from kbsql.engine.sql.tables.select import compile_select
from tests.datasources.makers import ok, rows

ROWS = 200_000


def make_big_sqlite(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE events (id INTEGER, grp TEXT, amount REAL, payload TEXT)")
    db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)",
                   ((i, f"g{i % 100}", i * 0.5, "x" * 60 + str(i)) for i in range(ROWS)))
    db.execute("CREATE TABLE mixed (n INTEGER)")
    db.execute("INSERT INTO mixed VALUES (1), ('not a number')")
    db.commit()
    db.close()
    return path


def explain(engine: Engine, query: str) -> str:
    plan = compile_select(engine.sql, parse_sql(query), {"db": "mindsdb"})
    with engine.sql.duck.lock:
        return "\n".join(r[1] for r in engine.sql.duck.con.sql(f"EXPLAIN {plan.sql}").fetchall())


def test_where_on_a_large_sqlite_table_streams_through_duckdb(engine: Engine, tmp_path: Path) -> None:
    path = make_big_sqlite(tmp_path / "big.sqlite")
    ok(engine, f"CREATE DATABASE big ENGINE = 'sqlite', PARAMETERS = {{\"db_file\": \"{path}\"}}")
    query = "SELECT count(*) AS n, sum(amount) AS s FROM big.events WHERE grp = 'g7'"
    rows(engine, query)  # warm: extension loaded, file attached
    tracemalloc.start()
    try:
        got = rows(engine, query)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    expected = [i for i in range(ROWS) if i % 100 == 7]
    assert got == [[len(expected), sum(i * 0.5 for i in expected)]]
    assert peak < 5_000_000, f"{peak} bytes allocated in Python for one filtered query"
    plan = explain(engine, query)
    assert "SQLITE_SCAN" in plan and "events" in plan
    assert "payload" not in plan  # an unused column is not even fetched
    # rows written by another program after the source was connected are seen
    db = sqlite3.connect(path)
    db.execute("INSERT INTO events VALUES (-1, 'g7', 1000.0, '')")
    db.commit()
    db.close()
    assert rows(engine, query)[0][0] == len(expected) + 1


def test_sqlite_value_of_the_wrong_type_is_a_clear_error(engine: Engine, tmp_path: Path) -> None:
    path = make_big_sqlite(tmp_path / "mixed.sqlite")
    ok(engine, f"CREATE DATABASE m ENGINE = 'sqlite', PARAMETERS = {{\"db_file\": \"{path}\"}}")
    result = engine.query("SELECT n FROM m.mixed")
    assert result.type == "error" and '"n"' in result.error_message
    assert rows(engine, "SELECT count(*) FROM m.events WHERE id < 10") == [[10]]
