"""Long statements take turns while Python parses and compiles them (sql/parse/long_statements.py):
one waits for the one compiling, within its deadline; a short one never waits; a long one whose
SQL engine work runs long lets the next long one compile meanwhile. The latency another user
sees is measured by benchmarks/bench_long_statements.py on a live server."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kbsql.engine.sql.parse.long_statements import LongStatements
from tests.sql.test_statement_control import heavy_engine

WIDE = "SELECT " + ", ".join(f"abs({i}) AS c{i}" for i in range(300))  # ~2,100 tokens


def test_a_long_statement_waits_for_the_one_compiling_a_short_one_does_not(tmp_path: Path) -> None:
    with heavy_engine(tmp_path / "d", {"statement_timeout": 2}) as engine:
        assert engine.query("SELECT 1").to_json()["data"] == [[1]]  # warm: first use imports the compiler
        slots = engine.sql.long_statements
        assert slots.is_long(WIDE) and not slots.is_long("SELECT 1")
        holding, release = threading.Event(), threading.Event()

        def compile_forever() -> None:  # another statement in its parse: it holds the one slot
            with slots.compiling(WIDE):
                holding.set()
                release.wait(10)

        thread = threading.Thread(target=compile_forever)
        thread.start()
        try:
            assert holding.wait(5)
            start = time.monotonic()
            answer = engine.query(WIDE).to_json()
            assert answer["type"] == "error"  # its deadline passed while it waited: said, not cut
            assert "compiling other long statements" in answer["error_message"]
            assert "long_statement_slots" in answer["error_message"]
            assert time.monotonic() - start < 4
            short = engine.query("SELECT 1").to_json()
            assert short.get("data") == [[1]], short  # short: never waits
        finally:
            release.set()
            thread.join()
        answer = engine.query(WIDE).to_json()  # its turn now: every column
        assert answer["type"] == "table" and len(answer["column_names"]) == 300
        assert answer["data"] == [list(range(300))]


def test_a_long_statement_running_in_the_sql_engine_lets_the_next_one_compile(tmp_path: Path) -> None:
    """The slot is given back when DuckDB starts (it lets go of the interpreter lock), so a
    long statement that runs for seconds does not hold every other long one back."""
    padding = " AND ".join(f"a.x <> {-i}" for i in range(1, 260))  # ~1,300 tokens
    heavy = f"SELECT count(*) FROM df.n a, df.n b, df.n c WHERE a.x + b.x + c.x = -1 AND {padding}"
    with heavy_engine(tmp_path / "d", {"statement_timeout": 8}) as engine:
        assert engine.sql.long_statements.is_long(heavy)
        assert engine.query("SELECT 1").to_json()["data"] == [[1]]  # warm: first use imports the compiler
        done: dict = {}
        thread = threading.Thread(target=lambda: done.update(answer=engine.query(heavy).to_json()))
        thread.start()
        time.sleep(1.0)  # compiled; now in DuckDB for the rest of its 8 s
        answer = engine.query(WIDE).to_json()
        still_running = thread.is_alive()  # held back, it would answer only once the heavy one ended
        thread.join()
        assert answer["type"] == "table" and len(answer["column_names"]) == 300, answer.get("error_message")
        assert still_running
        assert "stopped" in done["answer"]["error_message"] or "timeout" in done["answer"]["error_message"]


def test_inserts_of_value_rows_and_zero_tokens_are_never_long() -> None:
    rows = ", ".join(f"({i}, 'x')" for i in range(2000))
    assert not LongStatements().is_long(f"INSERT INTO files.t (a, b) VALUES {rows}")
    where = " OR ".join(["a = 1"] * 300)
    assert LongStatements().is_long(f"INSERT INTO files.t SELECT * FROM files.u WHERE {where}")
    assert LongStatements(tokens=0).slots is None
