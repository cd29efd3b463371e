"""Data sources on real files made in the test: DuckDB, SQLite, a folder of files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from kbsql.engine import Engine
from tests.datasources.makers import ok, rows


def test_duckdb_source_tables_types_and_schemas(connected: Engine) -> None:
    assert rows(connected, "SHOW TABLES FROM shop") == [["archive.old_orders"], ["orders"]]
    got = rows(connected, "SELECT id, amount, order_date, created_at, status FROM shop.orders "
                          "ORDER BY id LIMIT 2")
    # dates and timestamps as ISO strings, decimals as numbers, NULL as None
    assert got == [[1, 19.99, "2024-03-01", "2024-03-01 09:30:00.000000", "new"],
                   [2, 5.01, "2024-03-02", "2024-03-02 10:00:00.000000", None]]
    assert rows(connected, "SELECT id FROM shop.archive.old_orders") == [[99]]
    described = rows(connected, "DESCRIBE shop.orders")
    assert ["amount", "DECIMAL(18,2)"] in described or ["amount", "DECIMAL(4,2)"] in described \
        or any(r[0] == "amount" and r[1].startswith("DECIMAL") for r in described)
    assert [r[0] for r in described] == ["id", "customer_id", "amount", "order_date", "created_at",
                                         "status"]


def test_sqlite_source_reads_live_rows(connected: Engine, sources: dict[str, Path]) -> None:
    assert rows(connected, "SHOW TABLES FROM crm") == [["customers"], ["products"]]
    assert rows(connected, "SELECT name FROM crm.customers WHERE country IS NULL") == [["Chen"]]
    import sqlite3

    db = sqlite3.connect(sources["sqlite"])
    db.execute("INSERT INTO customers VALUES (40, 'Dana', 'US')")
    db.commit()
    db.close()
    assert rows(connected, "SELECT count(*) FROM crm.customers") == [[4]]


def test_files_source_each_file_is_a_table(connected: Engine, sources: dict[str, Path]) -> None:
    assert rows(connected, "SHOW FULL TABLES FROM fs") == [
        ["events", "BASE TABLE"], ["regions", "BASE TABLE"], ["scores", "BASE TABLE"]]
    assert rows(connected, "SELECT kind FROM fs.events ORDER BY id") == [["click"], ["view"]]
    # NaN in a Parquet float column answers null
    assert rows(connected, "SELECT customer_id, score FROM fs.scores ORDER BY 1") == [
        [10, 0.5], [20, None], [30, 2.25]]
    # a file added later is a new table; an edited file is read fresh
    pd.DataFrame({"a": [1, 2]}).to_csv(sources["files"] / "late.csv", index=False)
    assert rows(connected, "SELECT sum(a) FROM fs.late") == [[3]]
    pd.DataFrame({"a": [5]}).to_csv(sources["files"] / "late.csv", index=False)
    assert rows(connected, "SELECT sum(a) FROM fs.late") == [[5]]


def test_single_file_source(engine: Engine, sources: dict[str, Path]) -> None:
    path = sources["files"] / "regions.csv"
    ok(engine, f"CREATE DATABASE one ENGINE = 'files', PARAMETERS = {{\"path\": \"{path}\"}}")
    assert rows(engine, "SELECT region, count(*) FROM one.regions GROUP BY region ORDER BY region") \
        == [["EU", 2], ["NA", 1]]


def test_bad_parameters_store_nothing(engine: Engine, tmp_path: Path) -> None:
    missing = tmp_path / "nope.duckdb"
    result = engine.query(f"CREATE DATABASE bad ENGINE = 'duckdb', PARAMETERS = "
                          f"{{\"database\": \"{missing}\"}}")
    assert result.type == "error" and "does not exist" in result.error_message
    result = engine.query("CREATE DATABASE bad ENGINE = 'oracle', PARAMETERS = {\"x\": 1}")
    assert result.type == "error" and "the data source engine 'oracle'" in result.error_message
    result = engine.query("CREATE DATABASE bad ENGINE = 'files'")
    assert result.type == "error" and "path" in result.error_message
    assert ["bad"] not in rows(engine, "SHOW DATABASES")


def test_show_databases_drop_and_masked_secrets(engine: Engine, sources: dict[str, Path]) -> None:
    ok(engine, f"CREATE DATABASE shop ENGINE = 'duckdb', PARAMETERS = "
               f"{{\"database\": \"{sources['duckdb']}\", \"password\": \"hunter2\", "
               f"\"api_key\": \"sk-live-123\"}}")
    show = ok(engine, "SHOW DATABASES")
    assert show.column_names == ["Database"]
    assert {"information_schema", "mindsdb", "df", "shop"} <= {r[0] for r in show.data}
    info = rows(engine, "SELECT NAME, TYPE, ENGINE, CONNECTION_DATA FROM information_schema.databases "
                        "WHERE NAME = 'shop'")
    assert info[0][:3] == ["shop", "data", "duckdb"]
    shown = json.loads(info[0][3])
    assert shown["password"] == "******" and shown["api_key"] == "******"
    assert shown["database"] == str(sources["duckdb"].resolve())
    assert "hunter2" not in json.dumps(rows(engine, "SELECT * FROM information_schema.databases"))
    # the name is taken for projects too
    again = engine.query("CREATE PROJECT shop")
    assert again.type == "error" and "already exists" in again.error_message
    ok(engine, "CREATE DATABASE IF NOT EXISTS shop ENGINE = 'duckdb'")
    ok(engine, "DROP DATABASE shop")
    gone = engine.query("SELECT * FROM shop.orders")
    assert gone.type == "error" and "Database 'shop' not found" in gone.error_message
    assert engine.query("DROP DATABASE shop").type == "error"
    ok(engine, "DROP DATABASE IF EXISTS shop")


def test_sources_survive_a_restart(engine: Engine, sources: dict[str, Path]) -> None:
    ok(engine, f"CREATE DATABASE crm ENGINE = 'sqlite', PARAMETERS = "
               f"{{\"db_file\": \"{sources['sqlite']}\"}}")
    data_dir = engine.data_dir
    engine.close()
    with Engine(data_dir) as again:
        assert rows(again, "SELECT name FROM crm.customers WHERE id = 10") == [["Ann"]]
