"""A pre-auth connection flood against one door of a real server, for the flood brake's
tests on both doors (server/flood.py): clients that connect, send a fixed head (or nothing),
read until the server closes them and reconnect at once, while a connected client keeps
polling the server and the server's CPU is measured."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kbsql.server.process import ServerProcess
from tests.test_server_isolation import cpu_s


@dataclass
class Flood:
    made: int = 0
    """Connections the flooders opened."""
    answered: list[int] = field(default_factory=list)
    """What each `poll()` returned."""
    cpu_s: float = 0.0
    """The server's CPU seconds over the flood."""
    took_s: float = 0.0
    log_from: int = 0
    """Where the server's log stood when the flood began."""


def flood(server: ServerProcess, port: int, heads: list[bytes], poll: Callable[[], int],
          seconds: float = 3.0) -> Flood:
    """`len(heads)` flooders (each sending its head) on 127.0.0.1:`port` for `seconds`,
    `poll()` every 50 ms meanwhile; the flooders are joined before it returns."""
    out = Flood(log_from=len(server.log_text()))
    stop = time.monotonic() + seconds

    def idler(head: bytes) -> None:
        while time.monotonic() < stop:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                    out.made += 1
                    if head:
                        sock.sendall(head)
                    while sock.recv(4096):
                        pass
            except OSError:
                time.sleep(0.01)

    before, start = cpu_s(server), time.monotonic()
    threads = [threading.Thread(target=idler, args=(head,), daemon=True) for head in heads]
    for thread in threads:
        thread.start()
    while time.monotonic() < stop:
        out.answered.append(poll())
        time.sleep(0.05)
    out.cpu_s, out.took_s = cpu_s(server) - before, time.monotonic() - start
    for thread in threads:
        thread.join(5)
    return out
