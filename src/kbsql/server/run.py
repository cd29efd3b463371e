"""Running the server with uvicorn, and printing where it listens."""

from __future__ import annotations

import socket
import sys

import uvicorn

from kbsql.engine import Engine
from kbsql.server.app import build_app


def serve(host: str = "127.0.0.1", port: int = 47334, data_dir: str | None = None,
          log_level: str = "warning", allowed_origins: tuple[str, ...] = ()) -> None:
    """Serve until interrupted. With port 0 the OS picks a free port; the first line on
    stdout is `kbsql serving on http://HOST:PORT` either way (tests read it).
    `allowed_origins`: browser origins allowed besides loopback ones (see server/guard.py)."""
    engine = Engine(data_dir)
    # proto must be IPPROTO_TCP (not the default 0): asyncio only sets TCP_NODELAY on accepted
    # sockets whose proto says TCP. Without it the response head and body (two writes) meet
    # Nagle + the client's delayed ACK and every keep-alive request waits ~40 ms.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                         socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    app = build_app(engine, bind_host=host, allowed_origins=allowed_origins)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address needs brackets in a URL
    print(f"kbsql serving on http://{shown}:{bound_port} (data: {engine.data_dir})", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        engine.close()
        sys.stdout.flush()
