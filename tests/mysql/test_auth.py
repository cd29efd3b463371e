"""Logging in through the MySQL door: `--user/--password` (MySQL's native password), `--token`
as the password with any user name, the same per-address lockout as HTTP in both directions,
and the startup rules (`--mysql-port`, `$KBSQL_MYSQL_PORT`, a public bind needs credentials)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import mysql.connector
import pymysql
import pytest

from kbsql.cli import main
from kbsql.server.process import ServerProcess, spawn
from tests.mysql.conftest import connect, fetch

TOKEN = "tok-mysql-0123456789"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--mysql-port", "0", "--token", TOKEN, "--user", "ann", "--password", "pw-ann")
    with spawn(tmp_path_factory.mktemp("mysql-auth") / "data", args=args) as server:
        yield server


def refused(server: ServerProcess, **login: str) -> pymysql.err.OperationalError:
    with pytest.raises(pymysql.err.OperationalError) as error:
        connect(server, **login)
    return error.value


def test_user_and_password_or_the_token_let_in(guarded: ServerProcess) -> None:
    with connect(guarded, user="ann", password="pw-ann") as conn:
        assert fetch(conn, "SELECT CURRENT_USER()")[1] == [("ann@%",)]
    with connect(guarded, user="anyone", password=TOKEN) as conn:
        assert fetch(conn, "SELECT 1 AS one")[1] == [(1,)]
    conn2 = mysql.connector.connect(host="127.0.0.1", port=guarded.mysql_port, user="tool", password=TOKEN,
                                    database="mindsdb", use_pure=True)
    try:
        cursor = conn2.cursor(prepared=True)
        cursor.execute("SELECT ? AS echoed", ("ok",))
        assert cursor.fetchall() == [("ok",)]
    finally:
        conn2.close()
    client = shutil.which("mysql")
    if client:
        run = subprocess.run([client, "--protocol=TCP", "-h", "127.0.0.1", "-P", str(guarded.mysql_port),
                              "-u", "ann", "-ppw-ann", "--batch", "-e", "SELECT DATABASE()"],
                             capture_output=True, text=True, timeout=60)
        assert run.stdout.splitlines() == ["DATABASE()", "mindsdb"], run.stderr


def test_wrong_credentials_are_access_denied(guarded: ServerProcess) -> None:
    wrong = refused(guarded, user="ann", password="not-it", bind_address="127.0.0.9")
    assert wrong.args == (1045, "Access denied for user 'ann'@'127.0.0.9' (using password: YES)")
    assert refused(guarded, user="ann", bind_address="127.0.0.9").args[1].endswith("(using password: NO)")
    # ann's password under another name, and the token's form with a typo: no way in
    assert refused(guarded, user="bob", password="pw-ann", bind_address="127.0.0.9").args[0] == 1045
    assert refused(guarded, user="bob", password=TOKEN + "x", bind_address="127.0.0.9").args[0] == 1045
    log = guarded.log_text()
    assert "failed MySQL login for user 'ann' from 127.0.0.9" in log
    assert "not-it" not in log and "pw-ann" not in log and TOKEN not in log


def test_on_a_token_only_server_a_wrong_token_is_called_wrong(tmp_path: Path) -> None:
    """With `--token` alone the password can only be the token: a wrong one is said to be
    the wrong token (nothing more), a login without one is told the token is the password."""
    with spawn(tmp_path / "data", args=("--mysql-port", "0", "--token", TOKEN)) as server:
        wrong = refused(server, user="mindsdb", password="not-the-token", bind_address="127.0.0.9")
        assert wrong.args == (1045, "Access denied for user 'mindsdb'@'127.0.0.9' (using password: YES)"
                                    ": wrong token")
        missing = refused(server, user="mindsdb", bind_address="127.0.0.9")
        assert missing.args[1].endswith("(using password: NO): this server's token is the password")
        with connect(server, password=TOKEN) as conn:
            assert fetch(conn, "SELECT 1 AS one")[1] == [(1,)]


def test_one_lockout_for_both_doors(guarded: ServerProcess) -> None:
    """Ten failures from one address lock it on both doors, whichever door they came
    through; other addresses are not affected."""
    def guess(n: int) -> int:
        try:
            connect(guarded, user="ann", password=f"guess-{n}", bind_address="127.0.0.2").close()
            return 0
        except pymysql.err.OperationalError as exc:
            return exc.args[0]

    with ThreadPoolExecutor(10) as pool:
        assert list(pool.map(guess, range(10))) == [1045] * 10
    locked = refused(guarded, user="ann", password="pw-ann", bind_address="127.0.0.2")
    assert "Too many failed logins" in locked.args[1]  # even the right password
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(transport=transport) as http:
        answer = http.get(f"{guarded.url}/api/projects", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 429 and "retry-after" in answer.headers
    with connect(guarded, user="ann", password="pw-ann") as conn:  # from 127.0.0.1: fine
        assert fetch(conn, "SELECT 1 AS one")[1] == [(1,)]
    # and HTTP's failures count for the MySQL door
    transport = httpx.HTTPTransport(local_address="127.0.0.3")
    with httpx.Client(transport=transport) as http:
        for n in range(10):
            assert http.get(f"{guarded.url}/api/projects",
                            headers={"Authorization": f"Bearer wrong-{n}"}).status_code == 401
    assert "Too many failed logins" in refused(guarded, password=TOKEN, bind_address="127.0.0.3").args[1]


def test_startup_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's answers (in this process: they end before serving anything)."""
    public = main(["serve", "--host", "0.0.0.0", "--port", "0", "--mysql-port", "0",
                   "--data-dir", str(tmp_path / "a")])
    assert public == 1 and "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err
    umask = os.umask(0o022)  # serve() sets the process's umask before it binds: put it back
    os.umask(umask)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        try:
            busy = main(["serve", "--port", "0", "--mysql-port", str(taken.getsockname()[1]),
                         "--data-dir", str(tmp_path / "b")])
        finally:
            os.umask(umask)
    assert busy == 1 and "choose another --mysql-port" in capsys.readouterr().err
    monkeypatch.setenv("KBSQL_MYSQL_PORT", "http")
    assert main(["serve", "--port", "0", "--data-dir", str(tmp_path / "c")]) == 2
    assert "$KBSQL_MYSQL_PORT: mysql_port must be a number" in capsys.readouterr().err
    # a good $KBSQL_MYSQL_PORT opens the door: test_bad_input's server is started so


def test_a_lockout_covers_the_address_block(guarded: ServerProcess) -> None:
    """Six loopback addresses of 127.0.0.0/8 guessing ten times each (sixty guesses, none
    refused before) get at most thirty guesses checked between them: then the whole /8 is
    locked, on both doors, 127.0.0.1 too. Last in this file: it locks the module's server."""
    answers = []
    for n in range(60):
        try:
            connect(guarded, user="ann", password=f"block-{n}", bind_address=f"127.0.9.{n % 6 + 1}").close()
            answers.append("in")
        except pymysql.err.OperationalError as exc:
            answers.append("locked" if "Too many failed logins" in exc.args[1] else str(exc.args[0]))
    checked = answers.count("1045")
    assert checked <= 30 and answers[-30:] == ["locked"] * 30, answers
    assert "too many failed credentials from 127.0.0.0/8" in guarded.log_text()
    answer = httpx.get(f"{guarded.url}/api/projects", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 429
