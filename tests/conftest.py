"""Shared fixtures: an engine on a temp dir, a real `kbsql serve` subprocess, and a client
parametrized over both transports so one test checks embedded and HTTP alike."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import kbsql
from kbsql.engine import Engine


def start_server(data_dir: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """Start `kbsql serve --port 0` and return (process, base URL) once it answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbsql.cli", "serve", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("kbsql serving on "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    url = line.split()[3]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/status", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not answer /api/status")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = Engine(tmp_path / "engine")
    yield eng
    eng.close()


@pytest.fixture
def server_url(tmp_path: Path) -> Iterator[str]:
    """A real `kbsql serve` process on a free loopback port, with its own data dir."""
    proc, url = start_server(tmp_path / "server")
    yield url
    stop_server(proc)


@pytest.fixture(params=["embedded", "http"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[kbsql.Client]:
    """The same client API over the embedded engine and over a real server."""
    if request.param == "embedded":
        c = kbsql.connect(data_dir=tmp_path / "embedded")
        yield c
        c.close()
        return
    proc, url = start_server(tmp_path / "server")
    c = kbsql.connect(url)
    yield c
    c.close()
    stop_server(proc)
