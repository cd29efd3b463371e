"""Whose share a call takes on a shared `kbsql serve`: the lanes' fair share (half the
workers per user) must follow the credential the server accepted, whichever way it was
presented, and the model hosts' slots are shared the same way. Real servers on loopback,
driven by a user who logs in the way MindsDB's JavaScript SDK does (the `session` cookie
only) or sends a made-up bearer value beside it, and by slow model calls."""

from __future__ import annotations

import hashlib
import json
import select
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pandas as pd
import pytest

import kbsql
from kbsql.server.process import spawn
from tests.agents.fakes import FakeLLM, flood
from tests.mysql.conftest import connect
from tests.test_server_isolation import HEAVY

TOKEN = "tok-shares"


def raw_post(url: str, path: str, body: dict, *headers: str) -> socket.socket:
    """POST `body` on a bare socket with `headers` and return it unread: closing it is a
    client that leaves (its statement is stopped)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    data = json.dumps(body).encode()
    head = "".join(f"{h}\r\n" for h in headers).encode()
    raw = socket.create_connection((host, int(port)))
    raw.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + head +
                b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode() +
                b"\r\n\r\n" + data)
    return raw


def test_a_cookie_session_takes_the_login_users_share_of_the_sql_lane(tmp_path: Path) -> None:
    """Two SQL workers (one a user). The login user, signed in by cookie, sends two heavy
    statements: one with the cookie alone, one with the cookie and a made-up bearer value
    (which the server does not read: the cookie lets it in). Both are the login user's, so
    the second queues and the token's `SELECT 1` answers at once. Before, a cookie named no
    owner (no share) and the made-up value a new owner per request: both heavy statements
    held both workers and the token's `SELECT 1` waited for them (7.8 s of a 16-call join)."""
    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob", "--sql-workers", "2",
                     "--statement-timeout", "60")) as srv:
        with kbsql.connect(srv.url, token=TOKEN) as client:
            client.register("n", pd.DataFrame({"x": range(3000)}))
        login = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"}, timeout=30)
        cookie = f"Cookie: session={login.cookies['session']}"
        hogs = [raw_post(srv.url, "/api/sql/query", {"query": HEAVY}, cookie),
                raw_post(srv.url, "/api/sql/query", {"query": HEAVY}, cookie,
                         "Authorization: Bearer made-up")]
        time.sleep(1.5)  # the first holds its worker by now (and the second, without a share)
        start = time.monotonic()
        other = httpx.post(f"{srv.url}/api/sql/query", json={"query": "SELECT 1"}, timeout=60,
                           headers={"Authorization": f"Bearer {TOKEN}"})
        waited = time.monotonic() - start
        assert other.json()["data"] == [[1]], other.text
        assert waited < 3.0, waited  # without the share: until a heavy statement leaves
        assert not select.select(hogs, [], [], 0)[0]  # the login user's statements were still held
        for raw in hogs:
            raw.close()


class SlowOnAsk(FakeLLM):
    """Answers at once, but takes `SLOW_S` for a question that says SLOW."""

    def next_turn(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        turn = super().next_turn(body, headers)
        if "SLOW" in json.dumps(body["messages"]):
            time.sleep(SLOW_S)
        return turn


SLOW_S = 4.0


def test_one_user_holds_at_most_half_of_a_model_hosts_slots(tmp_path: Path) -> None:
    """--model-concurrency 2: the token asks two slow questions of an agent (one completion,
    one stream); the login user's quick completion to the same model host gets the other
    slot at once. Before, the token's two calls took both slots (the host had no share) and
    the other user waited for one of them (with calls over 5 s: a 503 'calls to ... are
    already running'); the token's second call now waits for its first."""
    with SlowOnAsk("openai", []) as llm:
        host = llm.base_url.split("//", 1)[1].split("/", 1)[0]
        with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
                   args=("--token", TOKEN, "--user", "bob", "--model-concurrency", "2",
                         "--allow-model-host", host)) as srv:
            token = {"Authorization": f"Bearer {TOKEN}"}
            model = json.dumps({"provider": "openai", "model_name": "m1", "api_key": "sk-shares",
                                "base_url": llm.base_url})
            made = httpx.post(f"{srv.url}/api/sql/query", headers=token, timeout=30,
                              json={"query": f"CREATE AGENT helper USING model = {model}"})
            assert made.json()["type"] == "ok", made.text
            path = "/api/projects/mindsdb/agents/helper/completions"
            slow = {"messages": [{"question": "SLOW please", "answer": None}]}
            hogs = [raw_post(srv.url, path, slow, f"Authorization: Bearer {TOKEN}"),
                    raw_post(srv.url, path + "/stream", slow, f"Authorization: Bearer {TOKEN}")]
            time.sleep(0.7)  # the token's first call holds a slot, its second one too before
            session = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"},
                                 timeout=30).json()["token"]
            start = time.monotonic()
            quick = httpx.post(srv.url + path, json={"messages": [{"question": "hi", "answer": None}]},
                               timeout=30, headers={"Authorization": f"Bearer {session}"})
            waited = time.monotonic() - start
            assert quick.status_code == 200, quick.text
            assert waited < SLOW_S - 1.5, waited  # without the share: until a slow call ends
            for raw in hogs:
                raw.close()


class FloodOnAsk(FakeLLM):
    """Streams text for ever to a question that says FLOOD, answers others at once."""

    def next_turn(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        turn = super().next_turn(body, headers)
        return flood(1000) if "FLOOD" in json.dumps(body["messages"]) else turn


def test_a_stream_nobody_reads_gives_its_model_slot_back(tmp_path: Path) -> None:
    """--model-concurrency 1, --http-write-timeout 2: the token opens a completion stream of
    an answer without end and never reads it. Its connection is closed once its answer has
    waited unread 2 s, and with it the model call: the login user's completion to the same
    host then answers. Before, the unread stream held its model worker and the host's slot
    for as long as its client stayed (still at 60 s, with --model-timeout 10: the server
    had stopped reading the model, so nothing timed the call), and every other call to the
    host waited 5 s for a 503."""
    with FloodOnAsk("openai", []) as llm:
        host = llm.base_url.split("//", 1)[1].split("/", 1)[0]
        with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
                   args=("--token", TOKEN, "--user", "bob", "--model-concurrency", "1",
                         "--http-write-timeout", "2", "--allow-model-host", host)) as srv:
            model = json.dumps({"provider": "openai", "model_name": "m1", "api_key": "sk-shares",
                                "base_url": llm.base_url})
            made = httpx.post(f"{srv.url}/api/sql/query", headers={"Authorization": f"Bearer {TOKEN}"},
                              timeout=30, json={"query": f"CREATE AGENT helper USING model = {model}"})
            assert made.json()["type"] == "ok", made.text
            path = "/api/projects/mindsdb/agents/helper/completions"
            host_, port = srv.url.split("//", 1)[1].rsplit(":", 1)
            unread = socket.socket()
            unread.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            unread.connect((host_, int(port)))
            body = json.dumps({"messages": [{"question": "FLOOD", "answer": None}]}).encode()
            unread.sendall(f"POST {path}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                           f"{TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
                           "\r\n\r\n".encode() + body)
            time.sleep(5.0)  # the stream runs, its socket fills, 2 s pass unread
            session = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"},
                                 timeout=30).json()["token"]
            quick = httpx.post(srv.url + path, json={"messages": [{"question": "hi", "answer": None}]},
                               timeout=30, headers={"Authorization": f"Bearer {session}"})
            assert quick.status_code == 200, quick.text  # before: 503, the host's one slot held
            assert "--http-write-timeout" in srv.log_text()
            unread.close()


def test_no_digest_of_a_password_or_token_is_stored_with_a_job(tmp_path: Path) -> None:
    """A job keeps its creator's fair-share owner in the catalog (jobs.creator). The owner of
    the login user is its password's, of the token the token's: as plain SHA-256 (the
    owners' digest before) the catalog held a fast hash of each, open to an offline guess.
    Now the digest is keyed per process: neither appears."""
    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob")) as srv:
        session = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"},
                             timeout=30).json()["token"]
        for name, secret in (("by_login", session), ("by_token", TOKEN)):
            made = httpx.post(f"{srv.url}/api/sql/query", headers={"Authorization": f"Bearer {secret}"},
                              timeout=30, json={"query": f"CREATE JOB {name} (SELECT 1) EVERY 1 hour"})
            assert made.json()["type"] == "ok", made.text
    with sqlite3.connect(tmp_path / "d" / "catalog.sqlite") as catalog:
        owners = dict(catalog.execute("SELECT name, json_extract(creator, '$.owner') FROM jobs").fetchall())
    assert set(owners) == {"by_login", "by_token"} and all(owners.values()), owners
    plain = {hashlib.sha256(s.encode()).hexdigest()[:16] for s in ("pw-bob", TOKEN)}
    assert not plain & set(owners.values()), owners


def test_one_user_holds_at_most_half_of_the_mysql_logins(tmp_path: Path) -> None:
    """--mysql-max-connections 4: the token's third login is refused in one line saying the
    share, and the login user still gets in (before, there was no bound on logins at all)."""
    import pymysql

    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob", "--mysql-port", "0",
                     "--mysql-max-connections", "4")) as srv:
        def login(user: str, password: str) -> pymysql.connections.Connection:
            return pymysql.connect(host="127.0.0.1", port=srv.mysql_port, user=user, password=password,
                                   database="mindsdb", connect_timeout=10)

        mine = [login("any", TOKEN) for _ in range(2)]
        try:
            login("any", TOKEN)
            raise AssertionError("a third login of the token got in")
        except pymysql.err.OperationalError as exc:
            assert "these credentials have 2 logged in" in str(exc) and "--mysql-max-connections" in str(exc)
        other = login("bob", "pw-bob")
        with other.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchall() == ((1,),)
        for conn in [*mine, other]:
            conn.close()


def test_one_user_holds_at_most_half_of_the_http_connections(tmp_path: Path) -> None:
    """Every open connection holds a descriptor. One token keeping connections open (300 with
    statements queued took every descriptor of a server limited to 256, and another user's
    `SELECT 1` had no answer in 10 s) now keeps at most half of --max-http-connections: the
    next one's request answers 503 in one line and the connection is closed, while the login
    user still gets in and, once the token closes some, so does the token."""
    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob", "--max-http-connections", "8")) as srv:
        token = httpx.Headers({"Authorization": f"Bearer {TOKEN}"})
        held = [httpx.Client(base_url=srv.url, headers=token, timeout=30) for _ in range(4)]
        try:
            for client in held:  # each its own keep-alive connection
                assert client.get("/api/status").status_code == 200
            with httpx.Client(base_url=srv.url, headers=token, timeout=30) as fifth:
                refused = fifth.get("/api/projects")
                assert refused.status_code == 503, refused.text
                assert refused.headers["connection"] == "close"
                detail = refused.json()["detail"]
                assert "half of this server's 8" in detail and "--max-http-connections" in detail
            login = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"},
                               timeout=30)
            assert login.status_code == 200
            with httpx.Client(base_url=srv.url, cookies=login.cookies, timeout=30) as bob:
                assert bob.post("/api/sql/query", json={"query": "SELECT 1 AS one"}).json()["data"] == [[1]]
            held.pop().close()  # the token gives one back: its next connection gets in
            time.sleep(0.5)
            with httpx.Client(base_url=srv.url, headers=token, timeout=30) as again:
                assert again.get("/api/projects").status_code == 200
        finally:
            for client in held:
                client.close()


def test_connections_without_credentials_hold_at_most_half_of_the_http_connections(tmp_path: Path) -> None:
    """On a server with a token, a client with no credential reaches only its open paths
    (`/api/status`); its keep-alive connections are one owner held to half the cap, so they
    cannot fill it and lock out the users who have a token. A refused token closes its
    connection rather than keep it open, counted by no one."""
    with spawn(tmp_path / "d", args=("--token", TOKEN, "--max-http-connections", "8")) as srv:
        held = [httpx.Client(base_url=srv.url, timeout=30) for _ in range(4)]
        try:
            for client in held:
                assert client.get("/api/status").status_code == 200
            with httpx.Client(base_url=srv.url, timeout=30) as fifth:
                refused = fifth.get("/api/status")
                assert refused.status_code == 503 and "without credentials" in refused.json()["detail"]
            with httpx.Client(base_url=srv.url, timeout=30) as wrong:
                denied = wrong.get("/api/projects", headers={"Authorization": "Bearer nope"})
                assert denied.status_code == 401 and denied.headers["connection"] == "close"
            with kbsql.connect(srv.url, token=TOKEN) as client:
                assert client.sql("SELECT 1 AS one").to_json()["data"] == [[1]]
        finally:
            for client in held:
                client.close()


def test_one_users_variables_are_neither_read_nor_crowded_by_another(tmp_path: Path) -> None:
    """`SET @name` kept one store for the whole server: the login user read the token's key
    with `SELECT @key` (MindsDB's docs put keys there: `SET @key = from_env(...)`), and the
    token's 1,000 names refused every other user's SET until a restart (NULL kept the name).
    Now each user has its own store (of --max-variables names), and `= NULL` frees the name."""
    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob", "--mysql-port", "0", "--max-variables", "20")) as srv:
        login = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"}, timeout=30)
        token, bob = {"Authorization": f"Bearer {TOKEN}"}, {"Cookie": f"session={login.cookies['session']}"}

        def sql(query: str, headers: dict[str, str]) -> dict[str, Any]:
            return httpx.post(f"{srv.url}/api/sql/query", json={"query": query}, headers=headers,
                              timeout=60).json()

        assert sql("SET @key = 'sk-token-secret'", token)["type"] == "ok"
        assert sql("SELECT @key AS k", token)["data"] == [["sk-token-secret"]]
        read = sql("SELECT @key AS k", bob)
        assert read["type"] == "error" and "sk-token" not in json.dumps(read), read
        with connect(srv, password=TOKEN) as door, door.cursor() as cursor:  # the token's too
            for i in range(19):  # with @key, the 20 names one store keeps
                cursor.execute(f"SET @v{i} = {i}")
        refused = sql("SET @one_more = 1", token)["error_message"]
        assert "more than 20 variables" in refused and "kbsql serve --max-variables" in refused, refused
        assert sql("SET @mine = 1", bob)["type"] == "ok"  # another user's names are not counted
        assert sql("SET @v0 = NULL", token)["type"] == "ok"  # frees a name
        assert sql("SET @one_more = 1", token)["type"] == "ok"


def test_a_write_to_a_source_waits_for_no_statement_that_does_not_read_one(tmp_path: Path) -> None:
    """A write to a duckdb source re-attaches it, behind a gate every statement went through:
    the swap waited for the token's 20 s statement over df, and held every new statement
    back meanwhile, so the login user's INSERT took 19 s and its `SELECT 1` 18 s. Only
    statements reading an attached source go through the gate now."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    with duckdb.connect(str(allowed / "w.duckdb")) as con:
        con.execute("CREATE TABLE t (i INTEGER)")
    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob", "--allow-path", str(allowed))) as srv:
        with kbsql.connect(srv.url, token=TOKEN) as client:
            client.register("n", pd.DataFrame({"x": range(3000)}))
            client.sql(f"CREATE DATABASE w WITH ENGINE = 'duckdb', PARAMETERS = {{\"database\": "
                       f"\"{allowed / 'w.duckdb'}\"}}")
        login = httpx.post(f"{srv.url}/api/login", json={"username": "bob", "password": "pw-bob"}, timeout=30)
        bob = {"Cookie": f"session={login.cookies['session']}"}
        hog = raw_post(srv.url, "/api/sql/query", {"query": HEAVY, "timeout": 20},
                       f"Authorization: Bearer {TOKEN}")
        time.sleep(1.5)  # the heavy statement runs by now

        def timed(query: str) -> tuple[float, dict[str, Any]]:
            start = time.monotonic()
            answer = httpx.post(f"{srv.url}/api/sql/query", json={"query": query}, headers=bob, timeout=60)
            return time.monotonic() - start, answer.json()

        took, written = timed("INSERT INTO w.t VALUES (1)")
        assert written["type"] == "ok" and took < 3.0, (took, written)
        took, one = timed("SELECT 1")
        assert one["data"] == [[1]] and took < 3.0, (took, one)
        assert timed("SELECT count(*) FROM w.t")[1]["data"] == [[1]]
        assert not select.select([hog], [], [], 0)[0]  # the heavy statement was still running
        hog.close()


def test_a_change_of_user_moves_the_connections_place_and_owner(tmp_path: Path) -> None:
    """COM_CHANGE_USER logs in again on the same connection. Each took a new place among the
    credential's MySQL logins and none was given back: after 127 on one connection, closed,
    the token had one login left until a restart (live, default 256), as a pool that
    re-authenticates connections it hands out would do. And the connection's statements
    stayed the first credential's: changed to bob, it read the token's variables."""
    import mysql.connector

    with spawn(tmp_path / "d", env={"KBSQL_PASSWORD": "pw-bob"},
               args=("--token", TOKEN, "--user", "bob", "--mysql-port", "0",
                     "--mysql-max-connections", "8")) as srv:  # a user holds at most 4
        options = {"host": "127.0.0.1", "port": srv.mysql_port, "database": "mindsdb", "use_pure": True}
        door = mysql.connector.connect(user="x", password=TOKEN, **options)
        for _ in range(10):
            door.cmd_change_user(username="x", password=TOKEN, database="mindsdb")
        with door.cursor() as cursor:
            cursor.execute("SET @key = 'sk-token-secret'")
        door.cmd_change_user(username="bob", password="pw-bob", database="mindsdb")
        with door.cursor() as cursor:
            with pytest.raises(mysql.connector.Error) as undefined:
                cursor.execute("SELECT @key")
                cursor.fetchall()
        assert "sk-token" not in str(undefined.value)
        door.close()
        time.sleep(0.5)  # the door sees the connection end
        logins = [connect(srv, password=TOKEN) for _ in range(4)]  # the token's whole share
        for login in logins:
            login.close()
