"""Uploads parsed in processes of their own (`--upload-processes`, `--upload-timeout`),
through a real `kbsql serve`: the server's own interpreter does not do the parsing, a parse
past its deadline or whose client left is killed, and a slow parse leaves other users served."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from kbsql.server.process import ServerProcess
from tests.conftest import start_server, stop_server
from tests.files.makers import workbook
from tests.files.served import (
    ZYGOTE,
    _children,
    child_processes,
    cost,
    parse_cpu_s,
    problem,
    sql,
    upload,
    upload_then_leave,
)

TOKEN = "parse-token"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, httpx.Client]]:
    """One parse at once, each within 5 s; a token (the client's) and a user who logs in
    (another owner of the fair shares)."""
    proc, url = start_server(tmp_path_factory.mktemp("parse") / "server",
                             env={"KBSQL_UPLOAD_PROCESSES": "1", "KBSQL_UPLOAD_TIMEOUT": "5",
                                  "KBSQL_TOKEN": TOKEN, "KBSQL_USER": "bea", "KBSQL_PASSWORD": "pw-bea"})
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield proc, http
    stop_server(proc)


def test_a_workbook_is_parsed_by_a_child_not_by_the_server(
        served: tuple[ServerProcess, httpx.Client]) -> None:
    """The finding: an upload's parse held the server's interpreter (xlsx bombs lifted another
    user's SELECT 1 p99 from 3.4 to 18 ms). Now the parse's CPU is a child's, the table is whole."""
    server, client = served
    raw = workbook(4000)
    upload(client, "warm", "warm.csv", b"a\n1\n")  # the forkserver starts at the first upload
    before = parse_cpu_s(server)
    answer, cpu, _ = cost(server, lambda: upload(client, "orders", "orders.xlsx", raw))
    assert answer.status_code == 200, answer.text
    reaped = time.monotonic() + 3  # the child's CPU counts once the zygote has reaped it
    while parse_cpu_s(server) - before <= 0.3 and time.monotonic() < reaped:
        time.sleep(0.05)
    parsing = parse_cpu_s(server) - before
    assert parsing > 0.3 and cpu < parsing / 2, (cpu, parsing)
    rows = sql(client, "SELECT count(*), sum(qty), max(product) FROM files.orders")["data"]
    assert rows == [[4000, sum(i % 9 for i in range(4000)), "product 999"]]


def test_a_parse_past_its_deadline_is_killed_and_nothing_is_kept(
        served: tuple[ServerProcess, httpx.Client]) -> None:
    server, client = served
    raw = workbook(60_000)  # ~12 CPU-s of parsing
    start = time.monotonic()
    answer = upload(client, "slow_book", "slow.xlsx", raw)
    problem(answer, "Error", "Parsing the file took more than 5 s: over this server's bound "
            "(kbsql serve --upload-timeout)")
    assert time.monotonic() - start < 8
    gone = time.monotonic() + 1
    while child_processes(server) and time.monotonic() < gone:  # the zygote reaps it
        time.sleep(0.02)
    assert child_processes(server) == []
    assert "slow_book" not in [f["name"] for f in client.get("/api/files").json()]
    assert upload(client, "after", "after.csv", b"id\n7\n").status_code == 200


def test_a_client_that_leaves_kills_its_parse_at_once(served: tuple[ServerProcess, httpx.Client]) -> None:
    server, client = served
    with upload_then_leave(server, client, "left_book", "left.xlsx", workbook(60_000)):
        time.sleep(0.3)
    left = time.monotonic()
    while child_processes(server) and time.monotonic() - left < 3:
        time.sleep(0.02)
    assert not child_processes(server) and time.monotonic() - left < 1.5, time.monotonic() - left
    assert "left_book" not in [f["name"] for f in client.get("/api/files").json()]


def test_another_users_upload_gets_the_next_turn(served: tuple[ServerProcess, httpx.Client]) -> None:
    """With one parse at once, a token sending four workbooks at a time does not keep another
    user's small file waiting behind all of them: the freed slot goes to the user holding none,
    so at most the token's parse under way ends between the other user's send and its answer
    (first come, first served, the token's three waiting ones were parsed first)."""
    server, client = served
    session = client.post("/api/login", json={"username": "bea", "password": "pw-bea"}).json()["token"]
    raw = workbook(3000)  # ~0.4 CPU-s each
    done: list[tuple[str, int, float]] = []

    def send(who: str, token: str, name: str, filename: str, body: bytes) -> None:
        with httpx.Client(base_url=client.base_url, timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as own:
            answer = upload(own, name, filename, body)
        done.append((who, answer.status_code, time.monotonic()))

    threads = [threading.Thread(target=send, args=("token", TOKEN, f"flood_{n}", "f.xlsx", raw))
               for n in range(4)]
    for thread in threads:
        thread.start()
    while not child_processes(server):
        time.sleep(0.01)
    time.sleep(0.1)  # the token's other three are waiting by now
    sent = time.monotonic()
    send("bea", session, "small", "small.csv", b"id,v\n1,x\n")
    for thread in threads:
        thread.join()
    answered = next(t for who, _, t in done if who == "bea")
    assert [status for who, status, _ in done if who == "bea"] == [200]
    between = [status for who, status, t in done if who == "token" and sent < t < answered]
    assert len(between) <= 1, (between, answered - sent)
    assert sql(client, "SELECT v FROM files.small")["data"] == [["x"]]
    assert {status for who, status, _ in done} <= {200, 503}, done  # 503: waited past its turn


def zygote_of(server: ServerProcess) -> int:
    for pid in _children(str(server.process.pid)):
        with contextlib.suppress(OSError):
            if ZYGOTE in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    raise AssertionError("no parse zygote")


def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_stopped_or_killed_zygote_is_replaced(served: tuple[ServerProcess, httpx.Client]) -> None:
    """The zygote that forks the parses stopped (SIGSTOP): an upload still answers within its
    --upload-timeout, that zygote is killed, and the next upload has a new one; killed, the
    same. A child whose zygote died mid-parse is still killed at its deadline."""
    server, client = served
    assert upload(client, "z0", "z0.csv", b"id\n1\n").status_code == 200
    stopped = zygote_of(server)
    os.kill(stopped, signal.SIGSTOP)
    start = time.monotonic()
    problem(upload(client, "z1", "z1.csv", b"id\n1\n"), "Error", "kbsql serve --upload-timeout")
    assert time.monotonic() - start < 7
    assert upload(client, "z2", "z2.csv", b"id\n2\n").status_code == 200
    assert not running(stopped) and zygote_of(server) != stopped
    os.kill(zygote_of(server), signal.SIGKILL)
    assert upload(client, "z3", "z3.csv", b"id\n3\n").status_code == 200
    assert sql(client, "SELECT id FROM files.z3")["data"] == [[3]]

    slow: list[httpx.Response] = []
    raw = workbook(60_000)
    sender = threading.Thread(target=lambda: slow.append(upload(client, "orphan", "o.xlsx", raw)))
    sender.start()
    deadline = time.monotonic() + 5
    while not child_processes(server) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(child_processes(server)[0])
    os.kill(zygote_of(server), signal.SIGKILL)  # the child is the init process's now
    sender.join()
    problem(slow[0], "Error", "kbsql serve --upload-timeout")
    gone = time.monotonic() + 2
    while running(child) and time.monotonic() < gone:
        time.sleep(0.02)
    assert not running(child)


def test_stopping_the_server_stops_a_parse_after_the_grace_period(tmp_path: Path) -> None:
    """SIGTERM while a workbook is parsed (for ~6 s, --upload-timeout 60): the request has the
    1 s grace period (--shutdown-timeout), then the parse is killed and the server is gone,
    not after the parse or its deadline (it stored the file 47 s after the signal)."""
    server, url = start_server(tmp_path / "server", env={"KBSQL_UPLOAD_PROCESSES": "1",
                                                         "KBSQL_SHUTDOWN_TIMEOUT": "1"})
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            sender = threading.Thread(target=lambda: _quietly(lambda: upload(client, "late", "l.xlsx",
                                                                             workbook(60_000))))
            sender.start()
            deadline = time.monotonic() + 20  # the zygote starts at the first upload
            while not child_processes(server) and time.monotonic() < deadline:
                time.sleep(0.02)
            children = [int(pid) for pid in child_processes(server)]
            assert children, "the parse never started"
            signalled = time.monotonic()
            server.process.terminate()
            server.process.wait(timeout=10)
            took = time.monotonic() - signalled
            sender.join()
        assert took < 4, took
        assert not any(running(pid) for pid in children)
    finally:
        stop_server(server)
    again, url = start_server(tmp_path / "server")
    try:
        assert "late" not in [f["name"] for f in httpx.get(f"{url}/api/files").json()]
    finally:
        stop_server(again)


def _quietly(send: Callable[[], object]) -> None:
    with contextlib.suppress(httpx.HTTPError):
        send()


def test_uploads_waiting_for_a_parse_hold_no_sql_worker(tmp_path: Path) -> None:
    """Uploads have a lane of their own (--upload-workers): four of one token's workbooks
    waiting for the one parse process leave that token's SELECT 1 instant on --sql-workers 2.
    In the SQL lane, each waiting upload held an SQL worker (issue 39: 32 uploads of two tokens
    held every one), so the statement queued behind the parses."""
    server, url = start_server(tmp_path / "server", env={
        "KBSQL_UPLOAD_PROCESSES": "1", "KBSQL_UPLOAD_TIMEOUT": "30", "KBSQL_SQL_WORKERS": "2",
        "KBSQL_TOKEN": TOKEN})
    try:
        with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            raw = workbook(20_000)  # a few CPU-s each, one at a time
            answers: list[int] = []
            threads = [threading.Thread(target=lambda n=n: answers.append(
                upload(client, f"book_{n}", "b.xlsx", raw).status_code)) for n in range(4)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 20
            while not child_processes(server) and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)  # the other three wait for the parse process by now
            for _ in range(3):
                start = time.monotonic()
                assert sql(client, "SELECT 1")["data"] == [[1]]
                assert time.monotonic() - start < 1.0, time.monotonic() - start
            for thread in threads:
                thread.join()
            assert answers == [200] * 4, answers
            assert sql(client, "SELECT count(*) FROM files.book_3")["data"] == [[20_000]]
    finally:
        stop_server(server)
