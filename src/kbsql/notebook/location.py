"""Where the notebook's current kbsql connection points, for the JupyterLab sidebar and chat.

The JupyterLab extension cannot see a kernel's `%kbsql_connect`: it asks the kernel with a
silent `execute_request` whose `user_expressions` call `for_frontend()`, then opens the same
place in the Jupyter server. Only the place travels: a data directory or a server URL
without its `user:password@` part, never a key (the extension uses its own token).
Nothing is opened or created by asking: a connection not used yet is resolved the way the
first `%%kbsql` cell will resolve it (`KbSql.default_connection`, `[tool.kbsql]` in
pyproject.toml, else `kbsql.connect()`'s `$KBSQL_HOME` or `./.kbsql`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from kbsql.notebook.connections import is_url
from kbsql.notebook.pyproject_config import pyproject_settings

_USERINFO = re.compile(r"^(https?://)[^/@]*@")


def current_location(shell: Any = None) -> dict[str, Any] | None:
    """The current connection of the magics in `shell` (default: the running IPython):
    `{"kind": "embedded" | "remote", "location": dir or URL, "alias", "project", "key"}`,
    `key` saying whether the kernel sends an API key (never the key). None when the next
    query's connection cannot be told without failing (an unknown alias in the config)."""
    magics = _magics(shell)
    if magics is not None and magics.manager.current is not None:
        conn = magics.manager.connections[magics.manager.current]
        api = conn.client.api
        where = str(api.location)
        kind = "embedded" if api.embedded else "remote"
        return _place(kind, where, conn.alias, conn.client.project, conn.has_key)
    if magics is not None:
        default, named = magics.default_connection, dict(magics.connections)
        project = magics.project
    else:  # the magics are not loaded yet: what they will read when they are
        settings = pyproject_settings()
        default = str(settings.get("default_connection") or "")
        named = dict(settings.get("connections") or {})
        project = str(settings.get("project") or "")
    return _resolve(default, named, project)


def _magics(shell: Any) -> Any:
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    from kbsql.notebook.magics import KbSql

    return next((c for c in getattr(shell, "configurables", []) if isinstance(c, KbSql)), None)


def _resolve(target: str, named: dict[str, str], project: str) -> dict[str, Any] | None:
    """What `ConnectionManager.connect(target)` would open, without opening it."""
    alias = target or "default"
    if target and target in named and not is_url(target):
        target = str(named[target])
    if target and is_url(target):
        return _place("remote", target, alias, project, False)
    if target and not os.path.isdir(os.path.expanduser(target)) and "/" not in target \
            and not target.startswith((".", "~")):
        return None  # an unknown alias: the first query fails with its own message
    # kbsql.connect()'s documented rule: the directory given, else $KBSQL_HOME, else ./.kbsql
    folder = target or os.environ.get("KBSQL_HOME") or ".kbsql"
    return _place("embedded", str(Path(folder).expanduser().resolve()), alias, project, False)


def _place(kind: str, where: str, alias: str, project: str, key: bool) -> dict[str, Any]:
    if kind == "remote":
        where = _USERINFO.sub(r"\1", where.rstrip("/"))
    return {"kind": kind, "location": where, "alias": alias, "project": project or None, "key": key}


class _Json:
    """Shown as JSON text in a `user_expressions` reply's `text/plain` (the one format every
    shell produces, even with `%doctest_mode`): the extension parses it with JSON.parse."""

    def __init__(self, data: Any):
        self.data = data

    def __repr__(self) -> str:
        return json.dumps({"location": self.data})


def for_frontend() -> _Json:
    """`current_location()` as the JupyterLab extension reads it from `user_expressions`."""
    return _Json(current_location())
