"""Faults in words, against a real `kbsql serve`: a damaged chunk store answers a problem of
its own type naming the knowledge base and the way out (other knowledge bases keep
working, and dropping it works); a full disk answers 507 and loses nothing acknowledged."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from kbsql.interface.errors import PROBLEM_TYPE_HEADER
from kbsql.server.process import spawn

KBS = "/api/projects/mindsdb/knowledge_bases"
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


def small_disk(data: Path, megabytes: int) -> tuple[str, ...]:
    """Run the server in its own mount namespace where `data` is a tmpfs of that size."""
    data.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size=1m tmpfs "{data}"'],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {probe.stderr.strip()}")
    return ("unshare", "-m", "sh", "-c",
            f'mount -t tmpfs -o size={megabytes}m tmpfs "$0" && exec "$@"', str(data))


def test_a_full_disk_answers_507_and_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with spawn(data, prefix=small_disk(data, 6)) as server:
        create_kb(server.url, "kb")
        acknowledged: list[str] = []
        full = None
        for batch in range(200):
            rows = [{"id": f"{batch}-{i}", "content": f"row {batch} {i} " + "words " * 300}
                    for i in range(20)]
            answer = put_rows(server.url, "kb", rows)
            if answer.status_code != 200:
                full = answer
                break
            acknowledged += [r["id"] for r in rows]
        assert full is not None, "the 6 MB disk never filled"
        assert full.status_code == 507, full.text
        assert full.headers["content-type"].startswith("application/problem+json")
        assert full.headers[PROBLEM_TYPE_HEADER] == "urn:kbsql:problem:insufficient-storage"
        assert "disk is full" in full.json()["detail"] and acknowledged
        stored = {r[0] for r in sql(server.url, "SELECT id FROM kb")["data"]}
        assert set(acknowledged) <= stored  # nothing acknowledged is lost
        via_sql = sql(server.url, "INSERT INTO kb (id, content) VALUES ('s', '" + "w " * 20000 + "')")
        assert via_sql["type"] == "error" and "disk is full" in via_sql["error_message"], via_sql
        assert sql(server.url, "SELECT 1")["data"] == [[1]]  # and the server still answers
        assert "Traceback" not in server.log_text()
