"""Running the server with uvicorn, and printing where it listens.

Startup problems (a busy port, a data directory that cannot be opened, a damaged catalog,
a public bind without a token) end the process with one line on stderr, no traceback
(`StartupError`, printed by the CLI). SIGTERM and SIGINT stop it gracefully: requests in
flight finish, the engine saves its vector indexes, and the exit code is 0.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

import uvicorn

from kbsql.engine import Engine
from kbsql.interface.errors import ServiceError
from kbsql.server.app import build_app
from kbsql.server.auth import AuthSettings
from kbsql.server.guard import is_loopback_host
from kbsql.server.limits import Limits, head_timeout_protocol

log = logging.getLogger("kbsql.server")


class StartupError(Exception):
    """The server cannot start; the message is the one line the user sees."""


class _Server(uvicorn.Server):
    """uvicorn re-raises a caught SIGTERM/SIGINT after its graceful shutdown, which makes
    the exit status 143/130 (and a KeyboardInterrupt traceback for SIGINT). A stop we
    asked for is a success: forget the signal once the shutdown has been started."""

    stopped_by: str | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()
        self.stopped_by = self.stopped_by or signal.Signals(sig).name


def check_exposure(host: str, auth: AuthSettings) -> None:
    """A bind beyond loopback needs a token (or a login): anyone on the network could
    otherwise read stored keys and change knowledge bases."""
    if not is_loopback_host(host) and not auth.enabled:
        raise StartupError(f"refusing to listen on {host} without a token: anyone who can reach "
                           "it could use it. Set --token (or $KBSQL_TOKEN), or --user and "
                           "--password, or bind to 127.0.0.1")


def open_engine(data_dir: str | None, allowed_paths: tuple[Path, ...] | None,
                catalog_url: str | None = None) -> Engine:
    try:
        engine = Engine(data_dir, catalog_url=catalog_url)
    except sqlite3.DatabaseError as exc:
        raise StartupError(f"the catalog in {data_dir or 'the data directory'} cannot be read "
                           f"({exc}): restore it from a backup or move it away") from None
    except ServiceError as exc:  # a shared catalog that cannot be reached (password masked)
        raise StartupError(exc.detail) from None
    except json.JSONDecodeError as exc:
        raise StartupError(f"config.json in {data_dir or 'the data directory'} is not valid "
                           f"JSON: {exc}") from None
    except OSError as exc:
        raise StartupError(f"cannot open the data directory {data_dir or ''}: "
                           f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
                           ) from None
    engine.config.allowed_paths = allowed_paths
    return engine


def bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # proto must be IPPROTO_TCP (not the default 0): asyncio only sets TCP_NODELAY on
        # accepted sockets whose proto says TCP. Without it the response head and body (two
        # writes) meet Nagle + the client's delayed ACK and every keep-alive request waits ~40 ms.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"port {port} on {host} is already in use: stop the other "
                               "server or choose another --port") from None
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(host: str = "127.0.0.1", port: int = 47334, data_dir: str | None = None,
          log_level: str = "warning", allowed_origins: tuple[str, ...] = (), *,
          auth: AuthSettings | None = None, limits: Limits | None = None,
          allow_paths: Iterable[str] = (), shutdown_timeout: float = 30,
          catalog_url: str | None = None) -> None:
    """Serve until interrupted. With port 0 the OS picks a free port; the first line on
    stdout is `kbsql serving on http://HOST:PORT` either way (tests read it).
    `allowed_origins`: browser origins allowed besides loopback ones (see server/guard.py).
    `allow_paths`: the only roots file-based data sources may open when the server has a
    token or listens beyond loopback (anywhere but the data directory otherwise).
    `shutdown_timeout`: seconds requests in flight get to finish after SIGTERM/SIGINT.
    `catalog_url`: a postgresql:// catalog shared with other servers (else $KBSQL_CATALOG_URL)."""
    auth = auth or AuthSettings()
    limits = limits or Limits()
    check_exposure(host, auth)
    confined = auth.enabled or not is_loopback_host(host)
    roots = tuple(Path(p).expanduser().resolve() for p in allow_paths)
    os.umask(0o077)  # every file the server writes is the owner's alone (0600, dirs 0700)
    engine = open_engine(data_dir, roots if confined or roots else None, catalog_url)
    if engine.config.read_only:
        print(f"kbsql serve: {engine.data_dir} cannot be written: serving reads only",
              file=sys.stderr, flush=True)
    try:
        sock = bind(host, port)
    except StartupError:
        engine.close()
        raise
    bound_port = sock.getsockname()[1]
    app = build_app(engine, bind_host=host, allowed_origins=allowed_origins, auth=auth,
                    limits=limits)
    config = uvicorn.Config(app, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=max(1, round(shutdown_timeout)),
                            http=head_timeout_protocol(limits.timeout),
                            h11_max_incomplete_event_size=64 * 1024)
    server = _Server(config)
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address needs brackets in a URL
    where = f"data: {engine.data_dir}"
    if engine.catalog.shared_url:
        from kbsql.engine.catalog_pg import where_of_url

        where += f", catalog: {where_of_url(engine.catalog.shared_url)}"
    print(f"kbsql serving on http://{shown}:{bound_port} ({where})", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        engine.close()
        if server.stopped_by:  # the one line saying it stopped on purpose (and saved its indexes)
            print(f"kbsql serve: stopped ({server.stopped_by}), indexes saved", flush=True)
        sys.stdout.flush()
