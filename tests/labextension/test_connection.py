"""Which service the sidebar and the chat open (kbsql_labextension.connection.resolve), and
what of it the page may see: plain function calls, no JupyterLab needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from kbsql_labextension.connection import BadTarget, Clients, resolve


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("KBSQL_HOME", raising=False)
    monkeypatch.delenv("KBSQL_API_KEY", raising=False)
    monkeypatch.delenv("KBSQL_TOKEN", raising=False)


def test_embedded_next_to_the_notebook_or_on_kbsql_home(tmp_path, monkeypatch):
    root = tmp_path.resolve()
    target = resolve({"notebook": "a/b/nb.ipynb"}, root)
    assert (target.kind, target.location, target.source) == ("embedded", str(root / "a/b/.kbsql"),
                                                              "notebook folder")
    assert target.describe(root) == {"kind": "embedded", "where": "a/b/.kbsql", "source": "notebook folder",
                                     "token": False}
    assert not target.exists  # not created by resolving
    assert resolve({}, root).location == str(root / ".kbsql")  # no notebook open: the root's
    with pytest.raises(BadTarget, match="outside"):
        resolve({"notebook": "../elsewhere/nb.ipynb"}, root)

    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))  # what a kernel would use too
    home = resolve({"notebook": "a/nb.ipynb"}, root)
    assert (home.location, home.source) == (str(root / "home"), "$KBSQL_HOME")


def test_remote_token_from_settings_or_environment_and_never_described(tmp_path, monkeypatch):
    root = tmp_path.resolve()
    target = resolve({"url": "http://user:pw@127.0.0.1:1/", "token": "s3cret"}, root)
    assert (target.kind, target.location, target.token) == ("remote", "http://user:pw@127.0.0.1:1", "s3cret")
    shown = target.describe(root)
    assert shown == {"kind": "remote", "where": "http://***@127.0.0.1:1", "source": "settings", "token": True}
    assert "s3cret" not in repr(target) and "pw" not in str(shown)

    assert resolve({"url": "http://127.0.0.1:1"}, root).token is None
    monkeypatch.setenv("KBSQL_API_KEY", "from-env")
    assert resolve({"url": "http://127.0.0.1:1"}, root).token == "from-env"
    monkeypatch.setenv("KBSQL_TOKEN", "server-token")  # kbsql.connect's own variable comes first
    assert resolve({"url": "http://127.0.0.1:1"}, root).token == "server-token"
    assert resolve({"url": "http://127.0.0.1:1", "token": "typed"}, root).token == "typed"
    with pytest.raises(BadTarget, match="http:// or https://"):
        resolve({"url": "ftp://127.0.0.1"}, root)


def test_one_client_per_service_and_token(tmp_path):
    clients = Clients()
    first = resolve({"url": "http://127.0.0.1:9", "token": "a"}, tmp_path)
    again = resolve({"url": "http://127.0.0.1:9", "token": "a"}, tmp_path)
    other = resolve({"url": "http://127.0.0.1:9", "token": "b"}, tmp_path)
    try:
        assert clients.get(first) is clients.get(again)
        assert clients.get(first) is not clients.get(other)  # a new token is a new client
        embedded = resolve({"notebook": "nb.ipynb"}, Path(tmp_path).resolve())
        assert clients.get(embedded).is_embedded
    finally:
        clients.close_all()


def test_the_notebooks_kernel_connection_unless_the_settings_name_a_server(tmp_path, monkeypatch):
    root = tmp_path.resolve()
    monkeypatch.setenv("KBSQL_HOME", str(root / "home"))  # the kernel's report wins over the default
    elsewhere = str(root.parent / "shared-kb")  # a %kbsql_connect DIR may be outside the root
    target = resolve({"notebook": "nb.ipynb", "kernel": {"kind": "embedded", "location": elsewhere}}, root)
    assert (target.kind, target.location, target.source) == ("embedded", elsewhere, "kernel")
    inside = resolve({"kernel": {"kind": "embedded", "location": str(root / "a" / ".kbsql")}}, root)
    assert inside.describe(root)["where"] == "a/.kbsql"

    monkeypatch.setenv("KBSQL_TOKEN", "server-token")
    served = resolve({"kernel": {"kind": "remote", "location": "http://127.0.0.1:9/", "key": True}}, root)
    assert (served.kind, served.location, served.source, served.token) == (
        "remote", "http://127.0.0.1:9", "kernel", "server-token")
    assert resolve({"token": "typed", "kernel": {"kind": "remote", "location": "http://127.0.0.1:9"}},
                   root).token == "typed"

    kernel = {"kind": "embedded", "location": elsewhere}
    pinned = resolve({"url": "http://127.0.0.1:7", "kernel": kernel}, root)
    assert (pinned.location, pinned.source) == ("http://127.0.0.1:7", "settings")  # the settings win
    assert resolve({"kernel": None}, root).source == "$KBSQL_HOME"  # no kernel answer: the default
    with pytest.raises(BadTarget, match="absolute"):
        resolve({"kernel": {"kind": "embedded", "location": "rel/.kbsql"}}, root)
    with pytest.raises(BadTarget, match="http:// or https://"):
        resolve({"kernel": {"kind": "remote", "location": "ftp://127.0.0.1"}}, root)
