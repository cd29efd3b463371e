"""`kbsql.notebook.location`: the place the JupyterLab sidebar reads from a kernel, following
`%kbsql_connect`, `KbSql.default_connection` and `[tool.kbsql]`, never showing a key and
never opening or creating anything by being asked."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from kbsql.notebook.location import current_location
from kbsql.notebook.magics import KbSql

SECRET = "sk-live-0123456789abcdef"
EXPRESSION = "__import__('kbsql.notebook.location', fromlist=['_']).for_frontend()"


def test_follows_kbsql_connect_and_never_shows_a_key(cells, tmp_path, monkeypatch):
    home = (tmp_path / "home").resolve()
    first = current_location(cells.shell)
    assert first == {"kind": "embedded", "location": str(home), "alias": "default", "project": None,
                     "key": False}
    assert not home.exists()  # asking opened nothing

    cells.ok("%kbsql_connect ./other")
    assert current_location(cells.shell)["location"] == str((tmp_path / "other").resolve())

    monkeypatch.setenv("KBSQL_API_KEY", SECRET)
    cells.ok("%kbsql_connect http://user:pw@127.0.0.1:9/ --alias far")
    place = current_location(cells.shell)
    assert place == {"kind": "remote", "location": "http://127.0.0.1:9", "alias": "far", "project": "mindsdb",
                     "key": True}

    # What the JupyterLab extension asks: a silent user expression, answered as JSON.
    reply = cells.shell.user_expressions({"kbsql": EXPRESSION})["kbsql"]
    assert reply["status"] == "ok", reply
    assert json.loads(reply["data"]["text/plain"]) == {"location": place}
    assert SECRET not in str(reply) and "pw" not in str(reply)

    cells.ok("%kbsql_connect other")  # back to an open connection by its alias
    assert current_location(cells.shell)["location"] == str((tmp_path / "other").resolve())


def test_default_connection_before_the_first_query(cells, tmp_path, monkeypatch):
    magics = next(c for c in cells.shell.configurables if isinstance(c, KbSql))
    magics.default_connection = "http://127.0.0.1:9"
    assert current_location(cells.shell)["location"] == "http://127.0.0.1:9"
    magics.connections = {"team": str(tmp_path / "team")}
    magics.default_connection = "team"
    assert current_location(cells.shell)["location"] == str((tmp_path / "team").resolve())
    magics.default_connection = "typo"  # the first query will fail: no place to show
    assert current_location(cells.shell) is None


def test_pyproject_before_the_magics_are_loaded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KBSQL_HOME", raising=False)
    bare = SimpleNamespace(configurables=[])  # a kernel without %load_ext kbsql
    assert current_location(bare)["location"] == str((tmp_path / ".kbsql").resolve())
    (tmp_path / "pyproject.toml").write_text('[tool.kbsql]\ndefault_connection = "data/kb"\n')
    assert current_location(bare)["location"] == os.path.realpath(tmp_path / "data" / "kb")
