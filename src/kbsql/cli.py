"""`kbsql` command line: `kbsql serve` runs the HTTP server (and, with --mysql-port, the
MySQL door), `kbsql migrate` moves a data directory to a shared PostgreSQL catalog,
`kbsql quickstart` runs a demo."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsql.server.run import Backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kbsql", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the local engine over HTTP (MindsDB-compatible API)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=47334, help="port (default 47334; 0 picks one)")
    serve.add_argument("--mysql-port", type=int, default=None,
                       help="also serve MySQL's wire protocol on this port, as MindsDB does on "
                            "47335 (the mysql client, SQLAlchemy, JupySQL, BI tools); off unless "
                            "given (default $KBSQL_MYSQL_PORT; 0 picks one)")
    serve.add_argument("--data-dir", default=None, help="data directory (default $KBSQL_HOME or ./.kbsql)")
    serve.add_argument("--catalog", default=None, metavar="URL",
                       help="postgresql:// URL of a catalog shared by several servers (default "
                            "$KBSQL_CATALOG_URL, else catalog.sqlite in the data directory); "
                            "prefer the variable: a password in argv is visible to other users")
    serve.add_argument("--log-level", default="warning")
    serve.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                       help="a browser origin (scheme://host:port) allowed to call the server "
                            "besides loopback ones; repeatable")
    serve.add_argument("--token", default=os.environ.get("KBSQL_TOKEN") or None,
                       help="require 'Authorization: Bearer TOKEN' on every /api route but "
                            "/api/status (default $KBSQL_TOKEN); needed to bind beyond loopback")
    serve.add_argument("--user", default=os.environ.get("KBSQL_USER") or None,
                       help="user name for POST /api/login (MindsDB's login, as mindsdb_sdk "
                            "sends it); with --password (default $KBSQL_USER)")
    serve.add_argument("--password", default=os.environ.get("KBSQL_PASSWORD") or None,
                       help="password for POST /api/login (default $KBSQL_PASSWORD, which "
                            "keeps it out of the process list)")
    serve.add_argument("--allow-path", action="append", default=[], metavar="DIR",
                       help="a folder file-based data sources (files, sqlite, duckdb) may read; "
                            "repeatable; with a token or a public bind only these are allowed")
    serve.add_argument("--max-body-mb", type=float, default=64,
                       help="largest request body in MB (default 64; 413 beyond)")
    serve.add_argument("--max-sql-kb", type=float, default=1024,
                       help="largest SQL text in KB (default 1024), refused before parsing")
    serve.add_argument("--timeout", type=float, default=30,
                       help="seconds for a request head to arrive and longest pause inside a "
                            "body (default 30; 408 beyond)")
    serve.add_argument("--background-inserts", type=int, default=None, metavar="N",
                       help="INSERT ... SELECT ... USING batch_size statements running at once in "
                            "the background (default 2, or background_inserts in config.json); "
                            "more wait their turn")
    serve.add_argument("--shutdown-timeout", type=float, default=30,
                       help="seconds requests in flight get to finish after SIGTERM/SIGINT "
                            "(default 30)")
    _sharing_flags(serve)
    move = sub.add_parser("migrate", help="copy a local data directory (catalog, tables, knowledge "
                                          "bases with their vectors) into a shared PostgreSQL catalog")
    move.add_argument("--to", default=os.environ.get("KBSQL_CATALOG_URL") or None, metavar="URL",
                      help="postgresql:// URL of the (empty) target catalog (default $KBSQL_CATALOG_URL, "
                           "which keeps the password out of the process list)")
    move.add_argument("--data-dir", default=None, help="the directory to copy (default $KBSQL_HOME or "
                                                       "./.kbsql); only read")
    move.add_argument("--verify", action="store_true", help="only compare the target with the directory")
    move.add_argument("--sample", type=int, default=10,
                      help="rows compared and searches run per knowledge base by the verify step")
    quick = sub.add_parser("quickstart", help="build a small knowledge base and agent, query them")
    quick.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "migrate":
        return _migrate(args)
    from kbsql.quickstart import run

    return run(args.data_dir)


def _fair_share_mb() -> int:
    """A quarter of the machine's memory (at least 256 MB): the SQL engine's default limit."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return max(256, total // 4 // (1 << 20))


def _sharing_flags(serve: argparse.ArgumentParser) -> None:
    """The bounds that keep one user's work from stalling or exhausting another's."""
    serve.add_argument("--statement-timeout", type=float, default=120, metavar="SECONDS",
                       help="longest an SQL statement runs before it is interrupted (default 120; "
                            "0: none); a request may ask for less with 'timeout'")
    serve.add_argument("--sql-memory-mb", type=int, default=_fair_share_mb(), metavar="MB",
                       help="memory limit of the SQL engine (default a quarter of this machine's "
                            f"memory, {_fair_share_mb()} here); it spills to disk beyond")
    serve.add_argument("--sql-spill-mb", type=int, default=None, metavar="MB",
                       help="most the SQL engine may spill into <data-dir>/tmp (default 4x "
                            "--sql-memory-mb, at most a quarter of the free disk)")
    serve.add_argument("--sql-workers", type=int, default=32, metavar="N",
                       help="SQL statements run at once (default 32; more wait, then 503)")
    serve.add_argument("--model-workers", type=int, default=32, metavar="N",
                       help="requests that may call a model (completions, inserts, creating a "
                            "knowledge base or agent) run at once (default 32; then 503)")
    serve.add_argument("--model-concurrency", type=int, default=16, metavar="N",
                       help="model calls in flight to one model host (default 16; then 503)")
    serve.add_argument("--model-timeout", type=float, default=120, metavar="SECONDS",
                       help="longest one model call (embedding, chat, rerank) may take (default 120)")
    serve.add_argument("--allow-model-host", action="append", default=[], metavar="HOST[:PORT]",
                       help="a host model calls may go to; repeatable; '*' is any public host. "
                            "With a token or a public bind the default is '*': loopback and "
                            "private addresses only when named")
    serve.add_argument("--forwarded-allow-ips", action="append", default=[], metavar="IPS",
                       help="proxies (comma-separated IPs, repeatable) whose X-Forwarded-For "
                            "names the client (default none: the connection's address counts)")
    serve.add_argument("--max-chunks-per-row", type=int, default=10_000, metavar="N",
                       help="chunks one inserted row may make (default 10000; the insert fails "
                            "beyond)")


def _engine_settings(args: argparse.Namespace) -> dict[str, object] | str:
    """The engine's bounds from the flags, or the line saying which flag is wrong."""
    positive = {"--sql-memory-mb": args.sql_memory_mb, "--sql-workers": args.sql_workers,
                "--model-workers": args.model_workers, "--model-concurrency": args.model_concurrency,
                "--model-timeout": args.model_timeout, "--max-chunks-per-row": args.max_chunks_per_row}
    wrong = [flag for flag, value in positive.items() if value <= 0]
    if args.statement_timeout < 0 or (args.sql_spill_mb is not None and args.sql_spill_mb < 0):
        wrong.append("--statement-timeout/--sql-spill-mb")
    if wrong:
        return f"{', '.join(wrong)} must be positive"
    from kbsql.engine.outbound import normalize_entry

    try:
        hosts = tuple(normalize_entry(h) for h in args.allow_model_host)
    except ValueError as exc:
        return f"--allow-model-host: {exc}"
    return {"statement_timeout": args.statement_timeout or None, "sql_memory_mb": args.sql_memory_mb,
            "sql_spill_mb": args.sql_spill_mb, "model_timeout": args.model_timeout,
            "model_concurrency": args.model_concurrency, "max_chunks_per_row": args.max_chunks_per_row,
            "allowed_model_hosts": hosts or None, "served": True}


def _serve(args: argparse.Namespace) -> int:
    from kbsql.server.auth import AuthSettings
    from kbsql.server.lanes import Lanes
    from kbsql.server.limits import Limits
    from kbsql.server.run import StartupError
    from kbsql.server.run import serve as run_server

    if bool(args.user) != bool(args.password):
        print("kbsql serve: --user and --password go together", file=sys.stderr)
        return 2
    if args.background_inserts is not None and args.background_inserts < 1:
        print("kbsql serve: --background-inserts must be at least 1", file=sys.stderr)
        return 2
    if min(args.max_body_mb, args.max_sql_kb, args.timeout) <= 0:
        print("kbsql serve: --max-body-mb, --max-sql-kb and --timeout must be positive",
              file=sys.stderr)
        return 2
    settings = _engine_settings(args)
    if isinstance(settings, str):
        print(f"kbsql serve: {settings}", file=sys.stderr)
        return 2
    if args.background_inserts is not None:
        settings["background_workers"] = args.background_inserts
    mysql_port = args.mysql_port
    if mysql_port is None and os.environ.get("KBSQL_MYSQL_PORT", "").strip():
        try:
            mysql_port = int(os.environ["KBSQL_MYSQL_PORT"])
        except ValueError:
            print("kbsql serve: $KBSQL_MYSQL_PORT must be a port number", file=sys.stderr)
            return 2
    auth = AuthSettings(token=args.token, user=args.user, password=args.password)
    limits = Limits(max_body=int(args.max_body_mb * 1024 * 1024),
                    max_sql=int(args.max_sql_kb * 1024), timeout=args.timeout)
    proxies = tuple(ip.strip() for value in args.forwarded_allow_ips for ip in value.split(",") if ip.strip())
    try:
        run_server(functools.partial(open_engine, args.data_dir, args.catalog, settings), args.host,
                   args.port, args.log_level, tuple(args.allow_origin), auth=auth, limits=limits,
                   allow_paths=args.allow_path, shutdown_timeout=args.shutdown_timeout,
                   forwarded_allow_ips=proxies,
                   lanes=Lanes.sized(args.sql_workers, args.model_workers), mysql_port=mysql_port)
    except StartupError as exc:
        print(f"kbsql serve: {exc}", file=sys.stderr)
        return 1
    return 0


def _migrate(args: argparse.Namespace) -> int:
    import sqlite3

    from kbsql.engine.catalog_pg import is_postgres_url
    from kbsql.engine.config import resolve_data_dir
    from kbsql.interface.errors import KbsqlError
    from kbsql.migrate import migrate, verify

    if not is_postgres_url(args.to):
        print("kbsql migrate: --to (or $KBSQL_CATALOG_URL) must be a postgresql:// URL", file=sys.stderr)
        return 2
    data_dir = resolve_data_dir(args.data_dir)
    try:
        if not args.verify:
            migrate(data_dir, args.to)
        ok = verify(data_dir, args.to, sample=max(1, args.sample))["ok"]
    except (KbsqlError, sqlite3.Error, OSError) as exc:  # one line: what failed, nothing half-made
        print(f"kbsql migrate: {exc}", file=sys.stderr)
        return 1
    if ok and not args.verify:
        print("done: start every server with KBSQL_CATALOG_URL set to this URL (see README, "
              "Outgrowing one machine)")
    return 0 if ok else 1


def open_engine(data_dir: str | None, catalog_url: str | None, settings: dict[str, object],
                allowed_paths: tuple[Path, ...] | None, confined: bool) -> Backend:
    """The local engine as the server's service (this is where the two are wired): opened
    after the server's exposure checks with the server's bounds (`settings`, from the flags;
    confined: model calls only to allowed hosts, '*' unless named), each startup problem
    one line (`StartupError`)."""
    import sqlite3

    from kbsql.engine import Engine
    from kbsql.engine.config import EngineConfig
    from kbsql.interface.errors import ServiceError
    from kbsql.server.run import Backend, StartupError

    try:
        config = EngineConfig.load(data_dir, catalog_url)
        for key, value in settings.items():
            setattr(config, key, value)
        if confined and config.allowed_model_hosts is None:
            config.allowed_model_hosts = ("*",)
        config.allowed_paths = allowed_paths
        engine = Engine(config=config)
    except sqlite3.DatabaseError as exc:
        raise StartupError(f"the catalog in {data_dir or 'the data directory'} cannot be read "
                           f"({exc}): restore it from a backup or move it away") from None
    except ServiceError as exc:  # a shared catalog that cannot be reached (password masked)
        raise StartupError(exc.detail) from None
    except json.JSONDecodeError as exc:
        raise StartupError(f"config.json in {data_dir or 'the data directory'} is not valid "
                           f"JSON: {exc}") from None
    except OSError as exc:
        raise StartupError(f"cannot open the data directory {data_dir or ''}: "
                           f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
                           ) from None
    where = f"data: {engine.data_dir}"
    if engine.catalog.shared_url:
        from kbsql.engine.catalog_pg import where_of_url

        where += f", catalog: {where_of_url(engine.catalog.shared_url)}"
    return Backend(engine, where, read_only=engine.config.read_only)


if __name__ == "__main__":
    sys.exit(main())
