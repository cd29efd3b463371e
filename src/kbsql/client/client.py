"""The client: one object, embedded or remote, same methods and same results."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from kbsql.client.bars import ProgressOption, on_progress
from kbsql.client.params import bind
from kbsql.client.resources import Agents, KnowledgeBases
from kbsql.interface.api import DEFAULT_PROJECT, ServiceApi
from kbsql.interface.models import mask_url
from kbsql.interface.progress import OnProgress, ProgressFactory
from kbsql.interface.results import ErrorResult, OkResult, SqlResult, TableResult


class Client:
    """Talks to the service through a `ServiceApi` (the embedded engine or `HttpApi`).

    It keeps the SQL `context` between queries (the reference's round trip), so
    `client.sql("USE p")` makes later unqualified names resolve in project `p`.
    `progress` draws the long work it asks for (inserts, INSERT ... SELECT, EVALUATE): a
    factory of bars (`kbsql.connect` gives the notebook's or tqdm's); None draws nothing.
    """

    def __init__(self, api: ServiceApi, *, project: str = DEFAULT_PROJECT,
                 progress: ProgressFactory | None = None):
        self.api = api
        self.progress = progress
        self.context: dict[str, Any] = {"db": project}
        self.knowledge_bases = KnowledgeBases(self)
        self.agents = Agents(self)

    @property
    def project(self) -> str:
        """The current project: the SQL context's `db`."""
        return self.context.get("db") or DEFAULT_PROJECT

    @project.setter
    def project(self, name: str) -> None:
        self.context["db"] = name

    def project_of(self, project: str | None) -> str:
        return project or self.project

    def on_progress(self, progress: ProgressOption = None) -> OnProgress | None:
        """The progress callback for one call's `progress=` (None: bars for long work)."""
        return on_progress(progress, self.progress)

    @property
    def is_embedded(self) -> bool:
        return self.api.embedded

    def sql(self, query: str, *, params: Mapping[str, Any] | None = None,
            raise_on_error: bool = True) -> TableResult | OkResult | SqlResult:
        """Run one SQL statement. Returns a `TableResult` (`.to_pandas()`/`.df()`) or an
        `OkResult`; an error raises `SqlError` (or is returned, with raise_on_error=False).

        `params` binds `:name` placeholders to safely quoted literals (`kbsql.client.params`)."""
        if params is not None:
            query = bind(query, params)
        result = self.api.query(query, dict(self.context), progress=self.on_progress())
        if result.context.get("db"):
            self.context.update(result.context)
        if isinstance(result, ErrorResult) and raise_on_error:
            raise result.to_exception()
        return result

    def query(self, query: str, *, params: Mapping[str, Any] | None = None):
        """Run a SELECT and return a DataFrame (DuckDB's `.df()` ergonomics); `params` binds
        `:name` placeholders as `sql()` does."""
        result = self.sql(query, params=params)
        if isinstance(result, TableResult):
            return result.to_pandas()
        import pandas as pd

        return pd.DataFrame()

    def register(self, name: str, frame: Any) -> int:
        """Make a pandas DataFrame the SQL table `df.<name>`:
        `client.register("sales", frame)` then `client.query("SELECT * FROM df.sales")`.

        The table is a snapshot stored as Parquet in the service's data directory (it
        survives a restart); registering the name again replaces it. Works embedded and
        remote (uploaded as Parquet). Returns the row count."""
        return self.api.register_dataframe(name, frame)

    def projects(self) -> list[str]:
        return [p["name"] for p in self.api.list_projects()]

    def status(self) -> dict[str, Any]:
        return self.api.status()

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"embedded:{self.api.location}" if self.api.embedded else self.api.location
        return f"Client({mask_url(where)!s}, project={self.project!r})"  # reprs reach notebooks


TOKEN_ENV = "KBSQL_TOKEN"
_HOST_PORT = re.compile(r"([^\s/]*@)?(\[[0-9A-Fa-f:.]+\]|[\w.-]+):\d{1,5}/?")
"""host:port, with the `user:password@` a URL may carry (kept out of every message: mask_url)."""


def address_without_scheme(target: str | os.PathLike[str] | None) -> str | None:
    """The URL meant when a server's address is typed without `http://` (`127.0.0.1:47334`,
    `localhost:47334`) and no directory of that name exists, else None. Read as a data
    directory, `connect("127.0.0.1:47334")` made an empty folder of that name and answered
    from an empty embedded engine: no error, the server's knowledge bases simply missing."""
    if not isinstance(target, str) or not _HOST_PORT.fullmatch(target) or os.path.isdir(target):
        return None
    return f"http://{target.rstrip('/')}"


def api_root(url: str) -> str | None:
    """The server's own address when `url` ends in `/api` (README: "routes live under /api"),
    else None: the client adds /api to every request, so such a URL's requests went to
    /api/api/... and every one answered "No route"."""
    root = re.sub(r"/api/?$", "", url)
    return None if root == url else root


def shown_without_scheme(url: str) -> str:
    """How an address `address_without_scheme` read (its URL `url`) is shown back: its
    credentials masked as the URL's are (`***@127.0.0.1:47334`)."""
    return mask_url(url).removeprefix("http://")


def connect(target: str | os.PathLike[str] | None = None, *, project: str = DEFAULT_PROJECT,
            data_dir: str | os.PathLike[str] | None = None, headers: dict[str, str] | None = None,
            token: str | None = None, progress: ProgressFactory | None = None,
            settings: Mapping[str, Any] | None = None, **http_options: Any) -> Client:
    """`connect()` -> the embedded engine on `./.kbsql` (or `$KBSQL_HOME`);
    `connect("http://host:port")` -> a server speaking the interface;
    `connect(data_dir="path")` or `connect("path/to/dir")` -> the embedded engine there.

    `token` (else `$KBSQL_TOKEN`) is sent as `Authorization: Bearer <token>` to a server
    started with `kbsql serve --token`; an `Authorization` in `headers` wins. `progress`:
    how the client draws progress (`Client`); `kbsql.connect` gives the front end's.
    `settings`: the embedded engine's settings by name (README, Configuration; e.g.
    `{"statement_timeout": 30}`), which beat the environment and config.json; an unknown
    name or a wrong type raises `ValueError` naming it. A server has its own (`kbsql serve`).
    A server address without its scheme (`"127.0.0.1:47334"`) raises `ValueError` naming the
    URL (`address_without_scheme`); `data_dir=` opens a directory of any name. A URL ending in
    `/api` raises `ValueError` naming the server's own address (its requests went to
    `/api/api/...`: every one answered "No route")."""
    if data_dir is None and (url := address_without_scheme(target)) is not None:
        shown = shown_without_scheme(url)
        raise ValueError(f"{shown!r} reads as a server address without its scheme: "
                         f"kbsql.connect({mask_url(url)!r}) (a data directory of that name: "
                         f"data_dir={shown!r})")
    if target is not None and str(target).startswith(("http://", "https://")):
        from kbsql.client.http import HttpApi

        if (root := api_root(str(target))) is not None:
            raise ValueError(f"{mask_url(str(target))!r} names the server's /api: kbsql.connect("
                             f"{mask_url(root)!r}) (the client adds /api to every request)")

        if settings:
            raise ValueError("settings= configures an embedded engine; a server takes its "
                             "settings from kbsql serve (flags, environment, its config.json)")
        token = token or os.environ.get(TOKEN_ENV) or None
        if token and not any(k.lower() == "authorization" for k in headers or {}):
            headers = {**(headers or {}), "Authorization": f"Bearer {token}"}

        return Client(HttpApi(str(target), headers=headers, **http_options), project=project,
                      progress=progress)
    from kbsql.engine import Engine

    return Client(Engine(data_dir if data_dir is not None else target, settings=settings), project=project,
                  progress=progress)
