"""Named connections of a notebook: the embedded engine or servers, one of them current.

Why a manager: a notebook often compares a local engine with a server, so connections
get short aliases and a cell can name one (`%%kbsql -c prod`). Secrets never enter an
output: an API key comes from an environment variable or a getpass prompt, goes only into
the HTTP client's headers, and every description shown to the user masks it (including
`user:password@` in a URL). All clients are closed when the kernel exits.
"""

from __future__ import annotations

import atexit
import os
import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kbsql.client import Client, connect
from kbsql.client.client import TOKEN_ENV, address_without_scheme, api_root, shown_without_scheme
from kbsql.interface.errors import KbsqlError, ServiceError, TransportError
from kbsql.interface.secrets import mask_url
from kbsql.notebook.options import shown_env_name
from kbsql.notebook.progress_bar import notebook_or_tqdm

DEFAULT_ALIAS = "default"
DEFAULT_API_KEY_ENV = "KBSQL_API_KEY"
REFUSED = (401, 403)


class ConnectionProblem(KbsqlError):
    """An unknown alias or a target that cannot be used."""


def is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def describe_target(target: str | None) -> str:
    if not target:
        return "embedded (./.kbsql or $KBSQL_HOME)"
    return mask_url(target) if is_url(target) else f"embedded ({target})"


def _looks_like_path(target: str) -> bool:
    """A typo in an alias must not silently create a new data directory: only an existing
    directory or something written as a path (`./x`, `~/x`, `a/b`) is one."""
    return os.path.isdir(os.path.expanduser(target)) or "/" in target or target.startswith((".", "~"))


@dataclass
class Connection:
    """One open client with the alias it is known by. `has_key` says whether a key was sent,
    never the key itself; `key_kind` what it is (a `token` of `kbsql serve --token`, or an
    `api key`) and `key_source` where it came from (`$VAR`, `prompt`)."""

    alias: str
    target: str | None
    client: Client
    has_key: bool = False
    key_kind: str = "api key"
    key_source: str = ""
    auth: dict[str, str] = field(default_factory=dict, repr=False)
    """The credential header sent (name -> value): lent only to the JupyterLab extension's
    server side for the same URL (`location.lend_credentials`), never shown."""
    history: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)
    """Agent conversations on this connection: (project, agent) -> question/answer pairs."""
    note: str = ""
    """Said once when opened: a server that did not answer then."""

    def describe(self) -> str:
        key = ""
        if self.has_key:
            key = f", {self.key_kind} set" + (f" ({self.key_source})" if self.key_source else "")
        api = self.client.api
        place = f"embedded ({api.location})" if api.embedded else describe_target(self.target)
        return f"{self.alias}: {place}, project {self.client.project}{key}"

    def __repr__(self) -> str:
        return f"<Connection {self.describe()}>"


def check_server(client: Client, target: str, key_kind: str | None, source: str) -> str:
    """Ask a server once (an authenticated route: the project list), so a connection says
    yes only when its queries will be answered. Credentials refused (401/403) raise
    `ConnectionProblem` saying where a token goes; so does a 404, which a server of the
    interface never answers there: a Jupyter server's address printed "Connected" and every
    query then failed with "No route /api/...". A server that does not answer gives a note (it
    may be starting), anything else it says is the queries' business."""
    where = mask_url(target)
    try:
        client.api.list_projects()
    except TransportError as exc:
        return f"{exc}; kept as the current connection: each query tries it again"
    except ServiceError as exc:
        if exc.status == 404:  # (a URL ending in /api is named before: ConnectionManager._open)
            raise ConnectionProblem(f"{where} is not a kbsql or MindsDB server's address (404 for "
                                    "its /api/projects; give the address kbsql serve printed: "
                                    "http://host:port)") from None
        if exc.status not in REFUSED:
            return ""
        said = f"{exc.status} {exc.title}"
        if key_kind is None:
            raise ConnectionProblem(
                f"{where} needs a token ({said}): %kbsql_connect {where} --token-env VAR, with "
                "the server's token (kbsql serve --token) in $VAR, or in $KBSQL_TOKEN") from None
        given = "typed" if source == "prompt" else f"in {source}"
        raise ConnectionProblem(f"{where} refused the {key_kind} {given} ({said}: {exc.detail}); "
                                "check its value") from None
    return ""


@dataclass
class ConnectionManager:
    """The connections of one shell; `current` is used when a cell names none."""

    named: Mapping[str, str] = field(default_factory=dict)
    """Aliases from config (`KbSql.connections`): alias -> URL or data directory."""
    api_key_env: str = DEFAULT_API_KEY_ENV
    auth_header: str = "Authorization"
    auth_scheme: str = "Bearer"
    default_project: str | None = None
    connections: dict[str, Connection] = field(default_factory=dict)
    current: str | None = None

    def __post_init__(self) -> None:
        # a weak reference: the manager (and its shell) can still be garbage-collected
        ref = weakref.ref(self)
        def close_all() -> None:
            manager = ref()
            if manager is not None:
                manager.close_all()

        self._atexit: Callable[[], None] = close_all
        atexit.register(self._atexit)

    def connect(self, target: str | None = None, *, alias: str | None = None,
                api_key: str | None = None, api_key_env: str | None = None,
                project: str | None = None, switch: bool = True,
                key_kind: str = "api key") -> Connection:
        """Open (or reopen) a connection and make it current.

        `target` may be a URL, a data directory, an alias already open, or an alias from
        config; None means the embedded engine's default data directory. A server is asked
        once (`check_server`): credentials it refuses fail here, with what to do, and the
        connection is not kept; one that does not answer is kept with a `note`."""
        if target and alias is None and target in self.connections and api_key is None:
            return self.switch(target)
        if target and target in self.named and not is_url(target):
            alias, target = alias or target, self.named[target]
        elif (url := address_without_scheme(target)) is not None:
            shown = shown_without_scheme(url)
            raise ConnectionProblem(f"{shown!r} reads as a server address without its scheme: "
                                    f"%kbsql_connect {mask_url(url)} (a data directory of that name: "
                                    f"./{shown})")
        elif target and not is_url(target) and not _looks_like_path(target):
            known = ", ".join(sorted({*self.connections, *self.named})) or "none"
            raise ConnectionProblem(f"No connection or directory named {target!r} (known: {known}). "
                                    f"For a new embedded engine there, write ./{target}")
        alias = alias or self._alias_for(target)
        key = api_key
        source = "prompt" if api_key is not None else ""
        remote = bool(target and is_url(target))
        if key is None and (api_key_env or remote):
            env = api_key_env or self.api_key_env
            key = os.environ.get(env) or None
            if key is None and api_key_env:
                raise ConnectionProblem(f"The environment variable {shown_env_name(api_key_env)} is not set")
            source = f"${env}"
        auth = {self.auth_header: f"{self.auth_scheme} {key}".strip()} if key else {}
        if remote and key is None and os.environ.get(TOKEN_ENV):  # as kbsql.connect reads it
            key, source, key_kind = os.environ[TOKEN_ENV], f"${TOKEN_ENV}", "token"
            auth = {"Authorization": f"Bearer {key}"}
        if not remote:
            key, auth = None, {}  # the embedded engine takes no credentials
        client = self._open(target, auth, project or self.default_project)
        note = ""
        if remote:
            try:
                note = check_server(client, str(target), key_kind if key else None, source)
            except BaseException:
                client.close()
                raise
        if alias in self.connections:
            self.close(alias)
        conn = Connection(alias, target, client, has_key=key is not None, key_kind=key_kind,
                          key_source=source if key else "", auth=auth, note=note)
        self.connections[alias] = conn
        if switch or self.current is None:
            self.current = alias
        return conn

    def _open(self, target: str | None, auth: dict[str, str], project: str | None) -> Client:
        options: dict[str, Any] = {"progress": notebook_or_tqdm}  # the notebook draws progress
        if project:
            options["project"] = project
        if target and is_url(target):
            if (root := api_root(target)) is not None:  # connect() refuses it in Python's words
                raise ConnectionProblem(f"{mask_url(target)} names the server's /api: %kbsql_connect "
                                        f"{mask_url(root)} (the client adds /api itself)")
            return connect(target, headers=dict(auth) or None, **options)
        try:
            return connect(data_dir=target or None, **options)
        except ValueError as exc:  # its settings (config.json, a wrong value): one line, not a traceback
            raise ConnectionProblem(str(exc)) from None

    @staticmethod
    def _alias_for(target: str | None) -> str:
        if not target:
            return DEFAULT_ALIAS
        if is_url(target):
            return re.sub(r"^https?://([^/@]*@)?", "", target).rstrip("/") or target
        return os.path.basename(os.path.normpath(target)) or target

    def switch(self, alias: str) -> Connection:
        conn = self.get(alias)
        self.current = conn.alias
        return conn

    def get(self, alias: str | None = None) -> Connection:
        """The named connection, or the current one; the first use opens the embedded default."""
        if alias is None:
            if self.current is None:
                return self.connect(None)
            return self.connections[self.current]
        if alias in self.connections:
            return self.connections[alias]
        if alias in self.named:
            return self.connect(alias, switch=False)
        if alias == DEFAULT_ALIAS:  # the embedded default is always reachable by name
            return self.connect(None, switch=False)
        known = ", ".join(sorted({*self.connections, *self.named})) or "none"
        raise ConnectionProblem(f"No connection named {alias!r} (known: {known}). "
                               f"Open one with %kbsql_connect URL --alias {alias}")

    def close(self, alias: str) -> None:
        conn = self.connections.pop(alias, None)
        if conn is None:
            raise ConnectionProblem(f"No connection named {alias!r}")
        conn.client.close()
        if self.current == alias:
            self.current = next(iter(self.connections), None)

    def close_all(self) -> None:
        for alias in list(self.connections):
            try:
                self.close(alias)
            except Exception:  # closing at exit must not raise
                pass
        atexit.unregister(self._atexit)

    def describe(self) -> list[str]:
        lines = []
        for alias, conn in self.connections.items():
            marker = "*" if alias == self.current else " "
            lines.append(f"{marker} {conn.describe()}")
        return lines or ["(no connection yet: the first query opens the embedded engine)"]
