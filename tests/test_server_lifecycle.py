"""`kbsql serve` fails cleanly: SIGTERM/SIGINT stop it with exit 0 after in-flight requests
and with indexes saved; a busy port, a damaged catalog or a bad data directory give one
line and no traceback; a vector index ahead of its rows (a restored backup) is rebuilt;
an index that cannot be saved never fails the insert that committed. Real servers."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kbsql.server.process import ServerProcess, spawn

HASH = {"provider": "kbsql", "model_name": "hash-16"}
KBS = "/api/projects/mindsdb/knowledge_bases"


def create_kb(url: str, name: str) -> int:
    made = httpx.post(f"{url}{KBS}", json={"knowledge_base": {"name": name, "embedding_model": HASH}})
    assert made.status_code == 201, made.text
    return made.json()["id"]


def insert(url: str, name: str, rows: list[dict], timeout: float = 120) -> httpx.Response:
    return httpx.put(f"{url}{KBS}/{name}", json={"knowledge_base": {"rows": rows}}, timeout=timeout)


def search_ids(url: str, kb: str, text: str, limit: int = 50) -> list[str]:
    answer = httpx.post(f"{url}/api/sql/query", json={
        "query": f"SELECT id FROM {kb} WHERE content = '{text}' LIMIT {limit}"}).json()
    assert answer["type"] == "table", answer
    return sorted(r[0] for r in answer["data"])


def docs(prefix: str, word: str) -> list[dict]:
    return [{"id": f"{prefix}{i}", "content": f"{word} {i}"} for i in range(5)]


def stop_with(server: ServerProcess, sig: int) -> int:
    server.process.send_signal(sig)
    code = server.process.wait(timeout=60)
    return code


def sigterm_during_insert(server: ServerProcess, kb: str, rows: list[dict]) -> list[httpx.Response]:
    """Send SIGTERM a quarter of a second after a REST insert's body was sent (the request is
    in the server's hands then, however loaded the machine: a fixed delay from the start
    sometimes stopped the server before the client had sent it); the server must exit 0.
    The insert's answer, if it got one."""
    body = json.dumps({"knowledge_base": {"rows": rows}}).encode()
    sent = threading.Event()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1 << 16):
            yield body[start:start + (1 << 16)]
        sent.set()

    answers: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: answers.append(httpx.put(
        f"{server.url}{KBS}/{kb}", content=chunks(), timeout=120,
        headers={"content-type": "application/json", "content-length": str(len(body))})))
    worker.start()
    assert sent.wait(60), "the insert's body was not sent"
    time.sleep(0.25)
    assert stop_with(server, signal.SIGTERM) == 0
    worker.join(timeout=60)
    return answers


def index_header(path: Path) -> dict:
    raw = path.read_bytes()
    start = raw.index(b"\n") + 1
    return json.loads(raw[start:raw.index(b"\n", start)])


def store_version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0])


def test_sigterm_finishes_the_request_in_flight_saves_indexes_and_exits_0(tmp_path: Path) -> None:
    server = spawn(tmp_path / "data")
    try:
        small_id = create_kb(server.url, "small")
        create_kb(server.url, "big")
        assert insert(server.url, "small", [{"id": i, "content": f"note {i}"} for i in range(10)]).is_success
        small_index = tmp_path / "data" / "knowledge_bases" / str(small_id) / "index.faiss"
        assert not small_index.exists()  # a few rows: the index is only written on the way out
        # the default body limit: 64 MB, refused from the declared length alone
        host, port = server.url.split("//")[1].rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"PUT /api/files/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                         + str(64 * 1024 * 1024 + 1).encode() + b"\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 413")
        rows = [{"id": i, "content": f"in flight {i}"} for i in range(4_000)]
        answers = sigterm_during_insert(server, "big", rows)
        assert answers and answers[0].status_code == 200, answers
        assert answers[0].json()["inserted_rows"] == 4_000
        log = server.log_text()
        assert "Traceback" not in log, log
    finally:
        server.stop()
    assert index_header(small_index)["version"] == store_version(small_index.parent / "chunks.sqlite")
    with spawn(tmp_path / "data") as again:
        stored = httpx.post(f"{again.url}/api/sql/query",
                            json={"query": "SELECT id FROM big LIMIT 10000"}, timeout=60).json()
        assert len(stored["data"]) == 4_000, stored


def test_a_stop_after_drops_saves_only_the_indexes_of_knowledge_bases_that_exist(tmp_path: Path) -> None:
    """One knowledge base dropped through the server, one by another process on the same data
    directory while the server held it open: neither is saved on the way out (no "could not
    save the vector index" line, no folder brought back), the one that is left is."""
    from kbsql.engine import Engine

    server = spawn(tmp_path / "data")
    try:
        ids = {name: create_kb(server.url, name) for name in ("kept", "dropped", "elsewhere")}
        for name in ids:
            assert insert(server.url, name, docs(name, "pump")).is_success
            assert search_ids(server.url, name, "pump 1")  # its index open in the server
        gone = httpx.post(f"{server.url}/api/sql/query", json={"query": "DROP KNOWLEDGE_BASE dropped"})
        assert gone.json()["type"] == "ok", gone.text
        with Engine(tmp_path / "data") as other:
            assert other.query("DROP KNOWLEDGE_BASE elsewhere", {}).type == "ok"
        assert stop_with(server, signal.SIGTERM) == 0
        log = server.log_text()
    finally:
        server.stop()
    assert "could not save" not in log, log
    folders = tmp_path / "data" / "knowledge_bases"
    assert not (folders / str(ids["dropped"])).exists() and not (folders / str(ids["elsewhere"])).exists()
    kept = folders / str(ids["kept"]) / "index.faiss"
    assert index_header(kept)["version"] == store_version(kept.parent / "chunks.sqlite")


def test_a_request_past_the_shutdown_timeout_still_finishes_before_the_engine_closes(
        tmp_path: Path) -> None:
    """uvicorn cancels what is still running after --shutdown-timeout; an engine call in a
    worker thread cannot stop halfway, so it finishes, answers its true result (a committed
    insert answering 500 would be sent again) and only then is the engine closed."""
    server = spawn(tmp_path / "data", args=("--shutdown-timeout", "1"))
    try:
        create_kb(server.url, "big")
        rows = [{"id": i, "content": f"in flight {i} " + "word " * 40} for i in range(20_000)]
        answers = sigterm_during_insert(server, "big", rows)
        log = server.log_text()
        assert answers and answers[0].status_code == 200, (answers, log)
        assert "closed" not in log.lower() and "Traceback" not in log, log
    finally:
        server.stop()
    with spawn(tmp_path / "data") as again:
        stored = httpx.post(f"{again.url}/api/sql/query",
                            json={"query": "SELECT count(*) AS n FROM big"}, timeout=60).json()
        assert stored["data"] == [[20_000]], stored


def test_sigint_exits_0_without_a_traceback(tmp_path: Path) -> None:
    server = spawn(tmp_path / "data")
    try:
        assert stop_with(server, signal.SIGINT) == 0
        log = server.log_text()
        assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
    finally:
        server.stop()


def serve_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--port", "0", *args],
                          capture_output=True, text=True, timeout=60)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with spawn(tmp_path / "first") as first:
        port = first.url.rsplit(":", 1)[1]
        done = subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--port", port,
                               "--data-dir", str(tmp_path / "second")],
                              capture_output=True, text=True, timeout=60)
        assert "already in use" in one_line(done) and port in done.stderr


def test_a_truncated_catalog_is_one_line(tmp_path: Path) -> None:
    with spawn(tmp_path / "data") as server:
        create_kb(server.url, "kb")
    catalog = tmp_path / "data" / "catalog.sqlite"
    catalog.write_bytes(catalog.read_bytes()[:1500])
    line = one_line(serve_cli("--data-dir", str(tmp_path / "data")))
    assert "catalog" in line and "backup" in line


def test_a_data_dir_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("I am a file")
    line = one_line(serve_cli("--data-dir", str(not_a_dir)))
    assert "data directory" in line and str(not_a_dir) in line
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.json").write_text("{not json")
    assert "config.json" in one_line(serve_cli("--data-dir", str(tmp_path / "data")))


def test_an_index_ahead_of_its_rows_is_rebuilt(tmp_path: Path) -> None:
    """A backup of the rows restored under a newer index: the index names rows the store
    does not have, and new rows reuse its ids. It must be rebuilt, never trusted."""
    data = tmp_path / "data"
    with spawn(data) as server:
        kb_id = create_kb(server.url, "kb")
        assert insert(server.url, "kb", docs("a", "apple")).is_success
    folder = data / "knowledge_bases" / str(kb_id)
    shutil.copy(folder / "chunks.sqlite", tmp_path / "backup.sqlite")  # closed cleanly: no WAL left
    with spawn(data) as server:
        assert insert(server.url, "kb", docs("b", "banana")).is_success
    assert index_header(folder / "index.faiss")["version"] > store_version(tmp_path / "backup.sqlite")
    shutil.copy(tmp_path / "backup.sqlite", folder / "chunks.sqlite")  # the restore
    with spawn(data) as server:
        apples = [f"a{i}" for i in range(5)]
        assert search_ids(server.url, "kb", "banana") == apples  # only rows the store has
        assert insert(server.url, "kb", docs("c", "cherry")).is_success
        found = search_ids(server.url, "kb", "cherry")
        assert found == sorted(apples + [f"c{i}" for i in range(5)])
        answer = httpx.post(f"{server.url}/api/sql/query", json={
            "query": "SELECT id, chunk_content FROM kb WHERE content = 'cherry 3' LIMIT 1"}).json()
        assert answer["data"] == [["c3", "cherry 3"]]
        assert "ahead of its rows" in server.log_text()


def test_an_index_that_cannot_be_saved_never_fails_the_insert(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with spawn(data) as server:
        kb_id = create_kb(server.url, "kb")
        blocker = data / "knowledge_bases" / str(kb_id) / "index.faiss"
        blocker.mkdir(parents=True)  # os.replace onto a non-empty directory fails, even as root
        (blocker / "keep").write_text("x")
        rows = [{"id": i, "content": f"note {i}"} for i in range(6000)]  # past the save threshold
        answer = insert(server.url, "kb", rows)
        assert answer.status_code == 200 and answer.json()["inserted_rows"] == 6000, answer.text
        assert search_ids(server.url, "kb", "note 42", limit=1) == ["42"]
        log = server.log_text()
        assert "could not save the vector index" in log and "Traceback" not in log
        server.stop()
        assert server.process.returncode == 0


def read_only_mount(data: Path) -> tuple[str, ...]:
    """Run the server in its own mount namespace where `data` is a read-only bind mount (the
    only way to make a directory unwritable for root, which the tests run as)."""
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{data}" "{data}"'],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    return ("unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(data))


def test_a_read_only_data_dir_serves_reads(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with spawn(data) as server:
        create_kb(server.url, "kb")
        assert insert(server.url, "kb", docs("a", "apple")).is_success
    with spawn(data, prefix=read_only_mount(data)) as server:
        assert search_ids(server.url, "kb", "apple 2", limit=1) == ["a2"]
        assert [k["name"] for k in httpx.get(f"{server.url}{KBS}").json()] == ["kb"]
        refused = insert(server.url, "kb", docs("b", "banana"))
        assert refused.status_code == 403 and "read" in refused.json()["detail"]
        sql_write = httpx.post(f"{server.url}/api/sql/query", json={
            "query": "INSERT INTO kb (id, content) VALUES ('z', 'zebra')"}).json()
        assert sql_write["type"] == "error" and "reads only" in sql_write["error_message"], sql_write
        made = httpx.post(f"{server.url}{KBS}", json={"knowledge_base": {"name": "kb2",
                                                                          "embedding_model": HASH}})
        assert made.status_code == 403 and "reads only" in made.json()["detail"]
        assert search_ids(server.url, "kb", "apple") == [f"a{i}" for i in range(5)]
        log = server.log_text()
        assert "serving reads only" in log and "Traceback" not in log, log
        assert stop_with(server, signal.SIGTERM) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_says_it_stopped(tmp_path: Path, sig: int):
    """`kbsql serve` stopped by a signal ends with one line saying so (it used to exit
    silently, which reads like a crash in a terminal or a service log)."""
    with spawn(tmp_path / "data") as server:
        create_kb(server.url, "kb")
        assert stop_with(server, sig) == 0
        said = server.process.stdout.read() if server.process.stdout else ""
        name = signal.Signals(sig).name
        assert said.strip().splitlines() == [f"kbsql serve: stopped ({name}), indexes saved"], said
        assert "Traceback" not in server.log_text()
