"""What SQL may open on a server: never kbsql's own files, and with a token only the folders
given with `--allow-path`. The data directory is the owner's alone (0700, files 0600).
Real server on loopback; the embedded engine refuses its own files too."""

from __future__ import annotations

import os
import re
import socket
import stat
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pandas as pd
import pytest

import kbsql
from kbsql.interface.errors import SqlError
from kbsql.server.process import ServerProcess, spawn

TOKEN = "tok-confine"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
SERVER_PG_PASSWORD = "server-own-pg-pw"  # in the server's libpq environment: never a source's


class PasswordListener:
    """A loopback 'PostgreSQL' that asks every client for a cleartext password and records
    what it was sent (None: the client had none to send), then refuses it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[str | None] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def seen(self, more_than: int, within: float = 5.0) -> list[str | None]:
        """What was received, once more than `more_than` sessions ended: the server answers
        its client as the refusal arrives, which can be before this thread records it."""
        until = time.monotonic() + within
        while len(self.received) <= more_than and time.monotonic() < until:
            time.sleep(0.02)
        return self.received

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.received.append(self._session(conn))
                except (OSError, struct.error):
                    pass

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            part = conn.recv(n - len(data))
            if not part:
                raise OSError("closed")
            data += part
        return data

    def _session(self, conn: socket.socket) -> str | None:
        while True:  # SSLRequest / GSSENCRequest: no; then the startup message
            length, code = struct.unpack("!ii", self._read(conn, 8))
            self._read(conn, length - 8)
            if code in (80877103, 80877104):
                conn.sendall(b"N")
                continue
            break
        conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
        try:
            kind = self._read(conn, 1)
        except OSError:
            return None  # no password to send
        length = struct.unpack("!i", self._read(conn, 4))[0]
        body = self._read(conn, length - 4)
        error = b"SFATAL\x00C28P01\x00Mpassword authentication failed\x00\x00"
        conn.sendall(b"E" + struct.pack("!i", len(error) + 4) + error)
        return body.rstrip(b"\x00").decode() if kind == b"p" else None


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("confine")
    allowed, outside = root / "allowed", root / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "sales.csv").write_text("region,amount\nnorth,10\nsouth,5\n")
    (outside / "secret.csv").write_text("k,v\napi_key,sk-live\n")
    return {"root": root, "data": root / "data", "allowed": allowed, "outside": outside}


@pytest.fixture(scope="module")
def listener() -> PasswordListener:
    return PasswordListener()


@pytest.fixture(scope="module")
def closed_port() -> int:
    return _closed_port()


@pytest.fixture(scope="module")
def server(folders: dict[str, Path], listener: PasswordListener, closed_port: int) -> Iterator[ServerProcess]:
    """The test PostgreSQL (loopback), the listener and one closed port are named with
    --allow-source-host; PGPASSWORD in the server's environment is the operator's."""
    hosts = [f"127.0.0.1:{listener.port}", f"127.0.0.1:{closed_port}"]
    dsn = os.environ.get("KBSQL_TEST_POSTGRES_DSN")
    if dsn:
        hosts.append(f"{urlsplit(dsn).hostname}:{urlsplit(dsn).port or 5432}")
    with spawn(folders["data"], args=("--token", TOKEN, "--allow-path", str(folders["allowed"]),
                                      "--mysql-port", "0",
                                      *(a for h in hosts for a in ("--allow-source-host", h))),
               env={"PGPASSWORD": SERVER_PG_PASSWORD}) as proc:
        yield proc


def sql(server: ServerProcess, query: str) -> dict:
    answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query}, headers=HEADERS, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_catalog_can_never_be_attached(server: ServerProcess, folders: dict[str, Path]) -> None:
    catalog = folders["data"] / "catalog.sqlite"
    assert catalog.exists()
    for engine, key, path in [("sqlite", "db_file", catalog), ("files", "path", folders["data"]),
                              ("duckdb", "database", catalog)]:
        answer = sql(server, f"CREATE DATABASE own WITH ENGINE = '{engine}', "
                             f"PARAMETERS = {{\"{key}\": \"{path}\"}}")
        assert answer["type"] == "error" and "data directory" in answer["error_message"], answer
    databases = [r[0] for r in sql(server, "SHOW DATABASES")["data"]]
    assert "own" not in databases


def test_a_path_outside_allow_path_is_refused(server: ServerProcess, folders: dict[str, Path]) -> None:
    for path in (folders["outside"], "/etc"):
        answer = sql(server, "CREATE DATABASE leak WITH ENGINE = 'files', "
                             f"PARAMETERS = {{\"path\": \"{path}\"}}")
        assert answer["type"] == "error" and "--allow-path" in answer["error_message"], answer
        assert len(answer["error_message"].splitlines()) == 1
    assert "leak" not in [r[0] for r in sql(server, "SHOW DATABASES")["data"]]


def test_a_path_under_allow_path_works_and_a_symlink_out_of_it_is_refused(
        server: ServerProcess, folders: dict[str, Path]) -> None:
    made = sql(server, f"CREATE DATABASE shop WITH ENGINE = 'files', "
                       f"PARAMETERS = {{\"path\": \"{folders['allowed']}\"}}")
    assert made["type"] == "ok", made
    rows = sql(server, "SELECT region, amount FROM shop.sales ORDER BY amount")["data"]
    assert rows == [["south", 5], ["north", 10]]
    (folders["allowed"] / "sneaky.csv").symlink_to(folders["outside"] / "secret.csv")
    answer = sql(server, "SELECT * FROM shop.sneaky")
    assert answer["type"] == "error" and "--allow-path" in answer["error_message"], answer


def test_a_cte_named_like_a_file_never_reads_that_file(
        server: ServerProcess, folders: dict[str, Path]) -> None:
    """A CTE defined in a subquery and named outside it once reached DuckDB as a bare table
    name, which DuckDB reads as a file (a replacement scan): any CSV, past --allow-path."""
    secret = folders["outside"] / "secret.csv"
    for query in (f"SELECT * FROM (WITH `{secret}` AS (SELECT 1 AS z) SELECT * FROM `{secret}`) t, "
                  f"`{secret}` u",
                  f"WITH a AS (WITH `{secret}` AS (SELECT 1) SELECT 1) SELECT * FROM `{secret}`",
                  f"WITH `{secret}` AS (SELECT * FROM `{secret}`) SELECT * FROM `{secret}`"):
        answer = sql(server, query)
        assert answer["type"] == "error", answer
        assert "sk-live" not in str(answer)
    rows = sql(server, "WITH a AS (SELECT 1 AS x), b AS (SELECT x + 1 AS y FROM a) "
                       "SELECT a.x, b.y FROM a JOIN b ON true")["data"]
    assert rows == [[1, 2]]  # CTEs themselves keep working, qualified names too


def test_a_view_in_a_duckdb_file_cannot_read_past_allow_path(
        server: ServerProcess, folders: dict[str, Path]) -> None:
    """A DuckDB file's view runs its own SQL inside the server's DuckDB: under --allow-path
    its tables are read, its views refused (one once read any CSV on the machine)."""
    import duckdb

    made_by_someone = folders["allowed"] / "shared.duckdb"
    with duckdb.connect(str(made_by_someone)) as con:
        con.execute("CREATE TABLE facts AS SELECT 42 AS answer")
        con.execute(f"CREATE VIEW leak AS SELECT * FROM read_csv('{folders['outside'] / 'secret.csv'}')")
    made = sql(server, f"CREATE DATABASE shared WITH ENGINE = 'duckdb', "
                       f"PARAMETERS = {{\"database\": \"{made_by_someone}\"}}")
    assert made["type"] == "ok", made
    assert sql(server, "SELECT answer FROM shared.facts")["data"] == [[42]]
    answer = sql(server, "SELECT * FROM shared.leak")
    assert answer["type"] == "error" and "--allow-path" in answer["error_message"], answer
    assert "sk-live" not in str(answer)


def test_a_macro_in_a_duckdb_file_cannot_read_past_allow_path(
        server: ServerProcess, folders: dict[str, Path]) -> None:
    """A DuckDB file's macro runs its own SQL inside the server's DuckDB, as a view does:
    called by its catalog-qualified name (`kbsql_ds_N.leak()`, which DuckDB's "did you mean"
    hint names) it read any file on the machine. A function called through a dotted name is
    refused; the file's tables and the built-in functions still answer."""
    import duckdb

    made_by_someone = folders["allowed"] / "macros.duckdb"
    with duckdb.connect(str(made_by_someone)) as con:
        con.execute("CREATE TABLE facts AS SELECT 42 AS answer")
        con.execute(f"CREATE MACRO leak() AS (SELECT string_agg(content, '') "
                    f"FROM read_text('{folders['outside'] / 'secret.csv'}'))")
    made = sql(server, f"CREATE DATABASE macros WITH ENGINE = 'duckdb', "
                       f"PARAMETERS = {{\"database\": \"{made_by_someone}\"}}")
    assert made["type"] == "ok", made
    assert sql(server, "SELECT answer, upper('a') AS a FROM macros.facts")["data"] == [[42, "A"]]
    for name in ["macros", *(f"kbsql_ds_{n}_{m}" for n in range(4) for m in range(3))]:  # attached names
        for call in (f"{name}.leak()", f"{name}.main.leak()", f'"{name}"."leak"()'):
            answer = sql(server, f"SELECT {call} AS x")
            assert answer["type"] == "error" and "sk-live" not in str(answer), (call, answer)
            assert answer["error_code"] == 1227 and "by their name alone" in answer["error_message"]


def test_a_path_outside_allow_path_is_refused_alike_whether_it_exists_or_not(
        server: ServerProcess, folders: dict[str, Path]) -> None:
    """Past --allow-path the refusal comes before the file is looked for: "does not exist"
    for a missing file and "outside the folders" for an existing one told a token holder
    which files the server's machine holds (/root/.ssh/id_rsa, ...)."""
    answers = []
    for path in (folders["outside"] / "secret.csv", folders["outside"] / "no-such-file.db"):
        for engine, key in (("duckdb", "database"), ("sqlite", "db_file")):
            answer = sql(server, f"CREATE DATABASE probe WITH ENGINE = '{engine}', "
                                 f"PARAMETERS = {{\"{key}\": \"{path}\"}}")
            answers.append(answer["error_message"].replace(str(path), "PATH"))
            rest = httpx.post(f"{server.url}/api/databases", headers=HEADERS, timeout=30, json={
                "database": {"name": "probe", "engine": engine, "parameters": {key: str(path)}},
                "check_connection": True})
            answers.append(f"{rest.status_code} {rest.text.replace(str(path), 'PATH')}")
    assert all("--allow-path" in a for a in answers), answers
    assert answers[:4] == answers[4:], answers  # the same words for both


def _pg(server: ServerProcess, name: str, host: str, port: int, password: str | None = None) -> str:
    """CREATE DATABASE ENGINE='postgres' at host:port: '' when it worked, else the error."""
    secret = f", \"password\": \"{password}\"" if password is not None else ""
    answer = sql(server, f"CREATE DATABASE {name} WITH ENGINE = 'postgres', PARAMETERS = "
                         f"{{\"host\": \"{host}\", \"port\": {port}, \"user\": \"postgres\", "
                         f"\"database\": \"postgres\"{secret}}}")
    return "" if answer["type"] == "ok" else answer["error_message"]


def test_a_postgres_source_never_gets_the_servers_own_libpq_password(
        server: ServerProcess, listener: PasswordListener) -> None:
    asked = len(listener.received)
    refused = _pg(server, "nopw", "127.0.0.1", listener.port)
    assert refused and len(refused.splitlines()) == 1
    got = listener.seen(asked)
    assert len(got) > asked and SERVER_PG_PASSWORD not in got  # it had none to send
    asked = len(listener.received)
    _pg(server, "ownpw", "127.0.0.1", listener.port, password="the-sources-own")
    assert listener.seen(asked)[-1] == "the-sources-own"  # the listener does record what it is sent
    dsn = os.environ.get("KBSQL_TEST_POSTGRES_DSN")
    if dsn:  # the test PostgreSQL (loopback, named by the operator) with the source's own password
        url = urlsplit(dsn)
        assert _pg(server, "realpg", url.hostname or "", url.port or 5432, url.password) == ""
        assert SERVER_PG_PASSWORD not in str(sql(server, "SELECT * FROM information_schema.databases"))


def test_postgres_sources_follow_the_outbound_policy_and_fail_alike(
        server: ServerProcess, listener: PasswordListener, closed_port: int) -> None:
    """Loopback and private targets not named are refused before any connection; the named
    targets that fail (a closed port, a listener refusing the password, a real PostgreSQL
    with a wrong password) read the same: no port scanner."""
    asked = len(listener.received)
    for host, port in [("127.0.0.1", 9), ("127.0.0.2", listener.port), ("10.1.2.3", 5432),
                       ("169.254.169.254", 80), ("localhost", listener.port)]:
        refused = _pg(server, "scan", host, port, password="x")
        assert "not allowed on this server" in refused and "--allow-source-host" in refused, refused
    assert len(listener.received) == asked  # nothing was sent there
    targets = [("127.0.0.1", closed_port), ("127.0.0.1", listener.port)]
    dsn = os.environ.get("KBSQL_TEST_POSTGRES_DSN")
    if dsn:
        targets.append((urlsplit(dsn).hostname or "", urlsplit(dsn).port or 5432))
    answers = {re.sub(r" at \S+: ", " at WHERE: ", _pg(server, "scan", h, p, password="wrong-pw"))
               for h, p in targets}
    assert len(answers) == 1 and "no connection" in answers.pop()
    assert "scan" not in [r[0] for r in sql(server, "SHOW DATABASES")["data"]]


def test_knowledge_base_storage_in_a_pgvector_source_follows_the_same_rules(
        server: ServerProcess, listener: PasswordListener) -> None:
    """A pgvector source as knowledge-base storage connects through psycopg, not DuckDB: the
    same host rule and the same own-parameters-only connection hold there."""
    for name, host, port in [("vdb_private", "10.1.2.3", 5432), ("vdb_listener", "127.0.0.1", listener.port)]:
        made = httpx.post(f"{server.url}/api/databases", headers=HEADERS, timeout=60, json={"database": {
            "name": name, "engine": "pgvector", "parameters": {
                "host": host, "port": port, "user": "postgres", "database": "postgres"}}})
        assert made.status_code == 201, made.text
    asked = len(listener.received)
    refused = sql(server, "CREATE KNOWLEDGE_BASE kb_private USING storage = vdb_private.chunks, "
                          "embedding_model = {'provider': 'kbsql', 'model_name': 'hash-16'}")
    assert refused["type"] == "error" and "not allowed on this server" in refused["error_message"], refused
    failed = sql(server, "CREATE KNOWLEDGE_BASE kb_listener USING storage = vdb_listener.chunks, "
                         "embedding_model = {'provider': 'kbsql', 'model_name': 'hash-16'}")
    assert failed["type"] == "error", failed
    assert len(listener.seen(asked)) > asked and SERVER_PG_PASSWORD not in listener.received


def test_source_passwords_are_masked_in_every_listing(server: ServerProcess) -> None:
    secret = "pg-secret-4711"
    for engine in ("postgres", "pgvector"):  # stored without connecting (MindsDB's REST)
        made = httpx.post(f"{server.url}/api/databases", headers=HEADERS, json={"database": {
            "name": f"masked_{engine}", "engine": engine, "parameters": {
                "host": "db.example.com", "user": "u", "password": secret, "database": "d",
                "sslpassword": secret}}})  # libpq's key's password: shown in clear before
        assert made.status_code == 201, made.text
        assert secret not in made.text
    dsn_source = {"name": "masked_dsn", "engine": "postgres",
                  "parameters": {"dsn": f"postgresql://u:{secret}@db.example.com/d"}}
    assert httpx.post(f"{server.url}/api/databases", headers=HEADERS,
                      json={"database": dsn_source}).status_code == 201
    listed = httpx.get(f"{server.url}/api/databases", headers=HEADERS).text
    assert "masked_pgvector" in listed and "******" in listed and secret not in listed
    one = httpx.get(f"{server.url}/api/databases/masked_postgres", headers=HEADERS).text
    assert "masked_postgres" in one and secret not in one
    shown = str(sql(server, "SELECT * FROM information_schema.databases"))
    assert "masked_dsn" in shown and secret not in shown
    import pymysql

    door = pymysql.connect(host="127.0.0.1", port=server.mysql_port, user="kbsql", password=TOKEN)
    with door, door.cursor() as cursor:
        cursor.execute("SELECT * FROM information_schema.databases")
        rows = str(cursor.fetchall())
        cursor.execute("SHOW DATABASES")
        rows += str(cursor.fetchall())
    assert "masked_pgvector" in rows and secret not in rows


def test_the_embedded_engine_refuses_its_own_files(tmp_path: Path) -> None:
    with kbsql.connect(data_dir=tmp_path / "home") as client:
        client.register("frame", pd.DataFrame({"a": [1]}))
        for engine, key, path in [("sqlite", "db_file", tmp_path / "home" / "catalog.sqlite"),
                                  ("files", "path", tmp_path / "home" / "frames")]:
            with pytest.raises(SqlError, match="data directory"):
                client.sql(f"CREATE DATABASE own WITH ENGINE = '{engine}', "
                           f"PARAMETERS = {{\"{key}\": \"{path}\"}}")
        other = tmp_path / "elsewhere.csv"
        other.write_text("x\n1\n")
        client.sql(f"CREATE DATABASE mine WITH ENGINE = 'files', PARAMETERS = {{\"path\": \"{other}\"}}")
        assert client.query("SELECT x FROM mine.elsewhere")["x"].tolist() == [1]


def test_the_data_directory_is_private(server: ServerProcess, folders: dict[str, Path]) -> None:
    base = f"{server.url}/api/projects/mindsdb/knowledge_bases"
    made = httpx.post(base, headers=HEADERS, json={"knowledge_base": {
        "name": "notes", "embedding_model": {"provider": "kbsql", "model_name": "hash-16"}}})
    assert made.status_code == 201, made.text
    put = httpx.put(f"{base}/notes", headers=HEADERS,
                    json={"knowledge_base": {"rows": [{"id": 1, "content": "private"}]}})
    assert put.status_code == 200
    with kbsql.connect(server.url, token=TOKEN) as client:
        client.register("frame", pd.DataFrame({"a": [1, 2]}))
    server.stop()  # the index is written on the way out
    data = folders["data"]
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    seen = set()
    for folder, dirs, files in os.walk(data):
        for name in dirs:
            assert stat.S_IMODE((Path(folder) / name).stat().st_mode) == 0o700, name
        for name in files:
            seen.add(name)
            assert stat.S_IMODE((Path(folder) / name).stat().st_mode) == 0o600, name
    assert {"catalog.sqlite", "chunks.sqlite", "index.faiss", "frame.parquet"} <= seen



def _connect_to_a_silent_host(tmp_path: Path, flags: tuple[str, ...]) -> tuple[dict, float, list]:
    """(the answer, its seconds, SHOW DATABASES' rows) of CREATE DATABASE of a postgres source
    asking `connect_timeout` 100 of a host that takes the connection and never answers (a
    listening socket nobody reads), on a server started with `flags`."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        with spawn(tmp_path / "data", args=("--token", TOKEN, "--allow-source-host", f"127.0.0.1:{port}",
                                            *flags)) as proc:
            start = time.monotonic()
            answer = sql(proc, "CREATE DATABASE silent WITH ENGINE = 'postgres', PARAMETERS = "
                               f"{{\"host\": \"127.0.0.1\", \"port\": {port}, \"user\": \"postgres\", "
                               "\"password\": \"x\", \"connect_timeout\": 100}")
            took = time.monotonic() - start
            return answer, took, sql(proc, "SHOW DATABASES")["data"]
    finally:
        silent.close()


def test_a_postgres_sources_own_connect_timeout_stays_within_the_statements_deadline(tmp_path: Path) -> None:
    """A source asking `connect_timeout` 100 of a silent host held a statement with a 5 s
    deadline for 100 s, and its connection after the client had left. It now waits what is
    left of the deadline."""
    answer, took, databases = _connect_to_a_silent_host(tmp_path, ("--statement-timeout", "3"))
    assert answer["type"] == "error", answer
    assert took < 8, took
    assert "silent" not in [r[0] for r in databases]


def test_a_postgres_sources_connect_is_bounded_by_the_server_whatever_the_deadline(tmp_path: Path) -> None:
    """Under a long deadline (the served default is 120 s), a source asking `connect_timeout`
    100 of a silent host held a worker 100 s, after its client had left too: libpq's wait
    cannot be interrupted (audit51). `--source-connect-timeout` (default 10 s) bounds it."""
    answer, took, _ = _connect_to_a_silent_host(tmp_path, ("--statement-timeout", "60",
                                                           "--source-connect-timeout", "1"))
    assert answer["type"] == "error", answer
    assert took < 6, took  # 100 s before
