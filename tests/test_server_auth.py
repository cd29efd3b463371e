"""`kbsql serve --token` / `--user --password`: every /api route but status needs the token,
the kbsql client and the reference SDK (mindsdb_sdk) get in, and a public bind without a
token refuses to start. All against a real server process on loopback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests

import kbsql
from kbsql.interface.errors import ServiceError
from kbsql.server.process import ServerProcess, spawn

TOKEN = "tok-0123456789abcdef"
PROBLEM = "application/problem+json"
CREATE_KB = {"query": "CREATE KNOWLEDGE_BASE sneaky USING embedding_model = "
                      "{'provider': 'kbsql', 'model_name': 'hash-16'}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--token", TOKEN, "--user", "ann", "--password", "pw-ann", *AS_PROXY,
            "--max-pending-connections", "40")
    with spawn(tmp_path_factory.mktemp("auth"), args=args) as proc:
        yield proc


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def kb_names(url: str) -> list[str]:
    answer = httpx.get(f"{url}/api/projects/mindsdb/knowledge_bases", headers=bearer(TOKEN))
    assert answer.status_code == 200
    return [k["name"] for k in answer.json()]


AS_PROXY = ("--forwarded-allow-ips", "127.0.0.1")
"""The test process stands for a reverse proxy on loopback (its X-Forwarded-For names the
client), so one process can stand for several clients; tests/test_server_isolation.py
checks the header is ignored without the flag."""


def from_address(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


WITHOUT_TOKEN = [{}, bearer("wrong-token"), {"Authorization": TOKEN},
                 {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"},
                 {"X-Api-Key": "wrong-token"}]


@pytest.mark.parametrize("headers", WITHOUT_TOKEN)
def test_without_the_token_every_api_route_is_401_and_changes_nothing(
        server: ServerProcess, headers: dict[str, str]) -> None:
    url = server.url
    # each case from its own address: all of them together would pass the failure limit
    headers = {**headers, **from_address(f"198.51.100.{WITHOUT_TOKEN.index(headers) + 1}")}
    for response in (httpx.get(f"{url}/api/projects", headers=headers),
                     httpx.get(f"{url}/api/projects/mindsdb/knowledge_bases", headers=headers),
                     httpx.post(f"{url}/api/sql/query", json=CREATE_KB, headers=headers),
                     httpx.get(f"{url}/api/no/such/route", headers=headers)):
        assert response.status_code == 401, response.text
        assert response.headers["content-type"].startswith(PROBLEM)
        assert response.headers["www-authenticate"].startswith("Bearer")
        body = response.json()
        assert set(body) == {"title", "detail"} and "token" in body["detail"]
        assert TOKEN not in response.text
    assert "sneaky" not in kb_names(url)
    assert TOKEN not in server.log_text()


def test_a_wrong_token_is_told_it_is_wrong_and_no_token_how_to_send_one(server: ServerProcess) -> None:
    """Two different mistakes, two different answers: a token that is not the server's is
    called wrong (and nothing more: no hint of the right one), a request without one is
    told how to send it. The Python client carries the words into its error."""
    def detail(headers: dict[str, str], address: str) -> str:
        answer = httpx.get(f"{server.url}/api/projects", headers={**headers, **from_address(address)})
        assert answer.status_code == 401
        return answer.json()["detail"]

    for n, wrong in enumerate((bearer("wrong-token"), {"X-Api-Key": "wrong-token"})):
        assert detail(wrong, f"198.51.100.{40 + n}") == "Wrong token"
    for n, missing in enumerate(({}, {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"})):
        said = detail(missing, f"198.51.100.{50 + n}")
        assert said.startswith("This server needs a token: send 'Authorization: Bearer <token>'"), said
        assert "or log in: POST /api/login" in said and "login=..., password=..." in said, said
    with kbsql.connect(server.url, token="not-the-token") as client, pytest.raises(ServiceError) as refused:
        client.projects()
    assert refused.value.status == 401 and refused.value.detail == "Wrong token"


def test_status_stays_open_and_says_auth_is_on(server: ServerProcess) -> None:
    answer = httpx.get(f"{server.url}/api/status")
    assert answer.status_code == 200 and answer.json()["auth"]["http_auth_enabled"] is True


def test_the_token_lets_requests_through(server: ServerProcess) -> None:
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": "SELECT 1 AS a"},
                        headers=bearer(TOKEN))
    assert answer.status_code == 200 and answer.json()["data"] == [[1]]


def test_the_client_sends_the_token_from_the_argument_or_the_environment(
        server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBSQL_TOKEN", raising=False)
    with kbsql.connect(server.url) as anonymous, pytest.raises(ServiceError) as refused:
        anonymous.projects()
    assert refused.value.status == 401
    with kbsql.connect(server.url, token=TOKEN) as client:
        assert client.query("SELECT 41 + 1 AS n")["n"].tolist() == [42]
        assert TOKEN not in repr(client)
    monkeypatch.setenv("KBSQL_TOKEN", TOKEN)
    with kbsql.connect(server.url) as client:
        assert "mindsdb" in client.projects()


def test_mindsdb_sdk_logs_in_and_queries(server: ServerProcess) -> None:
    """The reference SDK tries /cloud/login, falls back on its 404 to /api/login, then sends
    the answered token as a bearer token."""
    import mindsdb_sdk

    sdk = mindsdb_sdk.connect(server.url, login="ann", password="pw-ann")
    assert sdk.query("SELECT 7 AS seven").fetch()["seven"].tolist() == [7]
    assert "mindsdb" in [p.name for p in sdk.list_projects()]
    with pytest.raises(requests.HTTPError) as refused:
        mindsdb_sdk.connect(server.url, login="ann", password="not-it")
    assert refused.value.response.status_code == 401
    by_key = mindsdb_sdk.connect(server.url, api_key=TOKEN)  # sent as X-Api-Key
    assert by_key.query("SELECT 8 AS eight").fetch()["eight"].tolist() == [8]
    anonymous = mindsdb_sdk.connect(server.url)
    with pytest.raises(requests.HTTPError) as refused:
        anonymous.query("SELECT 1").fetch()
    assert refused.value.response.status_code == 401
    assert "pw-ann" not in server.log_text() and "not-it" not in server.log_text()


def test_a_session_token_from_login_works_over_plain_http(server: ServerProcess) -> None:
    login = httpx.post(f"{server.url}/api/login", json={"username": "ann", "password": "pw-ann"})
    assert login.status_code == 200
    session = login.json()["token"]
    assert session and session != TOKEN
    assert httpx.get(f"{server.url}/api/projects", headers=bearer(session)).status_code == 200
    bad = httpx.post(f"{server.url}/api/login", json={"username": "ann"})
    assert bad.status_code == 401 and bad.headers["content-type"].startswith(PROBLEM)


def test_login_sets_mindsdbs_session_cookie_and_every_route_takes_it(server: ServerProcess) -> None:
    """MindsDB's JavaScript SDK flow: POST /api/login, read `session` from Set-Cookie, then send
    only `Cookie: session=...` (no token); /api/logout ends it."""
    login = httpx.post(f"{server.url}/api/login", json={"username": "ann", "password": "pw-ann"})
    assert login.status_code == 200
    set_cookie = login.headers["set-cookie"]
    attributes = [a.strip() for a in set_cookie.split(";")]
    assert "HttpOnly" in attributes and "SameSite=Lax" in attributes and "Secure" not in attributes
    value = attributes[0].removeprefix("session=")
    assert value == login.json()["token"]
    cookie = {"Cookie": f"session={value}"}
    assert httpx.get(f"{server.url}/api/projects", headers=cookie).status_code == 200
    query = httpx.post(f"{server.url}/api/sql/query", json={"query": "SELECT 3 AS n"}, headers=cookie)
    assert query.json()["data"] == [[3]]
    assert httpx.get(f"{server.url}/api/projects", headers={"Cookie": "session=made-up"}).status_code == 401
    out = httpx.post(f"{server.url}/api/logout", headers=cookie)
    assert out.status_code == 200 and "Max-Age=0" in out.headers["set-cookie"]
    assert httpx.get(f"{server.url}/api/projects", headers=cookie).status_code == 401
    assert httpx.get(f"{server.url}/api/projects", headers=bearer(TOKEN)).status_code == 200


def test_the_session_cookie_is_secure_behind_tls(server: ServerProcess) -> None:
    """A trusted proxy that ended TLS says so (X-Forwarded-Proto): the cookie is then Secure,
    so a browser never sends it back over plain HTTP."""
    login = httpx.post(f"{server.url}/api/login", json={"username": "ann", "password": "pw-ann"},
                       headers={"X-Forwarded-Proto": "https"})
    assert login.status_code == 200 and "; Secure" in login.headers["set-cookie"]


def test_mindsdb_sdk_session_keeps_working_on_the_cookie_alone(server: ServerProcess) -> None:
    """mindsdb_sdk keeps a requests.Session: after its login the cookie jar holds `session`,
    which carries the calls even without the bearer header it also sets."""
    import mindsdb_sdk

    sdk = mindsdb_sdk.connect(server.url, login="ann", password="pw-ann")
    api = sdk.api
    assert api.session.cookies.get("session")
    api.session.headers.pop("Authorization")
    assert sdk.query("SELECT 9 AS nine").fetch()["nine"].tolist() == [9]


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_public_bind_without_a_token_refuses_to_start(tmp_path: Path, host: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBSQL_TOKEN", raising=False)
    done = run_cli("--host", host, "--port", "0", "--data-dir", str(tmp_path / "data"))
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "token" in lines[0] and host in lines[0], done.stderr
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_a_token_only_server_has_no_login(tmp_path: Path) -> None:
    with spawn(tmp_path / "data", args=("--token", TOKEN)) as proc:
        login = httpx.post(f"{proc.url}/api/login", json={"username": "a", "password": "b"})
        assert login.status_code == 404 and "--user" in login.json()["detail"]
        assert httpx.get(f"{proc.url}/api/projects").status_code == 401


def test_a_login_only_server_tells_a_client_without_credentials_to_log_in(tmp_path: Path) -> None:
    """A server with --user and --password but no token told a client without credentials
    (mindsdb_sdk.connect(url) with no login) that it "needs a token", which it never gave out."""
    with spawn(tmp_path / "data", args=("--user", "ann", "--password", "pw-ann")) as proc:
        refused = httpx.get(f"{proc.url}/api/projects")
        assert refused.status_code == 401
        said = refused.json()["detail"]
        assert said.startswith("This server needs a login: POST /api/login") and "token=" not in said, said


def test_the_settings_repr_shows_no_secret() -> None:
    """Starlette's `Middleware` repr (in tracebacks and debug output) shows its arguments."""
    from starlette.middleware import Middleware

    from kbsql.server.auth import AuthSettings, TokenAuth

    settings = AuthSettings(token="tok-in-repr", user="ana", password="pw-in-repr")
    for shown in (repr(settings), repr(Middleware(TokenAuth, settings=settings))):
        assert "tok-in-repr" not in shown and "pw-in-repr" not in shown, shown
    assert "ana" in repr(settings)


def login_statuses(url: str, password: str, address: str, times: int) -> list[httpx.Response]:
    """`times` logins at once, from `address`, over as many connections."""
    async def all_at_once() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            return list(await asyncio.gather(*(
                client.post(f"{url}/api/login", json={"username": "ann", "password": password},
                            headers=from_address(address)) for _ in range(times))))
    return asyncio.run(all_at_once())


def assert_locked(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    assert set(response.json()) == {"title", "detail"}
    assert 1 <= int(response.headers["retry-after"]) <= 60


def test_parallel_wrong_logins_lock_the_address_even_for_the_right_password(
        server: ServerProcess) -> None:
    """Ten failures a minute per address: the eleventh guess, however parallel, is refused
    before its password is looked at, and so is the right password (a 200 would tell the
    guesser which guess was right). Other addresses log in as before."""
    guesser = "203.0.113.10"
    answers = login_statuses(server.url, "guess-123", guesser, 15)
    assert sorted(a.status_code for a in answers) == [401] * 10 + [429] * 5
    for answer in answers:
        if answer.status_code == 429:
            assert_locked(answer)
    right = httpx.post(f"{server.url}/api/login", json={"username": "ann", "password": "pw-ann"},
                       headers=from_address(guesser))
    assert_locked(right)
    assert "token" not in right.json()
    assert httpx.get(f"{server.url}/api/projects",
                     headers={**bearer(TOKEN), **from_address(guesser)}).status_code == 429
    elsewhere = httpx.post(f"{server.url}/api/login",
                           json={"username": "ann", "password": "pw-ann"},
                           headers=from_address("203.0.113.11"))
    assert elsewhere.status_code == 200 and elsewhere.json()["token"]
    assert httpx.get(f"{server.url}/api/projects", headers=bearer(TOKEN)).status_code == 200
    log = server.log_text()
    locks = [line for line in log.splitlines() if "too many failed" in line and guesser in line]
    assert len(locks) == 1 and ": 10 failed" in locks[0], log
    assert "guess-123" not in log and "pw-ann" not in log


def test_wrong_tokens_lock_the_address_but_no_credentials_are_not_counted(
        server: ServerProcess) -> None:
    url, guesser = server.url, "203.0.113.20"
    for _ in range(15):  # not logged in yet: 401 each time, never counted
        answer = httpx.get(f"{url}/api/projects", headers=from_address(guesser))
        assert answer.status_code == 401
    assert httpx.get(f"{url}/api/projects",
                     headers={**bearer(TOKEN), **from_address(guesser)}).status_code == 200
    for n in range(10):
        headers = bearer(f"guess-{n}") if n % 2 else {"X-Api-Key": f"guess-{n}"}
        answer = httpx.get(f"{url}/api/projects", headers={**headers, **from_address(guesser)})
        assert answer.status_code == 401
    for headers in (bearer("guess-10"), bearer(TOKEN), {"X-Api-Key": TOKEN}):
        assert_locked(httpx.post(f"{url}/api/sql/query", json={"query": "SELECT 1"},
                                 headers={**headers, **from_address(guesser)}))
    # without credentials it is still just "log in first"; status stays open
    assert httpx.get(f"{url}/api/projects", headers=from_address(guesser)).status_code == 401
    assert httpx.get(f"{url}/api/status", headers=from_address(guesser)).status_code == 200
    assert httpx.get(f"{url}/api/projects",
                     headers={**bearer(TOKEN), **from_address("203.0.113.21")}).status_code == 200
    assert "guess-" not in server.log_text() and TOKEN not in server.log_text()


def test_a_connection_flood_spares_connected_clients_and_ends_with_it(server: ServerProcess) -> None:
    """60 clients that connect to the HTTP port, send no head or half of one, and reconnect as
    soon as the pending cap (40) closes them (~2,700 connections a second took 0.7 of a core
    of the event loop every answer waits on). Their block (loopback's /8) is named once in the
    log and its new connections are closed at accept: the server spends under a third of a core,
    a client connected before (a proxy's keep-alive connection, with the token) is answered
    throughout, and a new connection gets in once the flood has stopped (a second after it)."""
    from tests.flooding import flood

    port = int(server.url.rsplit(":", 1)[1])
    with httpx.Client(base_url=server.url, headers=bearer(TOKEN), timeout=10) as client:
        assert client.post("/api/sql/query", json={"query": "SELECT 1"}).status_code == 200
        got = flood(server, port, [b"GET / HTTP/1.1\r\n" * (n % 2) for n in range(60)],
                    lambda: client.post("/api/sql/query", json={"query": "SELECT 1"}).status_code)
    assert got.made > 200 and set(got.answered) == {200}, got
    assert got.cpu_s < got.took_s / 3, got
    named = "HTTP: the pending cap (--max-pending-connections 40) closed 32 connections from 127.0.0.0/8"
    assert server.log_text()[got.log_from:].count(named) == 1, server.log_text()[got.log_from:][-2000:]
    deadline = time.monotonic() + 5
    while httpx_status(f"{server.url}/api/status") != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def httpx_status(url: str) -> int:
    """The status of a GET on a new connection; 0 when the connection was closed unanswered."""
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.TransportError:
        return 0


def test_bodies_dripped_after_a_refusal_count_against_the_pending_cap(server: ServerProcess) -> None:
    """60 tokenless POSTs whose complete heads promise 100 KB of body, then send a byte every
    0.3 s. Each is answered 401 at once; the connection then waits for the rest of its body,
    and 1,100 such connections kept both doors from new clients (a 1,024-descriptor limit).
    Answered before its body came, a connection counts as one not let in: the pending cap
    (40 here) closes the oldest, and a client connected before is answered throughout."""
    import socket
    import threading

    port = int(server.url.rsplit(":", 1)[1])
    head = (b"POST /api/sql/query HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: 100000\r\n\r\n")
    answers: list[bytes] = []
    open_at_end: list[bool] = []
    stop = threading.Event()

    def drip() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(head + b"{")
            answers.append(sock.recv(4096)[:12])
            sock.settimeout(0.3)
            closed = False
            while not stop.is_set() and not closed:
                try:
                    sock.sendall(b" ")
                    closed = sock.recv(4096) == b""
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
            open_at_end.append(not closed)

    with httpx.Client(base_url=server.url, headers=bearer(TOKEN), timeout=10) as client:
        assert client.post("/api/sql/query", json={"query": "SELECT 1"}).status_code == 200
        threads = [threading.Thread(target=drip, daemon=True) for _ in range(60)]
        for thread in threads:
            thread.start()
            time.sleep(0.01)
        polled = []
        for _ in range(20):
            polled.append(client.post("/api/sql/query", json={"query": "SELECT 1"}).status_code)
            time.sleep(0.1)
        stop.set()
        for thread in threads:
            thread.join(5)
    assert answers.count(b"HTTP/1.1 401") == 60, answers
    assert set(polled) == {200}, polled
    assert sum(open_at_end) <= 40, sum(open_at_end)  # the cap closed the oldest 20 or more
