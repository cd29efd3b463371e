"""Which kbsql service the sidebar and the chat talk to, and one open client per service.

The Jupyter server is the page's gateway (a kbsql server sends no CORS headers, and the
embedded engine lives in files, not behind a URL). It resolves the connection the way a
notebook's kernel resolves its default one, so the sidebar shows what `%%kbsql` cells see:

- a server URL set in the JupyterLab settings -> that server (`Authorization: Bearer
  TOKEN` with the settings' token, else `$KBSQL_TOKEN` as `kbsql.connect` reads it, else
  `$KBSQL_API_KEY` as the magics read it, from the Jupyter server's environment);
- otherwise the notebook's current connection as its kernel reports it (`kernel`: the page
  asks `kbsql.notebook.location` silently; it follows `%kbsql_connect URL|DIR` and
  `[tool.kbsql] default_connection`): a data directory, or a server URL with the
  notebook's own credentials, which this server asks the kernel for on its own channels
  (`lend.py`: never through the page), else the same token rule as above;
- otherwise (no kernel yet, or one without kbsql) the embedded engine on `$KBSQL_HOME`, else
  on `.kbsql` next to the notebook (a kernel's working directory is its notebook's folder).

The embedded engine is opened in this process on the same data directory as the kernel:
the catalog and the knowledge-base stores are SQLite (WAL) with versioned FAISS caches,
made to be shared by several processes, so what a cell writes is what the sidebar reads.
Only the public client is used (`kbsql.connect`), never engine internals.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DATA_DIR_ENV = "KBSQL_HOME"
DATA_DIR_NAME = ".kbsql"
TOKEN_ENVS = ("KBSQL_TOKEN", "KBSQL_API_KEY")


class BadTarget(ValueError):
    """The request names no usable service (a bad URL, a notebook outside the root)."""


@dataclass(frozen=True)
class Target:
    """One service: `remote` (a URL) or `embedded` (a data directory)."""

    kind: str
    location: str
    source: str
    """Where the choice came from: `settings`, `kernel`, `$KBSQL_HOME` or `notebook folder`."""
    token: str | None = field(default=None, repr=False, compare=False)
    lent: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    """The notebook's own credential headers, lent by its kernel (they replace `token`)."""

    @property
    def secrets(self) -> list[str]:
        """Every credential this target sends: masked out of anything shown."""
        values = [self.token] if self.token else []
        for _, value in self.lent:
            values += [value, value.split(" ", 1)[-1]]
        return [v for v in values if v]

    def with_lent(self, headers: dict[str, str]) -> Target:
        return replace(self, token=None, lent=tuple(sorted(headers.items())), source=self.source)

    def describe(self, root: Path | None = None) -> dict[str, Any]:
        """What the page may show: never the token, never a URL's `user:password@`."""
        from kbsql.interface.secrets import mask_url

        where = mask_url(self.location) if self.kind == "remote" else self.location
        if self.kind == "embedded" and root is not None:
            try:
                where = str(Path(self.location).relative_to(root)) or "."
            except ValueError:
                pass
        return {"kind": self.kind, "where": where, "source": self.source,
                "token": bool(self.token or self.lent)}

    @property
    def exists(self) -> bool:
        """A remote service is assumed to exist; an embedded one only once created."""
        return self.kind == "remote" or Path(self.location).is_dir()

    def key(self) -> tuple[str, str, str]:
        secret = hashlib.sha256(repr((self.token or "", self.lent)).encode()).hexdigest()
        return self.kind, self.location, secret


def resolve(body: dict[str, Any], root: Path) -> Target:
    """The service for one request body `{url, token, notebook, kernel}` (all optional);
    `kernel` is `{kind, location}` as `kbsql.notebook.location.current_location` returns it."""
    url = str(body.get("url") or "").strip().rstrip("/")
    token = str(body.get("token") or "") or None
    if url:
        return _remote(url, token, "settings")
    kernel = body.get("kernel")
    if isinstance(kernel, dict) and kernel.get("location"):
        where = str(kernel["location"])
        if kernel.get("kind") == "remote":
            return _remote(where.strip().rstrip("/"), token, "kernel")
        if not Path(where).is_absolute():
            raise BadTarget("The kernel's data directory must be an absolute path")
        return Target("embedded", str(Path(where).resolve()), "kernel")
    home = os.environ.get(DATA_DIR_ENV)
    if home:
        return Target("embedded", str(Path(home).expanduser().resolve()), f"${DATA_DIR_ENV}")
    notebook = str(body.get("notebook") or "")
    folder = (root / notebook).parent if notebook else root
    folder = folder.resolve()
    if folder != root and root not in folder.parents:
        raise BadTarget("The notebook is outside the Jupyter server's root directory")
    return Target("embedded", str(folder / DATA_DIR_NAME), "notebook folder")


def _remote(url: str, token: str | None, source: str) -> Target:
    if not url.startswith(("http://", "https://")):
        raise BadTarget("The kbsql server URL must start with http:// or https://")
    token = token or next((os.environ[v] for v in TOKEN_ENVS if os.environ.get(v)), None)
    return Target("remote", url, source, token)


class Clients:
    """Open clients by service, reused across requests (an embedded engine is costly to
    open: its embedding model loads once). Thread-safe: requests run in worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str, str], Any] = {}

    def get(self, target: Target) -> Any:
        with self._lock:
            client = self._open.get(target.key())
            if client is None:
                client = self._open[target.key()] = _connect(target)
            return client

    def close_all(self) -> None:
        with self._lock:
            clients, self._open = list(self._open.values()), {}
        for client in clients:
            try:
                client.close()
            except Exception:  # closing at shutdown must not raise
                pass


def _connect(target: Target) -> Any:
    import kbsql  # the client; imported late so the bundle installs without kbsql

    if target.kind == "remote":
        headers = dict(target.lent) or ({"Authorization": f"Bearer {target.token}"} if target.token else None)
        return kbsql.connect(target.location, headers=headers)
    return kbsql.connect(data_dir=target.location)
