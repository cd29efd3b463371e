"""Bounded inputs of `kbsql serve`: oversized bodies (413 before reading, memory measured),
oversized SQL (refused before parsing), half-sent requests (408), a client leaving
mid-body (one log line), and bad values (huge LIMIT, NaN id, UTF-16, huge chunk_size) with
clear 4xx / `type: error` answers that store nothing. Real server on loopback."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kbsql.server.process import ServerProcess, spawn

HASH = {"provider": "kbsql", "model_name": "hash-16"}
KBS = "/api/projects/mindsdb/knowledge_bases"
PROBLEM = "application/problem+json"
MB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with spawn(tmp_path_factory.mktemp("limits"),
               args=("--max-body-mb", "8", "--max-sql-kb", "64", "--timeout", "1")) as proc:
        made = httpx.post(f"{proc.url}{KBS}", json={"knowledge_base": {
            "name": "kb", "embedding_model": HASH}})
        assert made.status_code == 201, made.text
        rows = [{"id": i, "content": f"stored note {i}"} for i in range(3)]
        assert httpx.put(f"{proc.url}{KBS}/kb", json={"knowledge_base": {"rows": rows}}).is_success
        yield proc


def peak_rss_kb(proc: ServerProcess) -> int:
    for line in Path(f"/proc/{proc.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def stored_ids(url: str) -> list[str]:
    answer = httpx.post(f"{url}/api/sql/query", json={"query": "SELECT id FROM kb"}).json()
    return sorted(r[0] for r in answer["data"])


def problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    return response.json()


def test_an_oversized_body_is_413_before_it_is_read(server: ServerProcess) -> None:
    before = peak_rss_kb(server)
    rows = [{"id": 1000 + i, "content": "x" * 1000} for i in range(40_000)]  # ~41 MB of JSON
    body = json.dumps({"knowledge_base": {"rows": rows}}).encode()
    assert len(body) > 32 * MB
    answer = httpx.put(f"{server.url}{KBS}/kb", content=body,
                       headers={"Content-Type": "application/json"}, timeout=60)
    assert "limit" in problem(answer, 413)["detail"]
    grown_mb = (peak_rss_kb(server) - before) / 1024
    assert grown_mb < 20, f"the server's peak memory grew {grown_mb:.0f} MB"
    assert stored_ids(server.url) == ["0", "1", "2"]


def test_a_chunked_oversized_body_is_413_once_past_the_limit(server: ServerProcess) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(20):
            yield b"x" * MB

    before = peak_rss_kb(server)
    answer = httpx.post(f"{server.url}/api/sql/query", content=chunks(),
                        headers={"Content-Type": "application/json"}, timeout=60)
    assert "limit" in problem(answer, 413)["detail"]
    assert (peak_rss_kb(server) - before) / 1024 < 40


def test_a_body_of_tiny_values_is_refused_before_parsing(server: ServerProcess) -> None:
    """7 MB of `"ab",` is 1.4M strings: ~80 MB once parsed. Counted before, refused."""
    body = b'{"knowledge_base": {"rows": [' + b'"ab",' * 1_400_000 + b'"ab"]}}'
    before = peak_rss_kb(server)
    answer = httpx.put(f"{server.url}{KBS}/kb", content=body,
                       headers={"Content-Type": "application/json"}, timeout=60)
    assert "JSON values" in problem(answer, 413)["detail"]
    grown_mb = (peak_rss_kb(server) - before) / 1024
    assert grown_mb < 40, f"the server's peak memory grew {grown_mb:.0f} MB"
    assert stored_ids(server.url) == ["0", "1", "2"]


def test_a_body_of_nested_empty_lists_is_refused_before_parsing(server: ServerProcess) -> None:
    """`[[[...]]]` 500 deep has no separator to count: 7 MB of them are 3.5M lists,
    ~300 MB once parsed. Brackets count as values too: refused before parsing."""
    group = b"[" * 500 + b"]" * 500
    body = b'{"query": "SELECT 1", "context": {"x": [' + b",".join([group] * 7000) + b"]}}"
    before = peak_rss_kb(server)
    answer = httpx.post(f"{server.url}/api/sql/query", content=body,
                        headers={"Content-Type": "application/json"}, timeout=120)
    assert "JSON values" in problem(answer, 413)["detail"]
    grown_mb = (peak_rss_kb(server) - before) / 1024
    assert grown_mb < 40, f"the server's peak memory grew {grown_mb:.0f} MB"


def test_sql_over_the_limit_is_refused_before_parsing(server: ServerProcess) -> None:
    values = ", ".join(f"({i}, 'note {i}')" for i in range(4000))  # ~80 KB > 64 KB
    query = f"INSERT INTO kb (id, content) VALUES {values}"
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query})
    assert answer.status_code == 200
    body = answer.json()
    assert body["type"] == "error" and "limit of 65536 bytes" in body["error_message"]
    assert stored_ids(server.url) == ["0", "1", "2"]
    small = httpx.post(f"{server.url}/api/sql/query", json={"query": "SELECT 1 AS a"}).json()
    assert small["data"] == [[1]]


def raw_exchange(url: str, payload: bytes, wait: float = 10) -> tuple[bytes, float]:
    host, port = url.split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(payload)
        sock.settimeout(wait)
        start = time.monotonic()
        answer = sock.recv(4096)
        waited = time.monotonic() - start
        while answer and not _complete(answer):
            more = sock.recv(4096)  # the head and the body may come in two segments
            if not more:
                break
            answer += more
        return answer, waited


def _complete(answer: bytes) -> bool:
    head, end, body = answer.partition(b"\r\n\r\n")
    if not end:
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return True


def test_a_declared_length_over_the_limit_is_413_without_sending_the_body(
        server: ServerProcess) -> None:
    answer, waited = raw_exchange(server.url, (
        b"PUT /api/projects/mindsdb/knowledge_bases/kb HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 9000000\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 413") and b"9000000 bytes" in answer and waited < 1


def test_a_half_sent_head_times_out(server: ServerProcess) -> None:
    answer, waited = raw_exchange(server.url, b"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert answer.startswith(b"HTTP/1.1 408") and waited < 5


def test_a_half_sent_body_times_out(server: ServerProcess) -> None:
    head = (b"POST /api/sql/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 200\r\n\r\n{\"query\": ")
    answer, waited = raw_exchange(server.url, head)
    assert answer.startswith(b"HTTP/1.1 408") and waited < 5
    assert b"did not arrive in time" in answer
    assert "stalled after 10 bytes" in server.log_text()


def test_a_client_leaving_mid_body_is_one_log_line(server: ServerProcess) -> None:
    host, port = server.url.split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"PUT /api/projects/mindsdb/knowledge_bases/kb HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"know")
        time.sleep(0.2)
    deadline = time.monotonic() + 5
    while "disconnected after 6 of 5000 bytes" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = server.log_text()
    assert "PUT /api/projects/mindsdb/knowledge_bases/kb from 127.0.0.1: the client disconnected " \
           "after 6 of 5000 bytes" in log
    assert "Traceback" not in log
    assert stored_ids(server.url) == ["0", "1", "2"]


@pytest.mark.parametrize("query", [
    "SELECT * FROM kb WHERE content = 'note' LIMIT 99999999999999999999",
    "SELECT * FROM kb LIMIT 18446744073709551616",
    "SELECT chunk_content FROM kb AS k JOIN (SELECT 1 AS one) AS t ON 1 = 1 "
    "LIMIT 99999999999999999999",
])
def test_a_limit_beyond_2_63_is_an_sql_error(server: ServerProcess, query: str) -> None:
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query}).json()
    assert answer["type"] == "error", answer
    assert "LIMIT" in answer["error_message"] or "INT64" in answer["error_message"]


@pytest.mark.parametrize("raw", [b'{"knowledge_base": {"rows": [{"id": NaN, "content": "nan id"}]}}',
                                 b'{"knowledge_base": {"rows": [{"id": -Infinity, "content": "x"}]}}'])
def test_a_nan_id_is_400_and_stores_nothing(server: ServerProcess, raw: bytes) -> None:
    answer = httpx.put(f"{server.url}{KBS}/kb", content=raw, headers={"Content-Type": "application/json"})
    detail = problem(answer, 400)["detail"]
    assert "NaN" in detail or "Infinity" in detail
    assert stored_ids(server.url) == ["0", "1", "2"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_a_body_not_in_utf8_is_400(server: ServerProcess, encoding: str) -> None:
    raw = json.dumps({"query": "CREATE KNOWLEDGE_BASE wide"}).encode(encoding)
    answer = httpx.post(f"{server.url}/api/sql/query", content=raw,
                        headers={"Content-Type": "application/json"})
    assert "UTF-8" in problem(answer, 400)["detail"]


def test_a_chunk_size_of_10_19_is_refused(server: ServerProcess) -> None:
    rest = httpx.post(f"{server.url}{KBS}", json={"knowledge_base": {
        "name": "huge_chunks", "embedding_model": HASH, "preprocessing": {"chunk_size": 10**19}}})
    assert "chunk_size" in problem(rest, 400)["detail"]
    sql = httpx.post(f"{server.url}/api/sql/query", json={"query": (
        "CREATE KNOWLEDGE_BASE huge_chunks USING embedding_model = {'provider': 'kbsql', "
        "'model_name': 'hash-16'}, preprocessing = {'chunk_size': 10000000000000000000}")}).json()
    assert sql["type"] == "error" and "chunk_size" in sql["error_message"]
    names = [k["name"] for k in httpx.get(f"{server.url}{KBS}").json()]
    assert "huge_chunks" not in names


def test_a_deeply_chained_expression_is_one_clear_sql_error(server: ServerProcess) -> None:
    """3000 chained `+` overflow the renderer's recursion: a clear error, not a
    RecursionError with a thousand-frame traceback in the server's log per request."""
    query = "SELECT " + " + ".join(["1"] * 3000)
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query}).json()
    assert answer["type"] == "error" and "nests too deeply" in answer["error_message"], answer
    assert "Traceback" not in server.log_text()


def test_a_parquet_bomb_upload_is_refused_without_taking_its_size(server: ServerProcess) -> None:
    """10M zeros are ~50 KB of Parquet and 80 MB decoded: past 8x this server's 8 MB body
    limit, refused while decoding (a 64 MB file of them would be GBs), never stored."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": np.zeros(10_000_000, dtype=np.int64)}), buffer,
                   compression="zstd", row_group_size=1_000_000)
    assert buffer.tell() < MB
    before = peak_rss_kb(server)
    answer = httpx.put(f"{server.url}/api/files/bomb", content=buffer.getvalue(),
                       headers={"Content-Type": "application/octet-stream"}, timeout=60)
    assert "decodes to more than 64 MB" in problem(answer, 400)["detail"]
    assert peak_rss_kb(server) - before < 150 * 1024  # the cap (64 MB) plus slack, not 80 MB x2
    tables = httpx.post(f"{server.url}/api/sql/query", json={"query": "SHOW TABLES FROM df"}).json()
    assert ["bomb"] not in tables.get("data", [])
    small = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2, 3]}), small)
    ok = httpx.put(f"{server.url}/api/files/small", content=small.getvalue(),
                   headers={"Content-Type": "application/octet-stream"})
    assert ok.status_code == 200 and ok.json()["rows"] == 3, ok.text


def test_chunk_overlap_must_be_smaller_than_chunk_size(server: ServerProcess) -> None:
    rest = httpx.post(f"{server.url}{KBS}", json={"knowledge_base": {
        "name": "overlapped", "embedding_model": HASH,
        "preprocessing": {"chunk_size": 1000, "chunk_overlap": 1000}}})
    detail = problem(rest, 400)["detail"]
    assert "chunk_overlap" in detail and len(detail.splitlines()) == 1
    sql = httpx.post(f"{server.url}/api/sql/query", json={"query": (
        "CREATE KNOWLEDGE_BASE overlapped USING embedding_model = {'provider': 'kbsql', "
        "'model_name': 'hash-16'}, preprocessing = {'chunk_size': 100, 'chunk_overlap': 500}")}).json()
    assert sql["type"] == "error" and "chunk_overlap" in sql["error_message"]
    assert "overlapped" not in [k["name"] for k in httpx.get(f"{server.url}{KBS}").json()]


def test_one_row_makes_a_bounded_number_of_chunks(server: ServerProcess) -> None:
    """chunk_overlap 999 of 1000 turned one 30 KB row into 29,001 chunks (251 MB on disk):
    past the bound the insert fails in one line naming the row, and stores nothing."""
    made = httpx.post(f"{server.url}{KBS}", json={"knowledge_base": {
        "name": "dense", "embedding_model": HASH,
        "preprocessing": {"chunk_size": 1000, "chunk_overlap": 999}}})
    assert made.status_code == 201, made.text
    row = {"id": "big", "content": "x" * 30_000}
    put = httpx.put(f"{server.url}{KBS}/dense", json={"knowledge_base": {"rows": [row]}}, timeout=60)
    detail = problem(put, 400)["detail"]
    assert "row 0" in detail and "10000 chunks" in detail and "chunk_overlap" in detail, detail
    assert len(detail.splitlines()) == 1
    sql = httpx.post(f"{server.url}/api/sql/query", timeout=60, json={
        "query": f"INSERT INTO dense (id, content) VALUES ('big', '{'y' * 30_000}')"}).json()
    assert sql["type"] == "error" and "10000 chunks" in sql["error_message"], sql
    count = httpx.post(f"{server.url}/api/sql/query", json={"query": "SELECT count(*) FROM dense"})
    assert count.json()["data"] == [[0]]
    small = {"id": "ok", "content": "a short text " * 10}  # a normal row still goes in
    assert httpx.put(f"{server.url}{KBS}/dense", json={"knowledge_base": {"rows": [small]}}).is_success


def send_head(url: str, lines: Iterator[bytes]) -> tuple[bytes, int]:
    """Send a request head line group by line group until the server closes; (its answer,
    bytes sent)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(b"POST /api/sql/query HTTP/1.1\r\nHost: x\r\n")
            for chunk in lines:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:  # closed under us: the answer is already on its way
            pass
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except OSError:
            pass
    return answer, sent


def test_a_flood_of_tiny_headers_is_431_before_it_is_parsed(server: ServerProcess) -> None:
    """The finding: a 15 MB head of 3,000,000 tiny headers grew the server 345 MB before
    its 401. Counted as it arrives, it is refused at 64 KB; other clients are unaffected."""
    Path(f"/proc/{server.process.pid}/clear_refs").write_text("5")  # the peak starts from now
    before = peak_rss_kb(server)
    answer, sent = send_head(server.url, (b"a:b\r\n" * 10_000 for _ in range(300)))  # 15 MB
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"--max-head-kb" in answer and sent < 4 * MB
    assert peak_rss_kb(server) - before < 20 * 1024
    many, _ = send_head(server.url, iter([b"x-h: 1\r\n" * 300, b"\r\n"]))  # 2.4 KB, 300 headers
    assert many.startswith(b"HTTP/1.1 431 ") and b"--max-headers" in many, many[:200]
    fine = httpx.get(f"{server.url}/api/status", headers={f"x-h{i}": "1" for i in range(150)})
    assert fine.status_code == 200


@pytest.mark.parametrize("setting", ["secret_directory", "temp_directory", "home_directory",
                                     "extension_directory", "' || 'temp_directory"])
def test_settings_naming_paths_or_secrets_are_refused(server: ServerProcess, setting: str) -> None:
    """The finding: current_setting() showed the server's paths and DuckDB's secret
    directory to any token holder."""
    answer = httpx.post(f"{server.url}/api/sql/query",
                        json={"query": f"SELECT current_setting('{setting}') AS s"}).json()
    assert answer["type"] == "error" and "is not shown here" in answer["error_message"], answer
    assert "/" not in answer["error_message"]
    threads = httpx.post(f"{server.url}/api/sql/query",
                         json={"query": "SELECT current_setting('threads') AS t"}).json()
    half = max(1, (os.cpu_count() or 2) // 2)  # --sql-threads: a statement leaves cores to others
    assert threads["type"] == "table" and int(threads["data"][0][0]) == half, threads


def test_an_insert_naming_an_unknown_column_is_refused_with_the_near_name(server: ServerProcess) -> None:
    """The finding: `prodcut` answered "OK, 1 row affected" and stored `product` as null."""
    def run(query: str) -> dict:
        return httpx.post(f"{server.url}/api/sql/query", json={"query": query}).json()

    made = run("CREATE KNOWLEDGE_BASE kb_meta USING embedding_model = {'provider': 'kbsql', "
               "'model_name': 'hash-16'}, metadata_columns = ['product']")
    assert made["type"] == "ok", made
    answer = run("INSERT INTO kb_meta (id, content, prodcut) VALUES (1, 'a wireless mouse', 'mouse')")
    assert answer["type"] == "error" and "did you mean 'product'?" in answer["error_message"], answer
    assert run("SELECT id FROM kb_meta")["data"] == []  # nothing stored
    fine = run("INSERT INTO kb_meta (id, content, product) VALUES (1, 'a wireless mouse', 'mouse')")
    assert fine["type"] == "ok", fine
    assert run("SELECT product FROM kb_meta")["data"] == [["mouse"]]
    # every other way an insert names its columns (the audit found each stored product as null)
    for named in ("INSERT INTO kb_meta SELECT 2 AS id, 'a mouse pad' AS content, 'pad' AS prodcut",
                  "INSERT INTO kb_meta (id, content, prodcut) SELECT 2, 'a mouse pad', 'pad'",
                  "INSERT INTO kb_meta (id, content, prodcut) SELECT 2, 'a mouse pad', 'pad' "
                  "USING batch_size = 5"):
        answer = run(named)
        assert answer["type"] == "error" and "did you mean 'product'?" in answer["error_message"], \
            (named, answer)
    row = {"id": 2, "content": "a mouse pad", "prodcut": "pad"}
    rest = httpx.put(f"{server.url}/api/projects/mindsdb/knowledge_bases/kb_meta",
                     json={"knowledge_base": {"rows": [row]}})
    assert rest.status_code == 400 and "did you mean 'product'?" in rest.json()["detail"], rest.text
    assert run("SELECT id FROM kb_meta")["data"] == [["1"]]  # nothing of them stored
    # a column a SELECT brings without naming it goes as MindsDB takes it (not refused)
    brought = run("INSERT INTO kb_meta SELECT * FROM "
                  "(SELECT 3 AS id, 'a cable' AS content, 'cable' AS product)")
    assert brought["type"] == "ok", brought
