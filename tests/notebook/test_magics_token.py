"""`%kbsql_connect URL --token-env VAR` against a real `kbsql serve --token`: the token
comes from the variable, is sent as a bearer token, and never reaches an output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbsql.server.process import spawn

TOKEN = "tok-notebook-0123456789"


@pytest.fixture
def token_url(tmp_path: Path) -> Iterator[str]:
    with spawn(tmp_path / "server", args=("--token", TOKEN)) as server:
        yield server.url


def test_token_from_a_named_variable(cells, token_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBSQL_TOKEN", raising=False)
    monkeypatch.delenv("KBSQL_API_KEY", raising=False)
    result, out = cells.run(f"%kbsql_connect {token_url} --alias plain")
    assert result.success, out
    refused, out = cells.run("%kbsql SELECT 1 AS a")
    assert not refused.success and ("401" in out or "token" in out.lower()), out
    monkeypatch.setenv("TEAM_KBSQL_TOKEN", TOKEN)
    result, out = cells.run(f"%kbsql_connect {token_url} --alias team --token-env TEAM_KBSQL_TOKEN")
    assert result.success and TOKEN not in out, out
    assert cells.ok("%kbsql SELECT 1 AS a")["a"].tolist() == [1]
    _, listing = cells.run("%kbsql_connect --list")
    assert TOKEN not in listing


def test_kbsql_token_in_the_environment_is_used(cells, token_url: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBSQL_API_KEY", raising=False)
    monkeypatch.setenv("KBSQL_TOKEN", TOKEN)
    result, out = cells.run(f"%kbsql_connect {token_url}")
    assert result.success, out
    assert cells.ok("%kbsql SELECT 2 AS b")["b"].tolist() == [2]
