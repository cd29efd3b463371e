"""Confinement at every execution: a file a data source reads is swapped for a symlink after
it was checked, and the server must not read past the swap. Real `kbsql serve` with a token
and `--allow-path`; the symlinks point at the operator's `config.json` (an API key in clear),
at the catalog (another knowledge base's key) and at a file outside the allowed folder.

Each case first runs a statement so that its plan is cached or its source attached, then
swaps, then runs the same text again: the check must happen at this execution, not only
when the text or the source was first seen."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from kbsql.server.process import ServerProcess, spawn

TOKEN = "tok-swaps"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR_KEY = "sk-operator-SECRET-1234"
KB_KEY = "sk-kb-SECRET-5678"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("swaps")
    data, allowed, outside = root / "data", root / "allowed", root / "outside"
    for folder in (data, allowed, outside):
        folder.mkdir()
    (data / "config.json").write_text(json.dumps({"default_model": {
        "provider": "openai", "model_name": "gpt-x", "api_key": OPERATOR_KEY}}))
    (outside / "secret.csv").write_text(f"k,v\napi_key,{OPERATOR_KEY}\n")
    with spawn(data, args=("--token", TOKEN, "--allow-path", str(allowed))) as server:
        # a knowledge base whose key sits in the catalog (what a swap to it would leak)
        made = httpx.post(f"{server.url}/api/projects/mindsdb/knowledge_bases", headers=HEADERS,
                          json={"knowledge_base": {"name": "keyed", "embedding_model": {
                              "provider": "kbsql", "model_name": "hash-64", "api_key": KB_KEY}}})
        assert made.status_code == 201, made.text
        yield {"data": data, "allowed": allowed, "outside": outside, "server": server}


def sql(place: dict, query: str) -> dict:
    server: ServerProcess = place["server"]
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query}, headers=HEADERS,
                        timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def no_secret(answer: dict) -> None:
    text = json.dumps(answer)
    assert OPERATOR_KEY not in text and KB_KEY not in text, text


def swap_to_link(path: Path, target: Path) -> None:
    """Replace `path` by a symlink to `target` in one rename (what an attacker would do)."""
    link = path.with_name(path.name + ".swap")
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    os.replace(link, path)


def test_a_cached_plan_checks_its_file_again(place: dict) -> None:
    folder = place["allowed"] / "plan"
    folder.mkdir()
    (folder / "sales.csv").write_text("region,amount\nnorth,10\n")
    assert sql(place, f"CREATE DATABASE planned WITH ENGINE = 'files', "
                      f"PARAMETERS = {{\"path\": \"{folder}\"}}")["type"] == "ok"
    query = "SELECT * FROM planned.sales"
    for _ in range(3):  # compiled once, then served from the plan cache
        assert sql(place, query)["data"] == [["north", 10]]
    for target in (place["data"] / "config.json", place["outside"] / "secret.csv"):
        swap_to_link(folder / "sales.csv", target)
        answer = sql(place, query)
        no_secret(answer)
        assert answer["type"] == "error", answer
        assert "--allow-path" in answer["error_message"] or "data directory" in answer["error_message"]
        assert len(answer["error_message"].splitlines()) == 1


def test_a_sqlite_source_reopened_per_query_is_checked_at_each_use(place: dict) -> None:
    path = place["allowed"] / "shop.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE knowledge_bases (name TEXT, embedding_model TEXT)")
        db.execute("INSERT INTO knowledge_bases VALUES ('mine', 'nothing secret')")
    assert sql(place, f"CREATE DATABASE lite WITH ENGINE = 'sqlite', "
                      f"PARAMETERS = {{\"db_file\": \"{path}\"}}")["type"] == "ok"
    query = "SELECT * FROM lite.knowledge_bases"
    assert sql(place, query)["data"] == [["mine", "nothing secret"]]
    swap_to_link(path, place["data"] / "catalog.sqlite")
    for _ in range(2):
        answer = sql(place, query)
        no_secret(answer)
        assert answer["type"] == "error" and "data directory" in answer["error_message"], answer


def test_a_duckdb_source_swapped_is_refused(place: dict) -> None:
    path = place["allowed"] / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    con.close()
    outside = place["outside"] / "other.duckdb"
    con = duckdb.connect(str(outside))
    con.execute(f"CREATE TABLE t AS SELECT '{OPERATOR_KEY}' AS x")
    con.close()
    assert sql(place, f"CREATE DATABASE duck WITH ENGINE = 'duckdb', "
                      f"PARAMETERS = {{\"database\": \"{path}\"}}")["type"] == "ok"
    assert sql(place, "SELECT x FROM duck.t")["data"] == [[1]]
    swap_to_link(path, outside)
    answer = sql(place, "SELECT x FROM duck.t")
    no_secret(answer)
    assert answer["type"] == "error" and "--allow-path" in answer["error_message"], answer


def test_a_file_swapped_back_and_forth_during_queries_never_leaks(place: dict) -> None:
    """The race: a thread swaps the file and a symlink to config.json as fast as it can while
    the same query runs again and again. What is read is what was opened and checked, so
    every answer is either the file's rows or a refusal."""
    folder = place["allowed"] / "race"
    folder.mkdir()
    real = folder / "keep.csv.real"
    real.write_text("region,amount\nnorth,10\n")
    (folder / "t.csv").write_text("region,amount\nnorth,10\n")
    assert sql(place, f"CREATE DATABASE racy WITH ENGINE = 'files', "
                      f"PARAMETERS = {{\"path\": \"{folder}\"}}")["type"] == "ok"
    stop = threading.Event()

    def swapper() -> None:
        while not stop.is_set():
            swap_to_link(folder / "t.csv", place["data"] / "config.json")
            time.sleep(0.002)
            copy = folder / "t.csv.back"
            copy.write_text(real.read_text())
            os.replace(copy, folder / "t.csv")
            time.sleep(0.002)

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    seen = {"rows": 0, "refused": 0}
    deadline, cap = time.monotonic() + 3, time.monotonic() + 60
    try:  # 3 s of races, and at least 11 answers however loaded the machine is
        while time.monotonic() < deadline or (sum(seen.values()) <= 10 and time.monotonic() < cap):
            answer = sql(place, "SELECT * FROM racy.t")
            no_secret(answer)
            seen["rows" if answer["type"] == "table" else "refused"] += 1
            if answer["type"] == "table":
                assert answer["data"] == [["north", 10]], answer
    finally:
        stop.set()
        thread.join()
    assert seen["rows"] + seen["refused"] > 10, seen


def test_a_write_checks_the_source_file_again(place: dict) -> None:
    """A write to a data source opens it for writing at that statement, checked there: a
    source swapped for a link to the catalog (or out of --allow-path) is refused, and neither
    the catalog nor the outside file is written."""
    path = place["allowed"] / "written.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x INTEGER)")
    duck_path, outside = place["allowed"] / "written.duckdb", place["outside"] / "kept.duckdb"
    for file in (duck_path, outside):
        with duckdb.connect(str(file)) as con:
            con.execute("CREATE TABLE t (x INTEGER)")
    assert sql(place, f"CREATE DATABASE wlite WITH ENGINE = 'sqlite', "
                      f"PARAMETERS = {{\"db_file\": \"{path}\"}}")["type"] == "ok"
    assert sql(place, f"CREATE DATABASE wduck WITH ENGINE = 'duckdb', "
                      f"PARAMETERS = {{\"database\": \"{duck_path}\"}}")["type"] == "ok"
    for db in ("wlite", "wduck"):
        assert sql(place, f"INSERT INTO {db}.t (x) VALUES (1)")["affected_rows"] == 1
    swap_to_link(path, place["data"] / "catalog.sqlite")
    swap_to_link(duck_path, outside)
    for query, why in [("DROP TABLE wlite.knowledge_bases", "data directory"),
                       ("CREATE TABLE wlite.planted (SELECT 1 AS x)", "data directory"),
                       ("INSERT INTO wduck.t (x) VALUES (2)", "--allow-path")]:
        answer = sql(place, query)
        no_secret(answer)
        assert answer["type"] == "error" and why in answer["error_message"], (query, answer)
    with duckdb.connect(str(outside), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)
    listed = httpx.get(f"{place['server'].url}/api/projects/mindsdb/knowledge_bases", headers=HEADERS)
    assert [kb["name"] for kb in listed.json()] == ["keyed"]  # the catalog is whole
