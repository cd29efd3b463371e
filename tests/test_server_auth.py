"""`kbsql serve --token` / `--user --password`: every /api route but status needs the token,
the kbsql client and the reference SDK (mindsdb_sdk) get in, and a public bind without a
token refuses to start. All against a real server process on loopback."""

from __future__ import annotations

import subprocess
import sys
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
    with spawn(tmp_path_factory.mktemp("auth"),
               args=("--token", TOKEN, "--user", "ann", "--password", "pw-ann")) as proc:
        yield proc


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def kb_names(url: str) -> list[str]:
    answer = httpx.get(f"{url}/api/projects/mindsdb/knowledge_bases", headers=bearer(TOKEN))
    assert answer.status_code == 200
    return [k["name"] for k in answer.json()]


@pytest.mark.parametrize("headers", [{}, bearer("wrong-token"), {"Authorization": TOKEN},
                                     {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"},
                                     {"X-Api-Key": "wrong-token"}])
def test_without_the_token_every_api_route_is_401_and_changes_nothing(
        server: ServerProcess, headers: dict[str, str]) -> None:
    url = server.url
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
