"""Faults in words, against a real `kbsql serve`: a damaged chunk store answers a problem of
its own type naming the knowledge base and the way out (other knowledge bases keep
working, and dropping it works); a full disk answers 507 and loses nothing acknowledged."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from kbsql.interface.errors import KINDS, PROBLEM_TYPE_HEADER, InsufficientStorage
from kbsql.server.process import ServerProcess, spawn

KBS = "/api/projects/mindsdb/knowledge_bases"
NO_RESERVE = ("--disk-reserve-mb", "0")  # a disk filled to its last byte, past the reserve
HASH = {"provider": "kbsql", "model_name": "hash-64"}


def create_kb(url: str, name: str) -> None:
    made = httpx.post(f"{url}{KBS}", json={"knowledge_base": {"name": name, "embedding_model": HASH}})
    assert made.status_code == 201, made.text


def put_rows(url: str, name: str, rows: list[dict]) -> httpx.Response:
    return httpx.put(f"{url}{KBS}/{name}", json={"knowledge_base": {"rows": rows}}, timeout=60)


def sql(url: str, query: str) -> dict:
    answer = httpx.post(f"{url}/api/sql/query", json={"query": query}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def damage(path: Path) -> None:
    """Overwrite the head of every page but the first (each b-tree page's type and cell
    pointers): what a bad disk or a torn copy leaves, found by any read of those pages."""
    size = path.stat().st_size
    with path.open("r+b") as f:
        for offset in range(4096, size, 4096):
            f.seek(offset)
            f.write(b"\xff" * 64)


def test_a_damaged_store_is_named_with_the_way_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with spawn(data) as server:
        for name in ("notes", "other"):
            create_kb(server.url, name)
            rows = [{"id": i, "content": f"{name} text number {i} " * 20} for i in range(200)]
            assert put_rows(server.url, name, rows).is_success
        kb_id = httpx.get(f"{server.url}{KBS}/notes").json()["id"]
    damage(data / "knowledge_bases" / str(kb_id) / "chunks.sqlite")
    with spawn(data) as server:
        answer = sql(server.url, "SELECT id FROM notes WHERE content = 'text' LIMIT 3")
        message = answer.get("error_message", "")
        assert answer["type"] == "error" and "mindsdb.notes" in message, answer
        assert "DROP KNOWLEDGE_BASE mindsdb.notes" in message and "backup" in message
        assert len(message.splitlines()) == 1
        put = put_rows(server.url, "notes", [{"id": "new", "content": "more"}])
        assert put.status_code == 500 and put.headers["content-type"].startswith("application/problem+json")
        body = put.json()
        assert body["title"] == "Knowledge base damaged" and "mindsdb.notes" in body["detail"], body
        assert put.headers[PROBLEM_TYPE_HEADER] == "urn:kbsql:problem:store-damaged"
        assert "Internal server error" not in put.text and "DatabaseError" not in body["title"]
        other = sql(server.url, "SELECT id FROM other WHERE content = 'other text' LIMIT 2")
        assert other["type"] == "table" and len(other["data"]) == 2  # the others keep working
        assert sql(server.url, "DROP KNOWLEDGE_BASE notes")["type"] == "ok"  # the way out
        create_kb(server.url, "notes")
        assert put_rows(server.url, "notes", [{"id": "a", "content": "again"}]).is_success
        assert sql(server.url, "SELECT id FROM notes")["data"] == [["a"]]
        assert "Traceback" not in server.log_text()


def small_disk(data: Path, megabytes: int, kb_megabytes: int | None = None,
               sources: tuple[Path, int] | None = None) -> tuple[str, ...]:
    """Run the server in its own mount namespace where `data` is a tmpfs of that size; with
    `kb_megabytes`, its knowledge_bases folder is a tmpfs of its own (the catalog can then
    fill while the chunk stores still have room); with `sources` (folder, size), a folder
    for data-source files (never inside the data directory) is one too."""
    data.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size=1m tmpfs "{data}"'],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {probe.stderr.strip()}")
    script = f'mount -t tmpfs -o size={megabytes}m tmpfs "$0"'
    if kb_megabytes:
        script += (f' && mkdir "$0/knowledge_bases"'
                   f' && mount -t tmpfs -o size={kb_megabytes}m tmpfs "$0/knowledge_bases"')
    if sources:
        script += f' && mkdir -p "{sources[0]}" && mount -t tmpfs -o size={sources[1]}m tmpfs "{sources[0]}"'
    return ("unshare", "-m", "sh", "-c", script + ' && exec "$@"', str(data))


def fill(server: ServerProcess, data: Path) -> Path:
    """Fill the server's data file system (seen through its mount namespace) to the last byte."""
    filler = Path(f"/proc/{server.process.pid}/root") / data.relative_to("/") / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 1):  # then the last partial block
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def count(url: str, kb: str) -> int:
    return int(sql(url, f"SELECT COUNT(DISTINCT id) FROM {kb}")["data"][0][0])


def insert_until_refused(url: str, kb: str) -> tuple[list[str], httpx.Response | None]:
    """PUT batches of 20 rows of ~2 KB until one is refused: (the ids acknowledged, the
    refusal; None if 200 batches all went in)."""
    acknowledged: list[str] = []
    for batch in range(200):
        rows = [{"id": f"{batch}-{i}", "content": f"row {batch} {i} " + "words " * 300} for i in range(20)]
        answer = put_rows(url, kb, rows)
        if answer.status_code != 200:
            return acknowledged, answer
        acknowledged += [r["id"] for r in rows]
    return acknowledged, None


def test_a_full_disk_answers_507_and_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with spawn(data, prefix=small_disk(data, 6), args=NO_RESERVE) as server:
        create_kb(server.url, "kb")
        acknowledged, full = insert_until_refused(server.url, "kb")
        assert full is not None, "the 6 MB disk never filled"
        assert full.status_code == 507, full.text
        assert full.headers["content-type"].startswith("application/problem+json")
        assert full.headers[PROBLEM_TYPE_HEADER] == "urn:kbsql:problem:insufficient-storage"
        assert "disk is full" in full.json()["detail"] and acknowledged
        stored = {r[0] for r in sql(server.url, "SELECT id FROM kb")["data"]}
        assert stored == set(acknowledged)  # nothing acknowledged is lost, nothing refused is in
        via_sql = sql(server.url, "INSERT INTO kb (id, content) VALUES ('s', '" + "w " * 20000 + "')")
        assert via_sql["type"] == "error" and "disk is full" in via_sql["error_message"], via_sql
        assert sql(server.url, "SELECT 1")["data"] == [[1]]  # and the server still answers
        assert "Traceback" not in server.log_text()


def test_inserts_stop_at_the_disk_reserve_and_the_catalog_keeps_its_room(tmp_path: Path) -> None:
    """--disk-reserve-mb on a real 24 MB file system: a knowledge-base insert that would
    leave less than 12 MB free is refused (507, naming the flag) before any of it is
    written, what was acknowledged stays, and the catalog's own writes still have room (a
    new knowledge base, a project; any insert waits for space to be freed). Without the
    reserve the first write to fail is whichever comes when the disk is full, the
    catalog's included."""
    data = tmp_path / "data"
    with spawn(data, prefix=small_disk(data, 24), args=("--disk-reserve-mb", "12")) as server:
        create_kb(server.url, "kb")
        acknowledged, refused = insert_until_refused(server.url, "kb")
        assert refused is not None and refused.status_code == 507, refused and refused.text
        assert "would leave less than 12 MB free" in refused.json()["detail"] and acknowledged
        assert "--disk-reserve-mb" in refused.json()["detail"]
        assert {r[0] for r in sql(server.url, "SELECT id FROM kb")["data"]} == set(acknowledged)
        create_kb(server.url, "other")  # the catalog, the query log still write
        assert sql(server.url, "CREATE PROJECT after_the_reserve")["type"] == "ok"
        assert put_rows(server.url, "other", [{"id": "a", "content": "small"}]).status_code == 507
        assert "Traceback" not in server.log_text()


def test_a_batch_answered_507_left_nothing_of_itself(tmp_path: Path) -> None:
    """The catalog's disk fills while the chunk stores still have room: the batch's chunks
    used to commit before the catalog refused its bookkeeping, so a 507 "not stored" came
    with all its rows stored. Now the batch is all or nothing, on every insert path."""
    data = tmp_path / "data"
    with spawn(data, prefix=small_disk(data, 8, kb_megabytes=24), args=NO_RESERVE) as server:
        create_kb(server.url, "kb")
        first = [{"id": f"a{i}", "content": f"first {i}"} for i in range(5)]
        assert put_rows(server.url, "kb", first).is_success
        filler = fill(server, data)
        rows = [{"id": f"b{i}", "content": f"second batch row {i} " + "words " * 50} for i in range(300)]
        full = put_rows(server.url, "kb", rows)
        assert full.status_code == 507, full.text
        assert "disk is full" in full.json()["detail"]
        assert count(server.url, "kb") == 5  # nothing of the refused batch
        assert restarted_count(server, data, tmp_path / "copy") == 5  # and after a restart on its files
        values = ", ".join(f"('c{i}', 'third {i}')" for i in range(50))
        via_sql = httpx.post(f"{server.url}/api/sql/query", timeout=60,
                             json={"query": f"INSERT INTO kb (id, content) VALUES {values}"}).json()
        assert via_sql["type"] == "error" and "disk is full" in via_sql["error_message"], via_sql
        assert count(server.url, "kb") == 5
        filler.unlink()
        assert put_rows(server.url, "kb", rows).is_success  # sent again once there is room
        assert count(server.url, "kb") == 305
        assert "Traceback" not in server.log_text()


def restarted_count(server: ServerProcess, data: Path, copy: Path) -> int:
    """The rows of `kb` a new server finds in a copy of `server`'s data directory, taken while
    it is stopped (SIGSTOP): what a restart after a power loss at that moment would read. The
    audit found the refused batch's 2,000 rows there (the live count said 5)."""
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        shutil.copytree(Path(f"/proc/{pid}/root") / data.relative_to("/"), copy,
                        ignore=shutil.ignore_patterns("filler", "tmp"))
    finally:
        os.kill(pid, signal.SIGCONT)
    with spawn(copy) as again:
        return count(again.url, "kb")


def test_a_background_insert_stopped_by_a_full_disk_says_what_it_stored(tmp_path: Path) -> None:
    """`INSERT ... USING batch_size` stores each batch on its own: when the disk fills in the
    middle, its error says how many rows are in, and that is what the knowledge base holds."""
    data = tmp_path / "data"
    with spawn(data, prefix=small_disk(data, 8, kb_megabytes=1), args=NO_RESERVE) as server:
        create_kb(server.url, "kb")
        started = sql(server.url, "INSERT INTO kb SELECT id, 'row ' || id || repeat(' words', 300) "
                                  "AS content FROM (SELECT unnest(range(3000)) AS id) USING batch_size = 50")
        query_id = started["data"][0][0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answer = sql(server.url, f"SELECT * FROM information_schema.queries WHERE id = {query_id}")
            row = dict(zip(answer["column_names"], answer["data"][0], strict=True))
            if row["ERROR"] or row["FINISHED_AT"]:
                break
            time.sleep(0.2)
        assert "disk is full" in (row["ERROR"] or ""), row
        stored = count(server.url, "kb")
        assert 0 < stored < 3000 and f"{stored:,} of 3,000 rows stored" in row["ERROR"], (stored, row)
        assert row["PROCESSED_ROWS"] == stored
        assert "Traceback" not in server.log_text()


BIG = ("SELECT x.a * 1000 + y.c AS id, md5(CAST(x.a * 1000 + y.c AS VARCHAR)) AS b "
       "FROM (SELECT unnest(range(400)) AS a) AS x, (SELECT unnest(range(1000)) AS c) AS y")
"""400,000 rows, ~13 MB of text that does not compress (a range as a value is capped: two small ones)."""


def test_a_write_into_a_data_source_on_a_full_disk_stores_nothing(tmp_path: Path) -> None:
    """CREATE TABLE src.t (SELECT ...) and INSERT INTO src.t SELECT ... larger than the 2 MB
    left on the disk of a DuckDB and a SQLite source (issue 39): each answers the 507 kind
    saying nothing was stored, and nothing is (the write is rolled back whole); the sources
    take a small write after it, and the server answers on."""
    data = tmp_path / "data"
    sources = tmp_path / "sources"
    with spawn(data, prefix=small_disk(data, 8, sources=(sources, 16)), args=NO_RESERVE) as server:
        with duckdb.connect(str(tmp_path / "src.duckdb")) as made:
            made.execute("CREATE TABLE base AS SELECT 1 AS id, 'x' AS b")
        with contextlib.closing(sqlite3.connect(tmp_path / "src.sqlite")) as lite:
            lite.executescript("CREATE TABLE base (id INTEGER, b TEXT); INSERT INTO base VALUES (1, 'x');")
        folder = Path(f"/proc/{server.process.pid}/root") / sources.relative_to("/")
        for name in ("src.duckdb", "src.sqlite"):  # onto the server's small disk (its namespace)
            shutil.copyfile(tmp_path / name, folder / name)
        room = os.statvfs(folder)
        with (folder / "filler").open("wb") as filler:  # 2 MB left
            filler.write(b"\0" * (room.f_bavail * room.f_frsize - (2 << 20)))
        for made in (sql(server.url, "CREATE DATABASE wduck WITH ENGINE = 'duckdb', PARAMETERS = "
                                     f"{{'database': '{sources}/src.duckdb'}}"),
                     sql(server.url, "CREATE DATABASE wlite WITH ENGINE = 'sqlite', PARAMETERS = "
                                     f"{{'db_file': '{sources}/src.sqlite'}}")):
            assert made["type"] == "ok", made
        full_code = KINDS[InsufficientStorage.problem_type].mindsdb
        for db in ("wduck", "wlite"):
            for write, what in ((f"CREATE TABLE {db}.t ({BIG})", f"CREATE TABLE {db}.t"),
                                (f"INSERT INTO {db}.base {BIG}", f"INSERT INTO {db}.base")):
                answer = sql(server.url, write)
                assert answer["type"] == "error" and answer["error_code"] == full_code, (write, answer)
                message = answer["error_message"]
                assert message.startswith(f"The disk is full: {what} stored nothing"), message
                assert "src." not in message and len(message.splitlines()) == 1, message  # no server path
            tables = sql(server.url, f"SHOW TABLES FROM {db}")["data"]
            assert [row[0] for row in tables] == ["base"], tables  # no half-made table
            assert sql(server.url, f"SELECT count(*) FROM {db}.base")["data"] == [[1]]  # no row of it
        (folder / "filler").unlink()  # room again: the sources are whole and take writes
        for db in ("wduck", "wlite"):
            assert sql(server.url, f"INSERT INTO {db}.base (id, b) VALUES (2, 'y')")["type"] == "ok"
            assert sql(server.url, f"SELECT count(*) FROM {db}.base")["data"] == [[2]]
        assert sql(server.url, "SELECT 1")["data"] == [[1]]
        assert "Traceback" not in server.log_text()
