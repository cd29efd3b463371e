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
    """The connection is checked when made: without a token it is refused at once, in one
    line naming --token-env (not the Python API), and not kept; a wrong token is refused
    naming where it came from; the right one says "token set", never the token."""
    monkeypatch.delenv("KBSQL_TOKEN", raising=False)
    monkeypatch.delenv("KBSQL_API_KEY", raising=False)
    result, out = cells.run(f"%kbsql_connect {token_url} --alias plain")
    assert not result.success, out
    assert f"{token_url} needs a token (401 Unauthorized)" in out and "--token-env VAR" in out, out
    assert "Traceback" not in out and "kbsql.connect(" not in out and len(out.strip().splitlines()) == 1
    _, listing = cells.run("%kbsql_connect --list")
    assert "plain" not in listing  # a refused connection is not kept
    monkeypatch.setenv("WRONG_TOKEN", "not-the-token")
    result, out = cells.run(f"%kbsql_connect {token_url} --alias wrong --token-env WRONG_TOKEN")
    assert not result.success and "refused the token in $WRONG_TOKEN (401" in out, out
    assert "not-the-token" not in out
    monkeypatch.setenv("TEAM_KBSQL_TOKEN", TOKEN)
    result, out = cells.run(f"%kbsql_connect {token_url} --alias team --token-env TEAM_KBSQL_TOKEN")
    assert result.success and TOKEN not in out, out
    assert "token set ($TEAM_KBSQL_TOKEN)" in out and "api key" not in out, out
    assert cells.ok("%kbsql SELECT 1 AS a")["a"].tolist() == [1]
    _, listing = cells.run("%kbsql_connect --list")
    assert TOKEN not in listing


def test_kbsql_token_in_the_environment_is_used(cells, token_url: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBSQL_API_KEY", raising=False)
    monkeypatch.setenv("KBSQL_TOKEN", TOKEN)
    result, out = cells.run(f"%kbsql_connect {token_url}")
    assert result.success and "token set ($KBSQL_TOKEN)" in out and TOKEN not in out, out
    assert cells.ok("%kbsql SELECT 2 AS b")["b"].tolist() == [2]
