"""Bad input never harms the server: malformed packets, a client that disconnects or stops
reading in the middle of a result, a huge statement, a stalled packet. Each ends its own
connection (or answers an error), with one log line, and other clients go on. Raw sockets."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from kbsql.server.process import ServerProcess, spawn
from tests.mysql.conftest import BIG_ROWS, connect, fetch
from tests.mysql.raw import CAPS, logged_in, packet, read_packet

MAX_SQL_KB = 8


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with an 8 KB SQL limit and a 1 s deadline for a packet's body; its MySQL door
    opened by $KBSQL_MYSQL_PORT rather than --mysql-port."""
    with spawn(tmp_path_factory.mktemp("mysql-bad") / "data", env={"KBSQL_MYSQL_PORT": "0"},
               args=("--max-sql-kb", str(MAX_SQL_KB), "--timeout", "1")) as server:
        assert server.mysql_port
        yield server


def is_closed(sock: socket.socket, within: float = 5) -> bool:
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def still_serves(server: ServerProcess) -> None:
    start = time.monotonic()
    with connect(server) as conn:
        assert fetch(conn, "SELECT 1 AS one") == (["one"], [(1,)])
    assert time.monotonic() - start < 5


def new_log(server: ServerProcess, before: str) -> list[str]:
    time.sleep(0.2)
    return [line for line in server.log_text()[len(before):].splitlines() if line.strip()]


def test_a_handshake_field_without_its_terminator(small: ServerProcess) -> None:
    """mysql-mimic's parser would loop forever on it, freezing the whole server."""
    before = small.log_text()
    sock = socket.create_connection(("127.0.0.1", small.mysql_port), timeout=10)
    read_packet(sock)
    sock.sendall(packet(1, struct.pack("<IIB", CAPS, 1 << 24, 45) + bytes(23) + b"no-terminator"))
    assert is_closed(sock)
    still_serves(small)
    lines = new_log(small, before)
    assert len(lines) == 1 and "malformed packet" in lines[0], lines


@pytest.mark.parametrize("bad", [
    packet(5, b"\x03SELECT 1"),   # a wrong sequence number
    packet(0, b""),               # an empty command
    packet(0, b"\x17\x01\x00"),   # COM_STMT_EXECUTE cut short
])
def test_a_malformed_command_ends_that_connection_alone(small: ServerProcess, bad: bytes) -> None:
    with connect(small) as bystander:
        before = small.log_text()
        sock = logged_in(small)
        sock.sendall(bad)
        assert is_closed(sock)
        assert fetch(bystander, "SELECT 2 AS two")[1] == [(2,)]  # an open connection goes on
        lines = new_log(small, before)
        assert len(lines) == 1 and "malformed packet" in lines[0] and "closed" in lines[0], lines


def test_http_or_garbage_on_the_mysql_port(small: ServerProcess) -> None:
    before = small.log_text()
    sock = socket.create_connection(("127.0.0.1", small.mysql_port), timeout=10)
    read_packet(sock)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert is_closed(sock)
    still_serves(small)
    assert len(new_log(small, before)) <= 1


def test_an_unknown_command_and_bad_text_answer_an_error_and_go_on(small: ServerProcess) -> None:
    sock = logged_in(small)
    sock.sendall(packet(0, b"\xee"))
    _, error = read_packet(sock)
    assert error[0] == 0xFF and struct.unpack("<H", error[1:3])[0] == 1047
    sock.sendall(packet(0, b"\x03SELECT '\xff\xfe'"))
    _, error = read_packet(sock)
    assert error[0] == 0xFF and b"not UTF-8" in error
    sock.sendall(packet(0, b"\x03SELECT 3"))
    answer = [read_packet(sock)[1] for _ in range(5)]  # count, column, EOF, row, EOF
    assert answer[0] == b"\x01" and answer[3] == b"\x013"  # the connection still works
    sock.sendall(packet(0, b"\x01"))  # COM_QUIT
    assert is_closed(sock)


def test_a_huge_statement_is_refused_from_its_header(small: ServerProcess) -> None:
    before = small.log_text()
    sock = logged_in(small)
    sock.sendall((10 * 1024 * 1024).to_bytes(3, "little") + b"\x00" + b"\x03SELECT '")  # then nothing
    _, error = read_packet(sock)
    assert error[0] == 0xFF and struct.unpack("<H", error[1:3])[0] == 1153
    assert b"kbsql serve --max-sql-kb" in error
    assert is_closed(sock)
    lines = new_log(small, before)
    assert len(lines) == 1 and "over the limit" in lines[0], lines
    still_serves(small)


def test_a_statement_over_the_sql_limit_gets_the_http_answer(small: ServerProcess) -> None:
    with connect(small) as conn:
        with pytest.raises(pymysql.err.MySQLError) as refused:
            fetch(conn, "SELECT '" + "x" * (MAX_SQL_KB * 1024 + 10) + "'")
        assert f"over this server's limit of {MAX_SQL_KB * 1024} bytes (kbsql serve --max-sql-kb)" \
            in refused.value.args[1]
        assert fetch(conn, "SELECT 4 AS four")[1] == [(4,)]  # the same connection goes on


def test_a_stalled_packet_is_dropped_after_the_timeout(small: ServerProcess) -> None:
    before = small.log_text()
    sock = logged_in(small)
    sock.sendall((100).to_bytes(3, "little") + b"\x00" + b"\x03SELECT")  # 7 of 100 bytes
    assert is_closed(sock, within=10)
    lines = new_log(small, before)
    assert len(lines) == 1 and "did not arrive" in lines[0], lines


BIG_SQL = b"SELECT i, repeat('x', 600) AS filler FROM lab.big"  # 100k rows x 600 bytes: 60 MB


def test_a_client_that_leaves_mid_result(door: ServerProcess) -> None:
    """A client that reads the start of a large result and is killed: one log line, and
    the server goes on serving."""
    before = door.log_text()
    sock = logged_in(door)
    sock.sendall(packet(0, b"\x03" + BIG_SQL))
    read_packet(sock)  # the column count: the answer has started
    time.sleep(0.5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # a reset, as a killed client
    still_serves(door)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "went away" not in door.log_text()[len(before):]:
        time.sleep(0.1)
    lines = [line for line in new_log(door, before) if "went away" in line]
    assert len(lines) == 1, door.log_text()[len(before):]


def test_a_result_goes_out_as_fast_as_the_client_reads(tmp_path: Path) -> None:
    """The door in this process, on a real socket, so its buffers can be looked at: 60 MB of
    rows to a client that stops reading leave at most a batch or so waiting in the server's
    write buffer (mysql-mimic alone would hold the whole result as packets)."""
    from kbsql.engine import Engine
    from kbsql.server.mysql import MysqlDoor
    from tests.mysql.conftest import make_lab

    engine = Engine(tmp_path / "data")
    lab = make_lab(tmp_path / "lab.duckdb")
    assert engine.query(f"CREATE DATABASE lab WITH ENGINE = 'duckdb', PARAMETERS = "
                        f"{{'database': '{lab}'}}").type == "ok"
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    door = MysqlDoor(engine, listener)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def on_loop(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(30)

    async def buffered() -> list[int]:
        return [c.stream.waiting() for c in door.connections]

    try:
        on_loop(door.start())
        server = ServerProcess(None, "", None, listener.getsockname()[1])  # type: ignore[arg-type]
        sock = logged_in(server)
        sock.sendall(packet(0, b"\x03" + BIG_SQL))
        read_packet(sock)
        time.sleep(3)  # the server fills the socket's buffers, then waits for the client
        waiting = on_loop(buffered())
        assert len(waiting) == 1 and waiting[0] < 8 * 1024 * 1024, waiting
        sock.settimeout(60)
        stream = sock.makefile("rb")

        def next_payload() -> bytes:
            header = stream.read(4)
            return stream.read(int.from_bytes(header[:3], "little"))

        for _ in range(3):  # two column definitions, then EOF
            next_payload()
        rows = 0
        while True:  # now read it all: the rest arrives, in order, to the end
            payload = next_payload()
            if payload[:1] == b"\xfe" and len(payload) < 9:
                break
            assert payload.startswith(str(rows).encode(), 1)
            rows += 1
        assert rows == BIG_ROWS
        sock.close()
    finally:
        on_loop(door.close(5))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        engine.close()


@pytest.mark.parametrize("statement", [
    " " * 7000 + "1",  # the leading-keyword pattern once backtracked exponentially on spaces
    "SHOW VARIABLES" + " " * 7000 + "x",
    "SELECT @@version" + " " * 7000 + "x",
    "SELECT @@version, " + ", " * 3000 + "1",
    "BEGIN" + " " * 7000 + "x",
])
def test_long_runs_of_spaces_and_commas_answer_at_once(small: ServerProcess, statement: str) -> None:
    with connect(small, read_timeout=10) as conn:
        start = time.monotonic()
        try:
            fetch(conn, statement)
        except pymysql.err.MySQLError as exc:
            assert not isinstance(exc, pymysql.err.OperationalError) or exc.args[0] != 2013, exc
        assert time.monotonic() - start < 5
        assert fetch(conn, "SELECT 5 AS five")[1] == [(5,)]
