"""The default spill cap read again as the disk fills (duck_settings.spill_refresh), while
DuckDB's spill files hold data: the statement that reads it again must not fail for it."""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path

import pytest

import kbsql.engine.sql.tables.duck_settings as duck_settings
from kbsql.engine.engine import Engine

MB = 2**20
Usage = namedtuple("Usage", "total used free")


def test_a_cap_below_a_held_spill_stops_it_growing_and_fails_no_statement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ~130 MB spilled (a sort in flight) when the disk filled to 40 MB free, the
    refreshed cap (~42 MB) is below what DuckDB holds and DuckDB refuses it: the unrelated
    statement that read it again answered "failed to adjust the 'max_temp_directory_size'",
    one every 5 s while the spill stayed. It answers; the cap is what the spill holds."""
    (tmp_path / "config.json").write_text(json.dumps({"sql_memory_mb": 64, "disk_reserve_mb": 0}))
    with Engine(tmp_path) as engine:
        duck = engine.sql.duck
        assert duck.spill_limit == 256 * MB  # 4x the memory limit
        # a temporary table larger than the memory limit stands in for a sort's spill in flight
        duck.con.execute("CREATE TEMP TABLE held AS SELECT md5(CAST(range AS VARCHAR)) || "
                         "md5(CAST(range * 7 AS VARCHAR)) AS h FROM range(3000000)")
        row = duck.con.execute("SELECT sum(size) FROM duckdb_temporary_files()").fetchone()
        held = int(row[0]) if row else 0
        assert held > 100 * MB, held
        monkeypatch.setattr(duck_settings.shutil, "disk_usage",
                            lambda path: Usage(10 * 2**30, 10 * 2**30 - 40 * MB, 40 * MB))
        duck._spill_checked -= 10  # the next statement reads the disk again
        answer = engine.query("SELECT 1 AS a")
        assert getattr(answer, "data", None) == [[1]], answer
        assert held <= duck.spill_limit <= held + MB, (held, duck.spill_limit)


def test_the_cap_is_read_again_while_a_long_statement_runs(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap was read again only when a statement started: a lone long sort spilling while
    the disk filled kept the cap it started with. The watchdog's ticks read it too while
    statements run (review57's note)."""
    import threading
    import time

    import kbsql.engine.sql.tables.duck as duck_module

    (tmp_path / "config.json").write_text(json.dumps({"sql_memory_mb": 64, "disk_reserve_mb": 0}))
    monkeypatch.setattr(duck_module, "SPILL_REFRESH_S", 0.2)
    readers: list[str] = []
    real = duck_module.spill_refresh

    def spy(*args):
        readers.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(duck_module, "spill_refresh", spy)
    with Engine(tmp_path) as engine:
        import pandas as pd

        engine.register_dataframe("n", pd.DataFrame({"x": range(12_000)}))
        engine.query("SELECT 1 AS a")  # the watchdog's thread is made
        readers.clear()
        start = time.monotonic()
        answer = engine.query("SELECT count(*) AS c FROM df.n a, df.n b WHERE (a.x * 7 + b.x) % 13 = 1")
        took = time.monotonic() - start
        assert getattr(answer, "data", None) is not None, answer
    assert took > 0.5, took  # long enough for ticks to come
    assert "kbsql-sql-watchdog" in readers, (readers, took)
