"""What SQL may open on a server: never kbsql's own files, and with a token only the folders
given with `--allow-path`. The data directory is the owner's alone (0700, files 0600).
Real server on loopback; the embedded engine refuses its own files too."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pandas as pd
import pytest

import kbsql
from kbsql.interface.errors import SqlError
from kbsql.server.process import ServerProcess, spawn

TOKEN = "tok-confine"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("confine")
    allowed, outside = root / "allowed", root / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "sales.csv").write_text("region,amount\nnorth,10\nsouth,5\n")
    (outside / "secret.csv").write_text("k,v\napi_key,sk-live\n")
    return {"root": root, "data": root / "data", "allowed": allowed, "outside": outside}


@pytest.fixture(scope="module")
def server(folders: dict[str, Path]) -> Iterator[ServerProcess]:
    with spawn(folders["data"], args=("--token", TOKEN, "--allow-path", str(folders["allowed"]))) \
            as proc:
        yield proc


def sql(server: ServerProcess, query: str) -> dict:
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query}, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_catalog_can_never_be_attached(server: ServerProcess, folders: dict[str, Path]) -> None:
    catalog = folders["data"] / "catalog.sqlite"
    assert catalog.exists()
    for engine, key, path in [("sqlite", "db_file", catalog), ("files", "path", folders["data"]),
                              ("duckdb", "database", catalog)]:
        answer = sql(server, f"CREATE DATABASE own WITH ENGINE = '{engine}', "
                             f"PARAMETERS = {{\"{key}\": \"{path}\"}}")
        assert answer["type"] == "error" and "data directory" in answer["error_message"], answer
    databases = [r[0] for r in sql(server, "SHOW DATABASES")["data"]]
    assert "own" not in databases


def test_a_path_outside_allow_path_is_refused(server: ServerProcess, folders: dict[str, Path]) -> None:
    for path in (folders["outside"], "/etc"):
        answer = sql(server, "CREATE DATABASE leak WITH ENGINE = 'files', "
                             f"PARAMETERS = {{\"path\": \"{path}\"}}")
        assert answer["type"] == "error" and "--allow-path" in answer["error_message"], answer
        assert len(answer["error_message"].splitlines()) == 1
    assert "leak" not in [r[0] for r in sql(server, "SHOW DATABASES")["data"]]


def test_a_path_under_allow_path_works_and_a_symlink_out_of_it_is_refused(
        server: ServerProcess, folders: dict[str, Path]) -> None:
    made = sql(server, f"CREATE DATABASE shop WITH ENGINE = 'files', "
                       f"PARAMETERS = {{\"path\": \"{folders['allowed']}\"}}")
    assert made["type"] == "ok", made
    rows = sql(server, "SELECT region, amount FROM shop.sales ORDER BY amount")["data"]
    assert rows == [["south", 5], ["north", 10]]
    (folders["allowed"] / "sneaky.csv").symlink_to(folders["outside"] / "secret.csv")
    answer = sql(server, "SELECT * FROM shop.sneaky")
    assert answer["type"] == "error" and "--allow-path" in answer["error_message"], answer


def test_the_embedded_engine_refuses_its_own_files(tmp_path: Path) -> None:
    with kbsql.connect(data_dir=tmp_path / "home") as client:
        client.register("frame", pd.DataFrame({"a": [1]}))
        for engine, key, path in [("sqlite", "db_file", tmp_path / "home" / "catalog.sqlite"),
                                  ("files", "path", tmp_path / "home" / "frames")]:
            with pytest.raises(SqlError, match="data directory"):
                client.sql(f"CREATE DATABASE own WITH ENGINE = '{engine}', "
                           f"PARAMETERS = {{\"{key}\": \"{path}\"}}")
        other = tmp_path / "elsewhere.csv"
        other.write_text("x\n1\n")
        client.sql(f"CREATE DATABASE mine WITH ENGINE = 'files', PARAMETERS = {{\"path\": \"{other}\"}}")
        assert client.query("SELECT x FROM mine.elsewhere")["x"].tolist() == [1]


def test_the_data_directory_is_private(server: ServerProcess, folders: dict[str, Path]) -> None:
    base = f"{server.url}/api/projects/mindsdb/knowledge_bases"
    made = httpx.post(base, headers=HEADERS, json={"knowledge_base": {
        "name": "notes", "embedding_model": {"provider": "kbsql", "model_name": "hash-16"}}})
    assert made.status_code == 201, made.text
    put = httpx.put(f"{base}/notes", headers=HEADERS,
                    json={"knowledge_base": {"rows": [{"id": 1, "content": "private"}]}})
    assert put.status_code == 200
    with kbsql.connect(server.url, token=TOKEN) as client:
        client.register("frame", pd.DataFrame({"a": [1, 2]}))
    server.stop()  # the index is written on the way out
    data = folders["data"]
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    seen = set()
    for folder, dirs, files in os.walk(data):
        for name in dirs:
            assert stat.S_IMODE((Path(folder) / name).stat().st_mode) == 0o700, name
        for name in files:
            seen.add(name)
            assert stat.S_IMODE((Path(folder) / name).stat().st_mode) == 0o600, name
    assert {"catalog.sqlite", "chunks.sqlite", "index.faiss", "frame.parquet"} <= seen
