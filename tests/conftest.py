"""Shared fixtures: an engine on a temp dir, a real `kbsql serve` subprocess, and a client
parametrized over both transports so one test checks embedded and HTTP alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import kbsql
from kbsql.engine import Engine
from kbsql.server.process import ServerProcess, spawn

pytest_plugins = ["tests.jupyterlab_fixtures"]


def start_server(data_dir: Path, env: dict[str, str] | None = None) -> tuple[ServerProcess, str]:
    """Start `kbsql serve --port 0` and return (server, base URL) once it answers."""
    server = spawn(data_dir, env=env)
    return server, server.url


def stop_server(server: ServerProcess) -> None:
    server.stop()


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
