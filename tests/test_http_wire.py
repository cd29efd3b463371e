"""The client's plain-HTTP transport (`kbsql.client.wire`) against scripted loopback servers.

What a user would notice if it were wrong: a new connection per call (slow), a dead kept-alive
connection surfacing as an error, a POST sent twice, a truncated answer taken as whole, a
stream that arrives all at once, a hung call, or a header that smuggles another header.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import kbsql
from kbsql.client.http import HttpApi, default_transport
from kbsql.client.wire import StdlibTransport
from kbsql.interface.errors import TransportError

TABLE = {"type": "table", "column_names": ["1"], "data": [[1]], "context": {"db": "mindsdb"}}


def answer(body: bytes, *, status: str = "200 OK", headers: str = "",
           kind: str = "application/json") -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(body)}\r\n"
            f"{headers}\r\n").encode() + body


class Scripted:
    """A loopback HTTP/1.1 server; `reply(connection_no, request_no, head, body)` returns the
    bytes to send (None: close without answering) and whether to close afterwards."""

    def __init__(self, reply: Callable[[int, int, bytes, bytes], tuple[bytes | None, bool]]):
        self.reply = reply
        self.connections = 0
        self.requests: list[tuple[int, bytes, bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.lock = threading.Lock()
        self.hung_up = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        try:
            self._exchange(conn, number)
        finally:
            conn.close()
            self.hung_up.set()

    def _exchange(self, conn: socket.socket, number: int) -> None:
        buffer, count = b"", 0
        while True:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buffer) < length:
                buffer += conn.recv(65536)
            body, buffer = buffer[:length], buffer[length:]
            count += 1
            with self.lock:
                self.requests.append((number, head, body))
            data, close = self.reply(number, count, head, body)
            if data is None:
                return
            conn.sendall(data)
            if close:
                return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def scripted():
    servers: list[Scripted] = []

    def start(reply):
        servers.append(Scripted(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def table_reply(number: int, count: int, head: bytes, body: bytes) -> tuple[bytes, bool]:
    return answer(json.dumps(TABLE).encode()), False


def test_plain_http_goes_through_the_stdlib_transport_and_https_through_httpx():
    assert isinstance(default_transport("http://127.0.0.1:1"), StdlibTransport)
    assert isinstance(default_transport("https://example.org"), httpx.HTTPTransport)


def test_calls_share_one_kept_alive_connection(scripted):
    server = scripted(table_reply)
    with kbsql.connect(server.url) as client:
        for _ in range(30):
            assert client.sql("SELECT 1").data == [[1]]
    assert server.connections == 1
    assert len(server.requests) == 30
    head = server.requests[0][1].decode()
    assert head.startswith("POST /api/sql/query HTTP/1.1\r\n")
    assert "\r\nhost: 127.0.0.1:" in head.lower()
    assert json.loads(server.requests[0][2]) == {"query": "SELECT 1", "context": {"db": "mindsdb"}}


def test_a_connection_the_server_closed_while_idle_is_replaced(scripted):
    # keep-alive implied (no "connection: close"); the server hangs up after each answer, as
    # one does when a connection stays idle past its keep-alive time
    server = scripted(lambda n, c, h, b: (answer(json.dumps(TABLE).encode()), True))
    with kbsql.connect(server.url) as client:
        for _ in range(5):
            assert client.sql("SELECT 1").data == [[1]]
            assert server.hung_up.wait(5)  # idle until the server has closed it
            server.hung_up.clear()
    assert server.connections == 5
    assert len(server.requests) == 5  # each statement ran once


def test_a_post_is_never_sent_twice_when_the_answer_is_lost(scripted):
    # The second request on the kept-alive connection is read, then the server hangs up
    # without answering: it may have run, so it is an error, not a silent second run.
    def reply(number, count, head, body):
        if number == 1 and count == 2:
            return None, True
        return answer(json.dumps(TABLE).encode()), False

    server = scripted(reply)
    with kbsql.connect(server.url) as client:
        client.sql("SELECT 1")
        with pytest.raises(TransportError, match="closed the connection without answering"):
            client.sql("INSERT INTO t VALUES (1)")
        assert client.sql("SELECT 1").data == [[1]]  # the next call works on a new connection
    inserts = [r for r in server.requests if b"INSERT" in r[2]]
    assert len(inserts) == 1


def test_a_get_is_repeated_on_a_fresh_connection_when_the_answer_is_lost(scripted):
    status = json.dumps({"mindsdb_version": "x"}).encode()

    def reply(number, count, head, body):
        if number == 1 and count == 2:
            return None, True
        return answer(status), False

    server = scripted(reply)
    api = HttpApi(server.url)
    try:
        assert api.status() == {"mindsdb_version": "x"}
        assert api.status() == {"mindsdb_version": "x"}  # lost once, asked again: safe for GET
    finally:
        api.close()
    assert server.connections == 2


def test_an_answer_shorter_than_its_length_is_an_error_not_a_truncated_result(scripted):
    def reply(number, count, head, body):
        data = json.dumps(TABLE).encode()
        return (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                f"{len(data) + 50}\r\n\r\n").encode() + data, True

    server = scripted(reply)
    with kbsql.connect(server.url) as client, pytest.raises(TransportError):
        client.sql("SELECT 1")


def test_a_stream_arrives_chunk_by_chunk():
    """The first chunk is in the caller's hands before the server sends the second."""
    first_seen, rest_sent = threading.Event(), threading.Event()
    chunks = [{"type": "start", "prompt": "q", "trace_id": "t"},
              {"type": "output", "output": "done", "trace_id": "t"},
              {"type": "end"}]
    lines = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    parts = [b"%x\r\n%s\r\n" % (len(line), line) for line in lines]
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def serve():  # the head and first chunk, then the rest once the client has the first
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n" + parts[0])
            first_seen.wait(10)
            conn.sendall(b"".join(parts[1:]) + b"0\r\n\r\n")
            rest_sent.set()

    threading.Thread(target=serve, daemon=True).start()
    api = HttpApi(url)
    try:
        got = []
        for chunk in api.stream("mindsdb", "a", [{"question": "q", "answer": None}]):
            got.append(chunk)
            if len(got) == 1:  # a buffered stream would only arrive after the rest was sent
                assert not rest_sent.is_set()
            first_seen.set()
        assert [c["type"] for c in got] == ["start", "output", "end"]
        assert got[1]["output"] == "done"
    finally:
        api.close()
        listener.close()


def test_a_server_that_never_answers_times_out(scripted):
    server = scripted(lambda n, c, h, b: (b"", False))  # reads the request, answers nothing
    api = HttpApi(server.url, timeout=httpx.Timeout(0.5))
    try:
        with pytest.raises(TransportError, match="Cannot reach"):
            api.status()
    finally:
        api.close()


def test_a_header_cannot_smuggle_another_header(scripted):
    server = scripted(table_reply)
    api = HttpApi(server.url, headers={"X-Note": "a\r\nInjected: 1"})
    try:
        with pytest.raises((TransportError, httpx.HTTPError, ValueError)):
            api.status()
    finally:
        api.close()
    assert not any(b"Injected" in head for _, head, _ in server.requests)


def test_threads_share_the_client(scripted):
    def reply(number, count, head, body):
        query = json.loads(body)["query"]
        return answer(json.dumps({**TABLE, "data": [[query]]}).encode()), False

    server = scripted(reply)
    with kbsql.connect(server.url) as client, ThreadPoolExecutor(8) as pool:
        queries = [f"SELECT {i}" for i in range(200)]
        results = list(pool.map(lambda q: client.sql(q).data[0][0], queries))
    assert results == queries
    assert server.connections <= 8


def test_an_unreachable_server_is_one_clear_error():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with kbsql.connect(f"http://127.0.0.1:{port}") as client, \
            pytest.raises(TransportError, match=f"Cannot reach http://127.0.0.1:{port}"):
        client.sql("SELECT 1")


def test_an_answer_sent_before_the_body_was_read_reaches_the_caller(tmp_path):
    """kbsql serve answers 413 as soon as it sees the length, then hangs up: the caller gets
    that 413 problem, every time, not a broken connection."""
    from kbsql.interface.errors import ServiceError
    from kbsql.server.process import spawn

    with spawn(tmp_path, args=("--max-body-mb", "1")) as server, kbsql.connect(server.url) as client:
        client.sql("SELECT 1")  # a kept-alive connection to break
        for _ in range(3):
            with pytest.raises(ServiceError, match="over this server's limit") as caught:
                client.sql("SELECT '" + "x" * 3_000_000 + "'")
            assert caught.value.status == 413
        assert client.sql("SELECT 2").data == [[2]]


def test_a_slow_reader_gets_a_large_upload_within_a_per_write_timeout():
    """The write timeout bounds each pause, not the whole upload (as httpcore does)."""
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    size = 4 * 1024 * 1024
    got: list[int] = []

    def serve():
        import time

        conn, _ = listener.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            body = len(data.split(b"\r\n\r\n", 1)[1])
            while body < size:  # ~4 MB/s: the upload takes ~1 s, each pause far under 0.5 s
                time.sleep(0.05)
                body += len(conn.recv(256 * 1024))
            got.append(body)
            conn.sendall(answer(b"{}"))

    threading.Thread(target=serve, daemon=True).start()
    http = httpx.Client(transport=StdlibTransport(), timeout=httpx.Timeout(5, write=0.5))
    try:
        assert http.put(f"{url}/api/files/x", content=b"x" * size).status_code == 200
    finally:
        http.close()
        listener.close()
    assert got == [size]


def test_interim_answers_are_skipped_and_streamed_bodies_are_framed(scripted):
    def reply(number, count, head, body):
        hints = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
        return hints + answer(json.dumps({"body": body.decode(), "head": head.decode()}).encode()), False

    server = scripted(reply)
    http = httpx.Client(transport=StdlibTransport())
    try:
        response = http.post(f"{server.url}/x", content=iter([b"hello", b"world"]))
    finally:
        http.close()
    assert response.status_code == 200
    echoed = response.json()
    assert echoed["body"] == "helloworld"
    assert "content-length: 10" in echoed["head"].lower()
    assert "transfer-encoding" not in echoed["head"].lower()


def test_a_redirect_to_https_is_followed_by_httpx_own_transport(scripted):
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there: following the redirect fails to connect
    server = scripted(lambda n, c, h, b: (
        b"HTTP/1.1 301 Moved\r\nlocation: https://127.0.0.1:%d/api/status\r\ncontent-length: 0\r\n\r\n"
        % port, False))
    api = HttpApi(server.url)
    try:
        with pytest.raises(TransportError) as caught:
            api.status()
    finally:
        api.close()
    assert f"https://127.0.0.1:{port}" in str(caught.value) or "Connect" in repr(caught.value.__cause__)
    assert "http:// only" not in str(caught.value)
