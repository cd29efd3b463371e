"""The MySQL door shares the HTTP door's bounds (issue 22): its statements take workers of
the SQL lane (never the catalog's), run under the statement deadline, and stop when their
client goes away. Real `kbsql serve --mysql-port 0` servers, real pymysql clients."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pandas as pd
import pymysql
import pytest

import kbsql
from kbsql.server.process import ServerProcess, spawn
from tests.mysql.conftest import connect, fetch

HEAVY = "SELECT count(*) FROM df.n a, df.n b, df.n c WHERE a.x + b.x + c.x = -1"  # 2.7e10 rows


def cpu_seconds(server: ServerProcess) -> float:
    """CPU time the server process has used (user + system)."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_over(server: ServerProcess, seconds: float) -> float:
    before = cpu_seconds(server)
    time.sleep(seconds)
    return cpu_seconds(server) - before


def test_a_mysql_client_that_leaves_gets_its_statement_interrupted(tmp_path: Path) -> None:
    """A pymysql client gives up after 3 s (read_timeout: it closes its socket). Within
    about a second the server stops working on its statement (its CPU use falls from a
    core or more to nearly nothing), long before the 60 s deadline."""
    with spawn(tmp_path / "d", args=("--mysql-port", "0", "--statement-timeout", "60")) as server:
        with kbsql.connect(server.url) as client:
            client.register("n", pd.DataFrame({"x": range(3000)}))
        conn = connect(server, read_timeout=3)
        failed: list[Exception] = []

        def heavy() -> None:
            try:
                fetch(conn, HEAVY)
            except pymysql.err.OperationalError as exc:  # the read timed out: pymysql closed
                failed.append(exc)

        thread = threading.Thread(target=heavy, daemon=True)
        thread.start()
        time.sleep(0.5)
        busy = cpu_over(server, 1.5) / 1.5
        thread.join(30)
        time.sleep(1.5)  # the watcher's tick and DuckDB's stop
        after = cpu_over(server, 1.5) / 1.5
        assert failed and after < 0.1 and busy > 3 * after, (failed, busy, after)  # CPU seconds a second
        answer = httpx.post(f"{server.url}/api/sql/query", json={"query": "SELECT 1"}, timeout=30)
        assert answer.json()["data"] == [[1]]


def test_mysql_statements_take_sql_workers_never_the_catalogs(tmp_path: Path) -> None:
    """Nine heavy statements over MySQL (more than the catalog's 8 workers) on a server with
    2 SQL workers: the knowledge-base list and the status answer at once meanwhile; the
    statements run two at a time, each stopped by the 3 s deadline."""
    with spawn(tmp_path / "d", args=("--mysql-port", "0", "--sql-workers", "2",
                                      "--statement-timeout", "3")) as server:
        with kbsql.connect(server.url) as client:
            client.register("n", pd.DataFrame({"x": range(3000)}))
        answers: list[str] = []

        def heavy() -> None:
            conn = connect(server, read_timeout=120)
            try:
                fetch(conn, HEAVY)
                answers.append("rows")
            except pymysql.err.MySQLError as exc:
                answers.append(str(exc.args[1]))
            conn.close()

        threads = [threading.Thread(target=heavy, daemon=True) for _ in range(9)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            for _ in range(3):
                start = time.monotonic()
                assert http.get("/api/projects/mindsdb/knowledge_bases").status_code == 200
                assert http.get("/api/status").status_code == 200
                assert time.monotonic() - start < 1.0
        for thread in threads:
            thread.join(90)
        assert len(answers) == 9 and all("time limit (3 s" in a for a in answers), answers


def test_the_deadline_stops_a_mysql_statement_with_one_line(tmp_path: Path) -> None:
    with spawn(tmp_path / "d", args=("--mysql-port", "0", "--statement-timeout", "2")) as server:
        with kbsql.connect(server.url) as client:
            client.register("n", pd.DataFrame({"x": range(3000)}))
        conn = connect(server)
        start = time.monotonic()
        with pytest.raises(pymysql.err.MySQLError) as failed:
            fetch(conn, HEAVY)
        assert time.monotonic() - start < 10
        message = str(failed.value.args[1])
        assert "time limit (2 s, kbsql serve --statement-timeout)" in message, message
        assert len(message.splitlines()) == 1
        assert fetch(conn, "SELECT 1")[1] == [(1,)]  # the connection goes on
        conn.close()


def rss_peak_mb(server: ServerProcess) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_metadata_statements_read_no_file_and_make_no_big_value(tmp_path: Path) -> None:
    """`SHOW ... WHERE` runs on the door's own DuckDB: it read any file (the operator's API
    key in config.json came back in a cast error) and `repeat()` grew the server by 1.2 GB.
    Now: no file, no generator, a bounded time; ordinary filters still work."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "config.json").write_text('{"default_model": {"provider": "openai", "api_key": "sk-SECRET-1"}}')
    with spawn(data, args=("--mysql-port", "0", "--token", "t0k")) as server:
        conn = connect(server, password="t0k")
        before = rss_peak_mb(server)
        secret = f"CAST((SELECT content FROM read_text('{data / 'config.json'}')) AS INT) = 1"
        for statement in (f"SHOW VARIABLES WHERE {secret}", f"SHOW DATABASES WHERE {secret}",
                          f"SELECT * FROM information_schema.schemata WHERE {secret}",
                          "SHOW VARIABLES WHERE length(repeat('x', 600000000)) > 0",
                          "SHOW VARIABLES WHERE length(lpad('x', 600000000, 'y')) > 0",
                          "SELECT count(*) FROM information_schema.collations a, information_schema"
                          ".collations b WHERE length(repeat(a.COLLATION_NAME, 10000000)) > 0",
                          "SHOW VARIABLES WHERE Value IN (WITH RECURSIVE s(x) AS (SELECT 'x' UNION ALL "
                          "SELECT x || x FROM s) SELECT x FROM s)"):
            with pytest.raises(pymysql.err.MySQLError) as failed:
                fetch(conn, statement)
            message = str(failed.value.args[-1])
            assert "SECRET" not in message and len(message.splitlines()) == 1, message
        assert rss_peak_mb(server) - before < 200
        start = time.monotonic()  # a 1 MB filter held a worker 34 CPU-s before any bound (sqlglot's parse)
        with pytest.raises(pymysql.err.MySQLError) as failed:
            fetch(conn, "SHOW VARIABLES WHERE 1=1" + " AND 1=1" * 120_000)
        assert "at most 32 KB" in str(failed.value.args[-1]) and time.monotonic() - start < 3
        assert fetch(conn, "SHOW VARIABLES WHERE Variable_name = 'autocommit'")[1] == [("autocommit", "ON")]
        assert fetch(conn, "SHOW DATABASES LIKE 'mind%'")[1] == [("mindsdb",)]
        conn.close()


def test_a_metadata_statement_keeps_the_servers_statement_timeout(tmp_path: Path) -> None:
    """The door's own SHOW ... WHERE ran up to a fixed 10 s whatever --statement-timeout said
    (the stop-49 audit: a cross join of the variables answered after 6.1 s under a 3 s flag,
    four of them took both cores for 10 s). Under --statement-timeout 2 it stops at 2 s."""
    joined = ", ".join(f"__show__ t{i}" for i in range(6))
    values = ", ".join(f"t{i}.Value" for i in range(6))
    heavy = f"SHOW VARIABLES WHERE (SELECT count(*) FROM {joined} WHERE hash(concat({values})) % 7 = 3) > 0"
    with spawn(tmp_path / "d", args=("--mysql-port", "0", "--statement-timeout", "2")) as server:
        conn = connect(server)
        start = time.monotonic()
        with pytest.raises(pymysql.err.MySQLError) as failed:
            fetch(conn, heavy)
        took = time.monotonic() - start
        assert "ran past the 2 s" in str(failed.value.args[-1]) and took < 5, (took, failed.value)
        assert fetch(conn, "SHOW VARIABLES WHERE Variable_name = 'autocommit'")[1] == [("autocommit", "ON")]
        conn.close()
