"""Stopping a server with the MySQL door open: SIGTERM closes idle connections at once, lets a
connection in the middle of an answer finish it, and exits 0 without a traceback."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pymysql
import pytest

from kbsql.server.process import spawn
from tests.mysql.conftest import connect, fetch, make_lab


def test_sigterm_lets_an_answer_finish_and_closes_idle_connections(tmp_path: Path) -> None:
    server = spawn(tmp_path / "data", args=("--mysql-port", "0", "--shutdown-timeout", "20"))
    try:
        lab = make_lab(tmp_path / "lab.duckdb")
        with connect(server) as setup:
            fetch(setup, f"CREATE DATABASE lab WITH ENGINE = 'duckdb', PARAMETERS = "
                         f"{{'database': '{lab}'}}")
        idle = connect(server)
        busy = connect(server, cursorclass=pymysql.cursors.SSCursor)
        cursor = busy.cursor()
        cursor.execute("SELECT i, repeat('x', 600) AS filler FROM lab.big WHERE i < 40000")  # 24 MB
        first = [cursor.fetchone() for _ in range(10)]
        assert [row[0] for row in first] == list(range(10))
        server.process.send_signal(signal.SIGTERM)
        rest = []
        reader = threading.Thread(target=lambda: rest.extend(cursor.fetchall()))
        reader.start()
        reader.join(60)
        assert len(first) + len(rest) == 40_000  # the answer in flight went out whole
        assert server.process.wait(30) == 0
        with pytest.raises(pymysql.err.OperationalError):
            fetch(idle, "SELECT 1")
        log = server.log_text()
        assert "Traceback" not in log, log
    finally:
        server.stop()
