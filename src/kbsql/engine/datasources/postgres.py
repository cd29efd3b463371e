"""`ENGINE = 'postgres'`: a PostgreSQL server, read with psycopg.

DuckDB's postgres extension is not installable offline for this DuckDB version, so a
referenced table is fetched with psycopg into Arrow per query (live and exact; a full read
of each referenced table). Names reach the server only through `psycopg.sql.Identifier`
after being matched against the server's own table list.
"""

from __future__ import annotations

from typing import Any

from kbsql.engine.datasources.arrow_rows import rows_to_arrow
from kbsql.engine.datasources.base import FrameScan, Scan, match_name
from kbsql.interface.errors import SqlError

CONNECT_KEYS = ("host", "port", "user", "password", "dbname", "sslmode", "connect_timeout")


class PostgresSource:
    """PARAMETERS: host, port, user, password, database, schema (default `public`)."""

    engine = "postgres"

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.parameters = self.normalize(parameters)
        self.schema = str(self.parameters.get("schema") or "public")

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        if not parameters.get("host") and not parameters.get("dsn"):
            raise SqlError("ENGINE = 'postgres' needs PARAMETERS with host, port, user, password, "
                           "database (or dsn)")
        return dict(parameters)

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - psycopg is a dependency
            raise SqlError("The postgres data source needs the 'psycopg' package") from exc
        p = dict(self.parameters)
        if "database" in p and "dbname" not in p:
            p["dbname"] = p["database"]
        kwargs = {k: p[k] for k in CONNECT_KEYS if p.get(k) is not None}
        kwargs.setdefault("connect_timeout", 5)
        try:
            return psycopg.connect(p.get("dsn") or "", **kwargs)
        except psycopg.Error as exc:
            where = f"{p.get('host')}:{p.get('port', 5432)}/{p.get('dbname', '')}"
            raise SqlError(f"Cannot connect to postgres data source {self.name} at {where}: "
                           f"{str(exc).strip()}") from exc

    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def _table_list(self) -> list[tuple[str, str]]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
                "ORDER BY 1, 2").fetchall()
        return [(r[0], r[1]) for r in rows]

    def tables(self, con: Any = None) -> list[str]:
        return [t if s == self.schema else f"{s}.{t}" for s, t in self._table_list()]

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        from psycopg import sql

        schema, table = (parts[0], parts[1]) if len(parts) == 2 else (self.schema, parts[-1])
        known = self._table_list()
        found_schema = match_name(schema, sorted({s for s, _ in known}))
        found = match_name(table, [t for s, t in known if s == found_schema]) if found_schema else None
        if found is None:
            return None
        query = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(found_schema),
                                                       sql.Identifier(found))
        with self._connect() as db:
            cursor = db.execute(query)
            names = [d.name for d in cursor.description or []]
            return FrameScan(rows_to_arrow(names, cursor.fetchall()))
