"""Real data files made inside a test: a DuckDB database, a SQLite database, a folder of
CSV / Parquet / JSON files. Small, with the types that are easy to get wrong in JSON
(dates, timestamps, decimals, NULL, NaN)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from kbsql.engine import Engine
from kbsql.interface.results import SqlResult, TableResult


def make_duckdb(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("""
        CREATE TABLE orders AS SELECT * FROM (VALUES
            (1, 10, DECIMAL '19.99', DATE '2024-03-01', TIMESTAMP '2024-03-01 09:30:00', 'new'),
            (2, 10, DECIMAL '5.01',  DATE '2024-03-02', TIMESTAMP '2024-03-02 10:00:00', NULL),
            (3, 20, DECIMAL '100.00', DATE '2024-03-02', TIMESTAMP '2024-03-02 11:15:30', 'paid'),
            (4, 30, DECIMAL '7.50',  DATE '2024-03-05', TIMESTAMP '2024-03-05 08:00:00', 'paid')
        ) AS t(id, customer_id, amount, order_date, created_at, status)""")
    con.execute("CREATE SCHEMA archive")
    con.execute("CREATE TABLE archive.old_orders AS SELECT 99 AS id")
    con.close()
    return path


def make_sqlite(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
    db.executemany("INSERT INTO customers VALUES (?, ?, ?)",
                   [(10, "Ann", "FR"), (20, "Bob's shop", "DE"), (30, "Chen", None)])
    db.execute("CREATE TABLE products (id INTEGER, description TEXT, category TEXT)")
    db.executemany("INSERT INTO products VALUES (?, ?, ?)", [
        (1, "A waterproof hiking jacket for mountain rain", "outdoor"),
        (2, "Stainless steel espresso machine with milk frother", "kitchen"),
        (3, "Lightweight tent for two people, easy to pitch", "outdoor"),
        (4, "Cast iron skillet that keeps heat for searing steak", "kitchen"),
    ])
    db.commit()
    db.close()
    return path


def make_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"country": ["FR", "DE", "US"], "region": ["EU", "EU", "NA"]}).to_csv(
        folder / "regions.csv", index=False)
    pd.DataFrame({"customer_id": [10, 20, 30], "score": [0.5, float("nan"), 2.25]}).to_parquet(
        folder / "scores.parquet")
    (folder / "events.json").write_text(json.dumps(
        [{"id": 1, "kind": "click"}, {"id": 2, "kind": "view"}]), encoding="utf-8")
    (folder / "notes.md").write_text("not a table", encoding="utf-8")
    return folder


def ok(engine: Engine, query: str, context: dict[str, Any] | None = None) -> SqlResult:
    """Run a statement that must succeed; a failure shows the engine's message."""
    result = engine.query(query, context or {})
    assert result.type != "error", f"{query}\n-> {result.error_message}"  # type: ignore[union-attr]
    return result


def rows(engine: Engine, query: str, context: dict[str, Any] | None = None) -> list[list[Any]]:
    result = ok(engine, query, context)
    assert isinstance(result, TableResult)
    return result.data


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    return {"duckdb": make_duckdb(tmp_path / "shop.duckdb"),
            "sqlite": make_sqlite(tmp_path / "crm.sqlite"),
            "files": make_files(tmp_path / "files")}


@pytest.fixture
def connected(engine: Engine, sources: dict[str, Path]) -> Engine:
    """`shop` (duckdb), `crm` (sqlite), `fs` (files) connected through SQL."""
    ok(engine, f"CREATE DATABASE shop WITH ENGINE = 'duckdb', PARAMETERS = "
               f"{{\"database\": \"{sources['duckdb']}\"}}")
    ok(engine, f"CREATE DATABASE crm ENGINE = 'sqlite', PARAMETERS = "
               f"{{\"db_file\": \"{sources['sqlite']}\"}}")
    ok(engine, f"CREATE DATABASE fs ENGINE = 'files', PARAMETERS = {{\"path\": \"{sources['files']}\"}}")
    return engine

