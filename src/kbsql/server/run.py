"""Running the server with uvicorn, and printing where it listens.

The server serves a `ServiceApi`; which one is the caller's choice (`cli.py` opens the
local engine and hands it over as a `Backend` factory, called once the exposure checks
passed). Startup problems (a busy port, a data directory that cannot be opened, a damaged
catalog, a public bind without a token) end the process with one line on stderr, no
traceback (`StartupError`, printed by the CLI). SIGTERM and SIGINT stop it gracefully:
requests in flight finish, the service is closed (the engine saves its vector indexes),
and the exit code is 0.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from kbsql.interface.api import ServiceApi
from kbsql.server import log_collapse
from kbsql.server.app import build_app
from kbsql.server.auth import AuthSettings
from kbsql.server.connection_shares import HttpConnections
from kbsql.server.door_bounds import DoorBounds, Pending, Unread
from kbsql.server.flood import FloodBrake, start_accepting
from kbsql.server.guard import is_loopback_host
from kbsql.server.http_protocol import head_timeout_protocol
from kbsql.server.lanes import Lanes
from kbsql.server.limits import Limits
from kbsql.server.throttle import FailureThrottle

if TYPE_CHECKING:
    from kbsql.server.mysql import MysqlDoor

log = logging.getLogger("kbsql.server")


class StartupError(Exception):
    """The server cannot start; the message is the one line the user sees."""


@dataclass
class Backend:
    """The service a server runs over, and how its banner names it."""

    api: ServiceApi
    where: str
    """Shown after the URL: `data: DIR` (and the shared catalog, password masked)."""
    read_only: bool = False
    """The data cannot be written: the server says it serves reads only."""
    statement_timeout: float | None = None
    """The engine's statement timeout (None or 0: none): the MySQL door's own metadata
    statements keep it too."""


OpenBackend = Callable[[tuple[Path, ...] | None, bool], Backend]
"""Opens the service, given the only folders file-based data sources may read (None: no
confinement beyond the data directory) and whether others can reach it (a token or a
public bind: model calls go only to allowed hosts); raises `StartupError` with the line
to show."""


SWITCH_INTERVAL_S = 0.001
"""How long a thread may hold the interpreter lock while another waits for it (Python's default
is 5 ms). An upload's parse (an xlsx workbook: ~35 ms of pure Python) holds it in a worker
thread while the event loop waits for it at every step of another user's request: xlsx bombs
sent back to back raised a neighbour's `SELECT 1` p99 from 3.4 to 18.5 ms, and to 16.0 ms with
1 ms (p90 14.2 -> 11.9 ms; two runs each, the real client on loopback)."""


class _Server(uvicorn.Server):
    """uvicorn re-raises a caught SIGTERM/SIGINT after its graceful shutdown, which makes
    the exit status 143/130 (and a KeyboardInterrupt traceback for SIGINT). A stop we
    asked for is a success: forget the signal once the shutdown has been started.
    `mysql`: the MySQL door, started and stopped with HTTP on the same event loop.
    `brake`: HTTP's flood brake; connections are accepted by `flood.accept_loop`, one at a
    time, not by uvicorn's asyncio server (which takes a whole backlog in one go)."""

    mysql: MysqlDoor | None = None
    brake: FloodBrake | None = None
    _acceptors: tuple[asyncio.Task[None], ...] = ()

    stopped_by: str | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()
        self.stopped_by = self.stopped_by or signal.Signals(sig).name

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.mysql is not None:
            await self.mysql.start()
        if self.brake is None or not sockets:
            await super().startup(sockets)
            return
        await super().startup([])  # the lifespan and state, no asyncio server: accepted below
        for sock in sockets:
            sock.setblocking(False)
            sock.listen(self.config.backlog)
        self._acceptors = tuple(start_accepting(sock, self.brake, self._open_http) for sock in sockets)

    async def _open_http(self, conn: socket.socket) -> None:
        """An accepted connection served by uvicorn's protocol (as its server would)."""
        def protocol() -> asyncio.Protocol:
            return self.config.http_protocol_class(  # type: ignore[call-arg]
                config=self.config, server_state=self.server_state, app_state=self.lifespan.state)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(protocol, sock=conn)
        except OSError:
            conn.close()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for task in self._acceptors:  # stop accepting first
            task.cancel()
        if self.mysql is None:
            await super().shutdown(sockets)
            return
        await asyncio.gather(super().shutdown(sockets),
                             self.mysql.close(self.config.timeout_graceful_shutdown or 30))


def check_exposure(host: str, auth: AuthSettings) -> None:
    """A bind beyond loopback needs a token (or a login): anyone on the network could
    otherwise read stored keys and change knowledge bases."""
    if not is_loopback_host(host) and not auth.enabled:
        raise StartupError(f"refusing to listen on {host} without a token: anyone who can reach "
                           "it could use it. Set --token (or $KBSQL_TOKEN), or --user and "
                           "--password, or bind to 127.0.0.1")


def bind(host: str, port: int, flag: str = "--port") -> socket.socket:
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
                               f"server or choose another {flag}") from None
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(open_backend: OpenBackend, host: str = "127.0.0.1", port: int = 47334,
          log_level: str = "warning", allowed_origins: tuple[str, ...] = (), *,
          auth: AuthSettings | None = None, limits: Limits | None = None,
          allow_paths: Iterable[str] = (), shutdown_timeout: float = 30,
          forwarded_allow_ips: tuple[str, ...] = (), lanes: Lanes | None = None,
          mysql_port: int | None = None, bounds: DoorBounds | None = None) -> None:
    """Serve until interrupted. With port 0 the OS picks a free port; the first line on
    stdout is `kbsql serving on http://HOST:PORT (where)` either way (tests read it).
    `allowed_origins`: browser origins allowed besides loopback ones (see server/guard.py).
    `allow_paths`: the only roots file-based data sources may open when the server has a
    token or listens beyond loopback (anywhere but the data directory otherwise).
    `shutdown_timeout`: seconds requests in flight get to finish after SIGTERM/SIGINT.
    `forwarded_allow_ips`: the proxies whose `X-Forwarded-For` names the client (none: the
    connection's own address always counts, for the login throttle too).
    `lanes`: the worker pools of SQL, model and catalog calls (server/lanes.py).
    `mysql_port`: also serve MySQL's wire protocol there (`server/mysql/`; 0 picks a port),
    then named in the first line too: `... on http://HOST:PORT and mysql://HOST:PORT2 (...)`.
    `bounds`: what connections may hold on either door, logged in or not (`door_bounds.py`)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    auth = auth or AuthSettings()
    bounds = bounds or DoorBounds()
    pending_cap = bounds.pending_cap()
    limits = limits or Limits()
    check_exposure(host, auth)
    confined = auth.enabled or not is_loopback_host(host)
    roots = tuple(Path(p).expanduser().resolve() for p in allow_paths)
    os.umask(0o077)  # every file the server writes is the owner's alone (0600, dirs 0700)
    backend = open_backend(roots if confined or roots else None, confined)
    if backend.read_only:
        print(f"kbsql serve: {backend.api.location} cannot be written: serving reads only",
              file=sys.stderr, flush=True)
    sock = mysql_sock = None
    try:
        sock = bind(host, port)
        mysql_sock = bind(host, mysql_port, "--mysql-port") if mysql_port is not None else None
    except StartupError:
        if sock is not None:
            sock.close()
        backend.api.close()
        raise
    bound_port = sock.getsockname()[1]
    throttle = FailureThrottle()  # one lockout per address for both doors
    connections = HttpConnections(bounds.http_connection_cap(), auth.enabled)  # a share per owner
    app = build_app(backend.api, bind_host=host, allowed_origins=allowed_origins, auth=auth,
                    limits=limits, lanes=lanes, throttle=throttle, connections=connections)
    brake = FloodBrake("HTTP", bounds, pending_cap)
    # X-Forwarded-For is believed only from the proxies named; uvicorn's own default would
    # believe it from loopback (a local user could then pick any client address)
    config = uvicorn.Config(app, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=max(1, round(shutdown_timeout)),
                            http=head_timeout_protocol(limits.timeout, limits.max_head, limits.max_headers,
                                                       Pending(pending_cap, "HTTP"),
                                                       Unread(limits.max_unread), brake,
                                                       limits.write_timeout, connections),
                            backlog=min(2048, pending_cap),
                            h11_max_incomplete_event_size=64 * 1024,
                            proxy_headers=bool(forwarded_allow_ips),
                            forwarded_allow_ips=list(forwarded_allow_ips) or None)
    collapse = log_collapse.install()  # after uvicorn's logging setup: its handlers too
    server = _Server(config)
    server.brake = brake
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address needs brackets in a URL
    doors = f"http://{shown}:{bound_port}"
    if mysql_sock is not None:
        from kbsql.server.mysql import MysqlDoor  # mysql-mimic only when the door is open

        server.mysql = MysqlDoor(backend.api, mysql_sock, auth=auth, limits=limits, throttle=throttle,
                                 lanes=app.state.lanes,
                                 bounds=bounds.with_statement_timeout(backend.statement_timeout))
        doors += f" and mysql://{shown}:{mysql_sock.getsockname()[1]}"
    print(f"kbsql serving on {doors} ({backend.where})", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        backend.api.close()
        app.state.lanes.close()
        log_collapse.report_pending(collapse)
        if server.stopped_by:  # the one line saying it stopped on purpose (and saved its indexes)
            print(f"kbsql serve: stopped ({server.stopped_by}), indexes saved", flush=True)
        sys.stdout.flush()
