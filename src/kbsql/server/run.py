"""Running the server with uvicorn, and printing where it listens."""

from __future__ import annotations

import socket
import sys

import uvicorn

from kbsql.engine import Engine
from kbsql.server.app import build_app


def serve(host: str = "127.0.0.1", port: int = 47334, data_dir: str | None = None,
          log_level: str = "warning", allowed_origins: tuple[str, ...] = (),
          catalog_url: str | None = None) -> None:
    """Serve until interrupted. With port 0 the OS picks a free port; the first line on
    stdout is `kbsql serving on http://HOST:PORT` either way (tests read it).
    `allowed_origins`: browser origins allowed besides loopback ones (see server/guard.py)."""
    engine = Engine(data_dir, catalog_url=catalog_url)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    app = build_app(engine, bind_host=host, allowed_origins=allowed_origins)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
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
        sys.stdout.flush()
