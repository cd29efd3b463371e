"""Run `kbsql serve` as a child process: for notebooks that want a local server, and for
the tests and benchmarks that need a real one on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx


@dataclass
class ServerProcess:
    """A running `kbsql serve`; `url` is its base URL. Use as a context manager."""

    process: subprocess.Popen
    url: str
    log: IO[str] | None = None
    """The server's stderr (a file, never a pipe: a full pipe would block the server)."""
    mysql_port: int | None = None
    """The MySQL door's port, when started with `--mysql-port`."""

    def log_text(self) -> str:
        if self.log is None or self.log.closed:
            return ""
        self.log.seek(0)
        return self.log.read()

    def stop(self, timeout: float = 10) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self.log is not None:
            self.log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


launcher: Callable[..., subprocess.Popen[str]] = subprocess.Popen
"""How `spawn` starts the command (`subprocess.Popen`'s signature). The test suite puts a warm
fork server here (tests/zygote.py): ~170 servers a run each skip ~1.3 CPU-s of imports."""


def spawn(data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
          env: dict[str, str] | None = None, timeout: float = 30,
          allow_origins: tuple[str, ...] = (), args: tuple[str, ...] = (),
          prefix: tuple[str, ...] = ()) -> ServerProcess:
    """Start `kbsql serve` (port 0: the OS picks one) and return once `/api/status` answers.
    `args`: more `kbsql serve` options (`("--token", "t", "--allow-path", "/data")`);
    `prefix`: a command the server runs under (tests: `unshare` for a read-only mount)."""
    log = tempfile.TemporaryFile(mode="w+")
    proc = launcher(
        [*prefix, sys.executable, "-m", "kbsql.cli", "serve", "--host", host, "--port", str(port),
         "--data-dir", str(Path(data_dir)),
         *(arg for origin in allow_origins for arg in ("--allow-origin", origin)), *args],
        stdout=subprocess.PIPE, stderr=log, text=True,
        env={**os.environ, **(env or {})},
    )
    server = ServerProcess(proc, "", log)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("kbsql serving on "):
        proc.kill()
        proc.wait()
        err = server.log_text()
        server.stop()
        raise RuntimeError(f"kbsql serve did not start: {line!r} {err[-2000:]}")
    server.url = line.split()[3]
    for word in line.split():
        if word.startswith("mysql://"):
            server.mysql_port = int(word.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{server.url}/api/status", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"kbsql serve at {server.url} did not answer /api/status in {timeout}s")
