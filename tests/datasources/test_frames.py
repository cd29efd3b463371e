"""Registered DataFrames: `client.register("sales", df)` -> table `df.sales`."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

import kbsql
from kbsql.engine import Engine
from kbsql.interface.errors import BadRequest
from tests.datasources.makers import rows


def test_register_query_replace_and_restart(engine: Engine) -> None:
    sales = pd.DataFrame({"region": ["n", "s", "n"], "amount": [10, 5, 7],
                          "day": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"])})
    assert engine.register_dataframe("sales", sales) == 3
    query = "SELECT region, sum(amount) AS total FROM df.sales GROUP BY region ORDER BY region"
    assert rows(engine, query) == [["n", 17], ["s", 5]]
    sales.loc[0, "amount"] = 1000  # a snapshot: later edits of the caller's frame do not leak
    assert rows(engine, query) == [["n", 17], ["s", 5]]
    engine.register_dataframe("sales", pd.DataFrame({"region": ["e"], "amount": [1]}))
    assert rows(engine, query) == [["e", 1]]  # the same text, the new table
    assert rows(engine, "SHOW TABLES FROM df") == [["sales"]]
    data_dir = engine.data_dir
    engine.close()
    with Engine(data_dir) as again:  # stored as Parquet in the data dir
        assert rows(again, query) == [["e", 1]]
        assert again.unregister_dataframe("sales")
        gone = again.query(query)
        assert gone.type == "error" and "Table 'sales' not found in database 'df'" in gone.error_message


def test_embedded_result_carries_the_frame(engine: Engine) -> None:
    engine.register_dataframe("m", pd.DataFrame({"x": [1.5, np.nan], "s": ["a", None]}))
    result = engine.query("SELECT x, s FROM df.m ORDER BY s NULLS LAST")
    frame = result.to_pandas()
    assert list(frame.columns) == ["x", "s"] and len(frame) == 2
    assert result.data == [[1.5, "a"], [None, None]]  # NaN and NULL both answer null


def test_bad_registrations(engine: Engine) -> None:
    with pytest.raises(BadRequest, match="not valid"):
        engine.register_dataframe("bad name; drop", pd.DataFrame({"a": [1]}))
    with pytest.raises(BadRequest, match="Expected a pandas DataFrame"):
        engine.register_dataframe("ok_name", [1, 2, 3])
    with pytest.raises(BadRequest, match="not valid"):  # `$` let a final newline through
        engine.register_dataframe("sales\n", pd.DataFrame({"a": [1]}))
    assert rows(engine, "SHOW TABLES FROM df") == []


def test_register_through_the_client(client: kbsql.Client) -> None:
    """Embedded and remote alike (remote uploads Parquet to PUT /api/files/{name})."""
    frame = pd.DataFrame({"k": ["a", "b", "a"], "v": [1.25, 2.5, 3.0]})
    assert client.register("things", frame) == 3
    got = client.query("SELECT k, sum(v) AS total FROM df.things GROUP BY k ORDER BY k")
    assert got.values.tolist() == [["a", 4.25], ["b", 2.5]]
    if not client.is_embedded:  # a body that is not a table is a 400 problem, nothing stored
        response = httpx.put(f"{client.api.base_url}/api/files/junk", content=b"not parquet")
        assert response.status_code == 400
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["title"] == "Invalid file"
        assert client.sql("SHOW TABLES FROM df").data == [["things"]]


def test_a_refused_registration_keeps_the_table_of_the_same_name_in_other_case(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering `sales` over `Sales` replaces it; one refused for the disk reserve stores
    nothing and must lose nothing either: the old file was deleted before the reserve was
    checked, so the refusal ('nothing was stored') took the user's table with it."""
    import collections

    from kbsql.engine import faults
    from kbsql.interface.errors import InsufficientStorage

    engine.register_dataframe("Sales", pd.DataFrame({"amount": [10, 5]}))
    usage = collections.namedtuple("usage", "total used free")
    reserve = engine.config.disk_reserve_mb * 2**20
    monkeypatch.setattr(faults.shutil, "disk_usage", lambda path: usage(0, 0, reserve + 2**20))
    with pytest.raises(InsufficientStorage, match="nothing was stored"):
        engine.register_dataframe("sales", pd.DataFrame({"t": ["x" * 50] * 100_000}))
    assert rows(engine, "SELECT sum(amount) AS total FROM df.sales") == [[15]]


def test_a_timedelta_column_reads_as_an_interval(engine: Engine) -> None:
    """DuckDB's Parquet reader reads an Arrow duration as the bare integer of its unit (a
    5-second span was the number 5, an hour in pandas' units 3600000000) where the frame
    registered in memory read as an INTERVAL: the stored file must answer what the frame
    held, and a comparison with an INTERVAL must work."""
    import pyarrow as pa

    engine.register_dataframe("waits", pd.DataFrame({"wait": pd.to_timedelta([1, 2], unit="h")}))
    engine.register_dataframe("spans", pa.table({"s": pa.array([5, 6], pa.duration("s"))}))
    assert rows(engine, "SELECT CAST(wait AS VARCHAR) FROM df.waits WHERE wait > INTERVAL 90 MINUTE") == \
        [["02:00:00"]]
    assert rows(engine, "SELECT typeof(s) AS t FROM df.spans") == [["INTERVAL"]] * 2
    assert rows(engine, "SELECT CAST(max(s) AS VARCHAR) FROM df.spans") == [["00:00:06"]]


def test_a_table_name_is_never_a_path(engine: Engine, tmp_path: Path) -> None:
    """df.<name> was looked up as the file `frames/<name>.parquet` whatever the name, so
    df.`/any/where/x` or df.`../../x` read any Parquet file the server could, past the
    path policy (--allow-path) every file SQL names is held to."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"secret": ["s3cr3t"]}), tmp_path / "outside.parquet")
    engine.register_dataframe("inside", pd.DataFrame({"n": [1]}))
    relative = os.path.relpath(tmp_path / "outside", engine.data_dir / "frames")
    for name in (str(tmp_path / "outside"), relative):
        result = engine.query(f"SELECT * FROM df.`{name}`")
        assert result.type == "error" and "s3cr3t" not in str(result.to_json())
        assert "not found" in result.error_message.lower() or "does not exist" in result.error_message
    assert rows(engine, "SELECT n FROM df.INSIDE") == [[1]]


def test_a_stored_table_has_its_own_columns_only(engine: Engine) -> None:
    """DuckDB's Parquet reader gives every file virtual columns (filename, file_row_number,
    file_index): once stored tables were read from their Parquet, SELECT filename FROM df.a
    JOIN df.docs ... (only docs has a filename) was refused as ambiguous, where it answered
    docs' file names, and df.a answered a `filename` it never had."""
    engine.register_dataframe("a", pd.DataFrame({"id": [1, 2]}))
    engine.register_dataframe("docs", pd.DataFrame({"id": [1, 2], "filename": ["x.pdf", "y.pdf"]}))
    assert rows(engine, "SELECT filename FROM df.a JOIN df.docs ON a.id = docs.id ORDER BY 1") == \
        [["x.pdf"], ["y.pdf"]]
    for column in ("filename", "file_row_number"):
        result = engine.query(f"SELECT {column} FROM df.a", {})
        assert result.type == "error" and column in result.error_message
