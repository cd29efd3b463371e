"""`kbsql` command line: `kbsql serve` runs the HTTP server (and, with --mysql-port, the
MySQL door), `kbsql migrate` moves a data directory to a shared PostgreSQL catalog,
`kbsql jobs run` runs due jobs once (cron), `kbsql quickstart` runs a demo."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbsql.server.run import Backend


def build_parser() -> argparse.ArgumentParser:
    """The `kbsql` parser; each option's help says what it does and its default (a newcomer's
    `kbsql quickstart --help` listed `--data-dir DATA_DIR` and nothing else)."""
    parser = argparse.ArgumentParser(prog="kbsql", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="command")
    serve = sub.add_parser("serve", help="serve the local engine over HTTP (MindsDB-compatible API)",
                           usage="kbsql serve [--port PORT] [--data-dir DIR] [--token TOKEN] [options]",
                           description="Every option is a setting of README's table (engine/"
                                       "settings_table.py): a flag given > its environment variable "
                                       "> config.json in the data directory > the default.")
    _setting_flags(serve)
    move = sub.add_parser("migrate", help="copy a local data directory (catalog, tables, knowledge "
                                          "bases with their vectors) into a shared PostgreSQL catalog")
    move.add_argument("--to", default=os.environ.get("KBSQL_CATALOG_URL") or None, metavar="URL",
                      help="postgresql:// URL of the (empty) target catalog (default $KBSQL_CATALOG_URL, "
                           "which keeps the password out of the process list)")
    move.add_argument("--data-dir", default=None, metavar="DIR",
                      help="the directory to copy (default $KBSQL_HOME or ./.kbsql); only read")
    move.add_argument("--verify", action="store_true", help="only compare the target with the directory")
    move.add_argument("--sample", type=int, default=10, metavar="N",
                      help="rows compared and searches run per knowledge base by the verify step "
                           "(default 10)")
    jobs = sub.add_parser("jobs", help="jobs (CREATE JOB): 'kbsql jobs run' runs the due runs once "
                                       "and exits (for cron, where no server runs them)")
    jobs.add_argument("action", choices=["run"], help="run: the runs due now, once, then exit")
    jobs.add_argument("--data-dir", default=None, metavar="DIR",
                      help="the data directory (default $KBSQL_HOME or ./.kbsql)")
    jobs.add_argument("--catalog", default=os.environ.get("KBSQL_CATALOG_URL") or None, metavar="URL",
                      help="a shared postgresql:// catalog (default $KBSQL_CATALOG_URL)")
    quick = sub.add_parser("quickstart", help="build a small knowledge base and agent, query them",
                           description="Builds a knowledge base of Python's own documentation "
                                       "topics with the bundled model, searches it with SQL and asks "
                                       "the offline agent: offline, no key, no server.")
    quick.add_argument("--data-dir", default=None, metavar="DIR",
                       help="keep the knowledge base and agent in DIR (default: a temporary "
                            "folder, removed at the end)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `kbsql`: what it can do, not "arguments are required: command"
        parser.print_help(sys.stderr)
        return 2
    if args.command == "serve":
        return _serve(args)
    if args.command == "migrate":
        return _migrate(args)
    if args.command == "jobs":
        return _run_jobs(args)
    from kbsql.quickstart import run

    return run(args.data_dir)


def _run_jobs(args: argparse.Namespace) -> int:
    """`kbsql jobs run`: the due runs, once, claimed as a server claims them (so cron and
    running servers never run one twice); prints how many ran."""
    from kbsql.engine import Engine
    from kbsql.engine.config import resolve_data_dir

    data_dir = resolve_data_dir(args.data_dir)
    if not args.catalog and not (data_dir / "catalog.sqlite").is_file():
        # the engine would make an empty directory there and answer "0 run(s)" every time:
        # a mistyped path in a crontab would look like a quiet hour forever
        print(f"kbsql jobs run: {data_dir} is not a kbsql data directory (no catalog.sqlite): "
              "name the one the server or notebook uses with --data-dir or $KBSQL_HOME", file=sys.stderr)
        return 2
    engine = Engine(data_dir, catalog_url=args.catalog, settings={"jobs_poll_s": 0})
    try:
        ran = engine.jobs.run_due()
    finally:
        engine.close()
    print(f"kbsql jobs run: {ran} run(s)")
    return 0


FIRST_FLAGS = ("--data-dir", "--host", "--port", "--mysql-port", "--token", "--user", "--password",
               "--allow-path", "--allow-origin", "--catalog", "--log-level")
"""`kbsql serve --help` lists these first, under "where and for whom": a newcomer looking for
the port found it 30 options down, below the resource limits in the settings table's order;
and a mistyped value (`--port abc`) printed a 22-line usage of every flag above its one-line
error, so the usage names these few."""


def _setting_flags(serve: argparse.ArgumentParser) -> None:
    """`kbsql serve`'s flags, one per setting of the table that has one, each defaulting to
    None so a flag given is told from one left out (the environment, config.json and the
    default come after it: settings_table.resolve); FIRST_FLAGS first, then the limits."""
    from kbsql.engine.settings_table import SETTINGS

    groups = {True: serve.add_argument_group("where and for whom"),
              False: serve.add_argument_group("limits and behaviour")}
    flagged = [(s.flag, s) for s in SETTINGS if s.flag is not None]
    order = {flag: i for i, flag in enumerate(FIRST_FLAGS)}
    for flag, setting in sorted(flagged, key=lambda pair: order.get(pair[0], len(order))):
        shown = setting.default_text(served=True)
        where = [f"${setting.variable}"] if setting.variable else []
        where += [f"{setting.name} in config.json"] if setting.in_file else []
        extra: dict[str, Any] = {"action": "append"} if setting.kind is tuple else \
            {"action": "store_const", "const": True} if setting.kind is bool else {"type": setting.kind}
        text = f"{setting.help} (default {shown}" + (f"; else {', '.join(where)})" if where else ")")
        if setting.kind is not bool:
            extra["metavar"] = setting.metavar
        groups[flag in FIRST_FLAGS].add_argument(flag, dest=setting.name, default=None,
                                                  help=text.replace("%", "%%"), **extra)


def _serve(args: argparse.Namespace) -> int:
    from kbsql.engine.settings_table import SETTINGS, SettingError, resolve
    from kbsql.interface.secrets import mask_connection_string  # a --catalog URL's password
    from kbsql.server.auth import AuthSettings
    from kbsql.server.door_bounds import MB, DoorBounds
    from kbsql.server.lanes import Lanes
    from kbsql.server.limits import Limits
    from kbsql.server.run import StartupError
    from kbsql.server.run import serve as run_server

    given = {s.name: getattr(args, s.name) for s in SETTINGS if s.flag}
    try:  # the server's own settings; the engine's are read by EngineConfig.load (open_engine)
        own = resolve(given, {}, served=True, environ=os.environ, where="kbsql serve",
                      names=[s.name for s in SETTINGS if s.flag and not s.in_file])
    except SettingError as exc:
        print(f"kbsql serve: {mask_connection_string(str(exc))}", file=sys.stderr)
        return 2
    if bool(own["user"]) != bool(own["password"]):
        print("kbsql serve: --user and --password go together", file=sys.stderr)
        return 2
    engine_given = {s.name: given[s.name] for s in SETTINGS if s.flag and s.in_file
                    and s.name not in ("catalog_url",)}
    auth = AuthSettings(token=own["token"], user=own["user"], password=own["password"])
    limits = Limits(max_body=int(own["max_body_mb"] * 1024 * 1024),
                    max_sql=int(own["max_sql_kb"] * 1024), timeout=own["timeout"],
                    max_head=int(own["max_head_kb"] * 1024), max_headers=own["max_headers"],
                    max_unread=int(own["http_unread_mb"] * MB), write_timeout=own["http_write_timeout"])
    proxies = tuple(ip.strip() for value in own["forwarded_allow_ips"] for ip in value.split(",")
                    if ip.strip())
    bounds = DoorBounds(max_pending=own["max_pending_connections"],
                        mysql_idle_timeout=own["mysql_idle_timeout"],
                        mysql_write_timeout=own["mysql_write_timeout"],
                        mysql_max_prepared=own["mysql_max_prepared"],
                        mysql_max_cursors=own["mysql_max_cursors"],
                        mysql_max_connections=own["mysql_max_connections"],
                        http_max_connections=own["max_http_connections"],
                        mysql_held=int(own["mysql_held_mb"] * MB),
                        mysql_total_held=int(own["mysql_total_held_mb"] * MB),
                        flood_closes=own["flood_closes"], flood_hold=own["flood_hold"],
                        flood_pause_rate=own["flood_pause_rate"])
    lanes = Lanes.sized(own["sql_workers"], own["model_workers"], own["upload_workers"])
    try:
        run_server(functools.partial(open_engine, own["data_dir"], args.catalog_url, engine_given),
                   own["host"], own["port"], own["log_level"], own["allow_origin"], auth=auth,
                   limits=limits, allow_paths=own["allow_path"], shutdown_timeout=own["shutdown_timeout"],
                   forwarded_allow_ips=proxies, lanes=lanes,
                   mysql_port=own["mysql_port"], bounds=bounds)
    except StartupError as exc:
        print(f"kbsql serve: {mask_connection_string(str(exc))}", file=sys.stderr)
        return 1
    return 0


def _migrate(args: argparse.Namespace) -> int:
    import sqlite3

    from kbsql.engine.config import resolve_data_dir
    from kbsql.engine.postgres.catalog_pg import is_postgres_url
    from kbsql.interface.errors import KbsqlError
    from kbsql.interface.secrets import mask_connection_string
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
        print(f"kbsql migrate: {mask_connection_string(str(exc))}", file=sys.stderr)
        return 1
    if ok and not args.verify:
        print("done: start every server with KBSQL_CATALOG_URL set to this URL (see README, "
              "Outgrowing one machine)")
    return 0 if ok else 1


def _freeze_imports() -> None:
    """Leave what the server has made by the time its engine is open out of every later
    garbage collection (`gc.freeze`).

    Why: a full collection walks every container object with the interpreter lock held, so
    every request in flight waits for it; a warm server held ~130,000 such objects and a full
    collection took 50-120 ms under load. More than half are the functions, classes and tables
    of the modules imported by now and the engine's own long-lived parts, which live as long as
    the process: frozen, a warm server's full collection walks ~57,000 (~30 ms on a loaded
    machine, from ~70). Nothing of the app or of any connection exists yet, so what a request
    makes stays collectable (a freeze after the app and the doors were built kept an unread
    answer's reference cycle alive: stop 38). The libraries the first statement loads (DuckDB,
    Arrow, pandas) are not imported early for this: an idle server stays small."""
    import gc

    gc.collect()
    gc.freeze()


def open_engine(data_dir: str | None, catalog_url: str | None, settings: dict[str, object],
                allowed_paths: tuple[Path, ...] | None, confined: bool) -> Backend:
    """The local engine as the server's service (this is where the two are wired): opened
    after the server's exposure checks with the engine settings given as flags (`settings`:
    they beat the environment and config.json; confined: model calls only to allowed hosts,
    '*' unless named), each startup problem one line (`StartupError`)."""
    import sqlite3

    from kbsql.engine import Engine
    from kbsql.engine.config import EngineConfig
    from kbsql.engine.settings_table import SettingError
    from kbsql.interface.errors import ServiceError
    from kbsql.server.run import Backend, StartupError

    try:
        config = EngineConfig.load(data_dir, catalog_url, settings=settings, served=True)
        if confined and config.allowed_model_hosts is None:
            config.allowed_model_hosts = ("*",)
        if confined and config.allowed_source_hosts is None:
            config.allowed_source_hosts = ("*",)
        config.allowed_paths = allowed_paths
        engine = Engine(config=config)
        _freeze_imports()
    except SettingError as exc:
        raise StartupError(str(exc)) from None
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
        from kbsql.engine.postgres.catalog_pg import where_of_url

        where += f", catalog: {where_of_url(engine.catalog.shared_url)}"
    return Backend(engine, where, read_only=engine.config.read_only,
                   statement_timeout=engine.config.statement_timeout)


if __name__ == "__main__":
    sys.exit(main())
