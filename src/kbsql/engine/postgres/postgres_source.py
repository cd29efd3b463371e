"""`ENGINE = 'postgres'`: a PostgreSQL server, ATTACHed read-only and scanned by DuckDB.

DuckDB's postgres scanner (loaded from its wheel, see `extensions`) pushes the columns a
query uses and its simple filters down to the server (`POSTGRES_SCAN ... Filters: id=5` in
EXPLAIN) and streams rows in binary COPY format straight into DuckDB vectors: no row goes
through Python.

Why a DuckDB SECRET holds host, user and password (and not the ATTACH string): DuckDB shows
an ATTACH string in `duckdb_databases()` and in its connection errors, but redacts a
secret's password. Errors raised here name host, port and database, never the password.

Why a source connects with its own parameters only: libpq fills every setting not given from
the server's environment (PGPASSWORD, PGUSER, PGSERVICE, PGPASSFILE, ~/.pgpass), so a source
naming no password on a host that asks for one was sent the server's own. `settings` keeps the
libpq keys a source may set, fills the rest explicitly (an empty password, a passfile
that cannot exist) and requires a user. On a server others use (`allowed_source_hosts`, set by
`kbsql serve --allow-source-host`, `*` by default with a token or a public bind) a source
connects only to an allowed host (engine/outbound.py's rule: loopback and private addresses
only when named), to the address just checked, and every failure to connect reads alike: a
closed port, a silent host, another service and a refused password are not told apart.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from typing import Any
from urllib.parse import unquote, urlparse

import duckdb
from sqlglot import exp

from kbsql.engine import outbound
from kbsql.engine.datasources.extensions import load_extension
from kbsql.engine.datasources.scans import NativeTable, Scan, duckdb_string_literal, match_name
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import SqlError
from kbsql.interface.secrets import scrub_secret

SECRET_FIELDS = {"host": "HOST", "port": "PORT", "user": "USER", "password": "PASSWORD",
                 "dbname": "DATABASE"}
OPTION_KEYS = ("sslmode", "connect_timeout", "application_name", "options")
CONNECTION_KEYS = ("hostaddr", "passfile")
"""Set by kbsql only (a source's own value would undo the policy): in the ATTACH string."""
CONNECT = "Cannot connect to"
_DUCKDB_CONNECT = re.compile(r'^IO Error: Unable to connect to Postgres at "[^"]*": ')
"""DuckDB's opening of a failed ATTACH: it quotes the libpq string it was given, which holds
only kbsql's options ("connect_timeout='5' passfile='/dev/null/kbsql-no-passfile'") and
read as if it were the address; the sentence names the address itself."""
NO_PASSFILE = os.path.join(os.devnull, "kbsql-no-passfile")
"""A passfile that cannot exist (libpq then reads none, silently; /dev/null itself warns)."""
TABLES_SQL = ("SELECT table_schema, table_name FROM information_schema.tables "
              "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2")


def parse_dsn(dsn: str) -> dict[str, Any]:
    """libpq settings from a `postgresql://user:pw@host:port/db?sslmode=...` URI or a
    `host=... user=...` string."""
    if "://" in dsn:
        url = urlparse(dsn)
        out: dict[str, Any] = {"host": url.hostname, "port": url.port,
                               "user": unquote(url.username) if url.username else None,
                               "password": unquote(url.password) if url.password else None,
                               "dbname": unquote(url.path.lstrip("/")) or None}
        for pair in url.query.split("&"):
            key, _, value = pair.partition("=")
            if key:
                out[key] = unquote(value)
        return {k: v for k, v in out.items() if v is not None}
    try:
        words = shlex.split(dsn)
    except ValueError as exc:
        raise SqlError("The postgres dsn is not a valid key=value connection string") from exc
    return dict(w.split("=", 1) for w in words if "=" in w)


def settings(parameters: dict[str, Any], *, own_only: bool = True) -> dict[str, str]:
    """The libpq settings: the dsn's, overridden by explicit PARAMETERS. `own_only` (a data
    source, see the module docstring): nothing left for libpq to take from the server's
    environment; False for the operator's own URL (`kbsql migrate`), where it may."""
    out: dict[str, Any] = parse_dsn(str(parameters["dsn"])) if parameters.get("dsn") else {}
    for key, value in parameters.items():
        key = "dbname" if key == "database" else key
        if value is not None and (key in SECRET_FIELDS or key in OPTION_KEYS):
            out[key] = value
    out.setdefault("connect_timeout", 5)
    if own_only:
        out = {k: v for k, v in out.items() if k in SECRET_FIELDS or k in OPTION_KEYS}
        if not out.get("user"):
            raise SqlError("A postgres data source needs a user (PARAMETERS user, or in the dsn): "
                           "it connects with its own parameters only")
        out.setdefault("port", 5432)
        out.setdefault("dbname", out["user"])  # libpq's own default, said here so PGDATABASE is not read
        out.setdefault("password", "")  # given (even empty), so PGPASSWORD is not read
        out["passfile"] = NO_PASSFILE  # nor PGPASSFILE or ~/.pgpass
    return {k: str(v) for k, v in out.items()}


def connection(settings: dict[str, str], allowed: tuple[str, ...] | None, what: str) -> dict[str, str]:
    """The settings to connect with: under `allowed` (None: anywhere) the host must be
    allowed, and an unnamed host is reached at the public address just checked (`hostaddr`)."""
    s = dict(settings)
    if allowed is None:
        return s
    host, port = s.get("host", ""), s.get("port", "5432")
    address = outbound.allowed_address(allowed, host, int(port)) if port.isdigit() else None
    if address is None:
        raise SqlError(f"{what}: connections to {host}:{port} are not allowed on this server "
                       "(loopback and private addresses only when the operator names them: "
                       "kbsql serve --allow-source-host HOST[:PORT])")
    if address != host:
        s["hostaddr"] = address
    return s


def within_deadline(settings: dict[str, str], most: float | None = None) -> dict[str, str]:
    """The source's own `connect_timeout`, brought within what is left of the statement's
    deadline (`--statement-timeout`) and within `most` (`--source-connect-timeout`): libpq's
    wait for a host that never answers cannot be interrupted, and a source asking for 100 s
    held a 5 s statement for 100 s, and, under the served 120 s deadline, its connection for
    100 s after its client had left (audit51)."""
    control = current_control()
    left = control.remaining() if control is not None else None
    bounds = [b for b in (left, most) if b is not None and b > 0]
    if not bounds:
        return settings
    asked = int(settings["connect_timeout"]) if settings.get("connect_timeout", "").isdigit() else 5
    return {**settings, "connect_timeout": str(max(1, min(asked, math.ceil(min(bounds)))))}


def libpq_value(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def search_path(schema: str) -> str:
    """The `schema` parameter, then public, as a libpq `-c search_path=` value: MindsDB sets
    this on connecting, so a native query reads `invoices` in the schema as the source's plain
    tables do (without it, 'relation "invoices" does not exist'). The name is quoted for
    PostgreSQL, then backslashes and spaces escaped for libpq's `options` (which reads `\\x`
    as x: a schema `we\\ird` was searched as `weird`)."""
    value = '"' + schema.replace('"', '""') + '",public'
    return value.replace("\\", "\\\\").replace(" ", "\\ ")


class PostgresSource:
    """PARAMETERS: host, port, user, password, database, schema (default `public`), or a dsn;
    optional sslmode, connect_timeout (seconds, default 5)."""

    engine = "postgres"
    read_only = True  # False only while a write runs (DuckSession.writable)

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.alias = alias
        self.parameters = self.normalize(parameters)
        self.schema = str(self.parameters.get("schema") or "public")
        self.settings = settings(self.parameters)
        self.allowed: tuple[str, ...] | None = None
        self.connect_s: float | None = None
        self.statement_s: float | None = None

    def confine(self, allowed: tuple[str, ...] | None, connect_s: float | None = None) -> None:
        """The hosts this source may connect to (None: anywhere) and the longest a connection
        attempt may take (`--source-connect-timeout`), from the engine's config."""
        self.allowed, self.connect_s = allowed, connect_s

    def bound_statements(self, seconds: float | None) -> None:
        """What the server runs for this source stops after `seconds` (the engine's statement
        timeout; None: no bound): set as its connections' `statement_timeout`. DuckDB's
        interrupt does not reach a query waiting in libpq: a native query `SELECT pg_sleep(20)`
        under a 2 s deadline held its worker for 20 s (and pg_sleep(1e9) would hold it for good)."""
        self.statement_s = seconds

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        if not parameters.get("host") and not parameters.get("dsn"):
            raise SqlError("ENGINE = 'postgres' needs PARAMETERS with host, port, user, password, "
                           "database (or dsn)")
        return dict(parameters)

    def _error(self, doing: str, exc: Exception) -> SqlError:
        """An error naming where, with the password (if any) masked out of DuckDB's text."""
        s = self.settings
        message = " ".join(str(exc).split())  # libpq's text spans lines: an error is one line
        message = _DUCKDB_CONNECT.sub("", message)
        if s.get("password"):  # a short one only where it stands alone ("p" garbled every word)
            message = scrub_secret(message, s["password"])
        if self.allowed is not None and doing == CONNECT:  # a shared server: no network map
            message = ("no connection (the host, port, database, user or password may be wrong, "
                       "or the server down or too slow to answer)")
        where = f"{s.get('host', '')}:{s.get('port', 5432)}/{s.get('dbname', '')}"
        return SqlError(f"{doing} postgres data source {self.name} at {where}: {message}")

    def _connection(self) -> dict[str, str]:
        return within_deadline(connection(self.settings, self.allowed, f"postgres data source {self.name}"),
                               self.connect_s)

    @property
    def _secret(self) -> str:
        return f"{self.alias}_secret"

    def attach(self, con: Any) -> None:
        load_extension(con, "postgres_scanner")
        s = self._connection()
        if self.parameters.get("schema"):  # after the source's own `options`, as MindsDB's SET
            s["options"] = f"{s.get('options', '')} -c search_path={search_path(self.schema)}".strip()
        if self.statement_s:  # last, so a source's own `options` cannot lift it
            bound_ms = max(1, round(self.statement_s * 1000))
            s["options"] = f"{s.get('options', '')} -c statement_timeout={bound_ms}".strip()
        fields = ", ".join(f"{SECRET_FIELDS[k]} {duckdb_string_literal(v)}"
                           for k, v in s.items() if k in SECRET_FIELDS and v)
        options = " ".join(f"{k}={libpq_value(v)}" for k, v in s.items()
                           if k in OPTION_KEYS + CONNECTION_KEYS or (k == "password" and not v))
        try:
            con.execute(f"CREATE OR REPLACE TEMPORARY SECRET \"{self._secret}\" "
                        f"(TYPE postgres{', ' if fields else ''}{fields})")
            mode = ", READ_ONLY" if self.read_only else ""
            con.execute(f"ATTACH {duckdb_string_literal(options)} AS \"{self.alias}\" "
                        f"(TYPE postgres, SECRET \"{self._secret}\"{mode})")
        except duckdb.Error as exc:
            self.detach(con)
            raise self._error(CONNECT, exc) from None

    def detach(self, con: Any) -> None:
        con.execute(f"DETACH DATABASE IF EXISTS \"{self.alias}\"")
        con.execute(f"DROP TEMPORARY SECRET IF EXISTS \"{self._secret}\"")

    def _table_list(self, con: Any) -> list[tuple[str, str]]:
        """(schema, table) of every table and view, asked of the server itself (live)."""
        try:
            rows = con.execute("SELECT * FROM postgres_query(?, ?)", [self.alias, TABLES_SQL]) \
                .fetchall()
        except duckdb.Error as exc:
            raise self._error("Listing the tables of", exc) from None
        return [(r[0], r[1]) for r in rows]

    def tables(self, con: Any) -> list[str]:
        return [t if s == self.schema else f"{s}.{t}" for s, t in self._table_list(con)]

    def own_types(self, con: Any, table: NativeTable) -> dict[str, tuple[str, int | None]]:
        """column -> (PostgreSQL's own type name, its character maximum length) of a table this
        source scanned, asked of the server: DuckDB reads `varchar(100)`, `text` and `json`
        all as VARCHAR, and MindsDB's clients read them apart (`SHOW COLUMNS`)."""
        def literal(value: str) -> str:
            return "'" + value.replace("'", "''") + "'"

        sql = ("SELECT column_name, data_type, character_maximum_length FROM information_schema.columns "
               f"WHERE table_schema = {literal(table.schema)} AND table_name = {literal(table.table)}")
        try:
            rows = con.execute("SELECT * FROM postgres_query(?, ?)", [self.alias, sql]).fetchall()
        except duckdb.Error as exc:
            raise self._error("Reading the columns of", exc) from None
        return {str(r[0]): (str(r[1]), None if r[2] is None else int(r[2])) for r in rows}

    def native_query(self, text: str) -> exp.Expression:
        """The FROM item running `text`, PostgreSQL's own SQL, on this source as it is (MindsDB's
        native query, sql/tables/native_queries.py): `postgres_query` on the read-only ATTACH."""
        return exp.Table(this=exp.Anonymous(this="postgres_query", expressions=[
            exp.Literal.string(self.alias), exp.Literal.string(text)]))

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        schema, table = (parts[0], parts[1]) if len(parts) == 2 else (self.schema, parts[-1])
        known = self._table_list(con)
        found_schema = match_name(schema, sorted({s for s, _ in known}))
        found = match_name(table, [t for s, t in known if s == found_schema]) if found_schema else None
        if found is None or found_schema is None:
            return None
        # DuckDB caches the server's table definitions per ATTACH: drop them so a table
        # created or altered since the last query is read as it is now.
        con.execute("CALL pg_clear_cache()")
        return NativeTable(self.alias, found_schema, found)
