"""The DuckDB side: one in-process connection, the data sources attached to it, and the
frames registered on it.

One connection (not one per query) because ATTACHed databases and registered frames
live on a connection; one re-entrant lock because a DuckDB connection is not safe to use
from two threads at once and the server runs engine calls in a thread pool.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from kbsql.engine.datasources.confine import PathPolicy
from kbsql.engine.datasources.frame_store import FRAMES_SOURCE, FrameStore
from kbsql.engine.datasources.registry import open_source
from kbsql.engine.datasources.scans import DataSource, FileScan, FrameScan, NativeTable, Scan
from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    from kbsql.engine.catalog import Catalog


class DuckSession:
    """Owns the connection; turns a source's `Scan` into a FROM item DuckDB can read."""

    def __init__(self, catalog: Catalog, frames: FrameStore, policy: PathPolicy | None = None,
                 builtins: dict[str, DataSource] | None = None):
        self.catalog = catalog
        self.frames = frames
        # the built-in sources by lower-case name: `df` (registered frames), `files` (uploads)
        self.builtins: dict[str, DataSource] = {FRAMES_SOURCE: frames, **(builtins or {})}
        self.policy = policy  # which files sources may open (datasources/confine.py)
        self.con = duckdb.connect(":memory:")
        self.lock = threading.RLock()
        self._sources: dict[str, tuple[tuple[int, str], DataSource]] = {}
        self._views: dict[tuple[Any, ...], tuple[tuple[Any, ...], str]] = {}
        self._counter = itertools.count()

    def close(self) -> None:
        with self.lock:
            self.con.close()

    # data sources -------------------------------------------------------------------------
    def source(self, name: str) -> DataSource | None:
        """The data source called `name` (attached on first use), None if there is none."""
        builtin = self.builtins.get(name.lower())
        if builtin is not None:
            return builtin
        record = self.catalog.find_datasource(name)
        key = name.lower()
        with self.lock:
            cached = self._sources.get(key)
            if record is None:
                if cached is not None:
                    self.forget(name)
                return None
            version = (record.id, repr(sorted(record.parameters.items())))  # ALTER DATABASE: new version
            if cached is not None and cached[0] == version:
                return cached[1]
            if cached is not None:
                self.forget(name)
            if self.policy is not None:
                self.policy.check_source(record.engine, record.parameters)
            source = open_source(record)
            source.attach(self.con)
            self._sources[key] = (version, source)
            return source

    def forget(self, name: str) -> None:
        """Detach a dropped (or replaced) source."""
        with self.lock:
            cached = self._sources.pop(name.lower(), None)
            if cached is not None:
                try:
                    cached[1].detach(self.con)
                except duckdb.Error:
                    pass

    # FROM items ---------------------------------------------------------------------------
    def from_item(self, scan: Scan, temps: list[str]) -> exp.Expression:
        """The FROM item reading `scan`. Uncached frames are registered under a temp name
        added to `temps` (release them after the query)."""
        if isinstance(scan, NativeTable):
            if self.policy is not None and self.policy.confined:
                self._refuse_duckdb_view(scan)
            return exp.table_(scan.table, db=scan.schema, catalog=scan.catalog, quoted=True)
        if isinstance(scan, FileScan):
            if self.policy is not None:  # a folder's file may be a symlink to anywhere
                self.policy.check(scan.path, "file")
            call = exp.Anonymous(this=scan.reader, expressions=[exp.Literal.string(scan.path)])
            return exp.Table(this=call)
        return exp.table_(self.register(scan, temps), quoted=True)

    def _refuse_duckdb_view(self, scan: NativeTable) -> None:
        """A view of an attached DuckDB file runs its own SQL here, where nothing checks
        it: `CREATE VIEW v AS SELECT * FROM read_csv('/anywhere.csv')` in a file under an
        --allow-path root would read past the roots (and the data directory). Confined,
        such views are refused. (SQLite and PostgreSQL views run in their own database.)"""
        with self.lock:  # the type first: listing views would also list a PostgreSQL's
            kind = self.con.execute("SELECT type FROM duckdb_databases() WHERE database_name = ?",
                                    [scan.catalog]).fetchone()
            if kind is None or kind[0] != "duckdb":
                return
            view = self.con.execute(
                "SELECT 1 FROM duckdb_views() WHERE database_name = ? AND schema_name = ? "
                "AND view_name = ?", [scan.catalog, scan.schema, scan.table]).fetchone()
        if view is not None:
            raise SqlError(f"{scan.table} is a view of a DuckDB file; this server reads only "
                           "their tables (a view may read files outside --allow-path)")

    def register(self, scan: FrameScan, temps: list[str]) -> str:
        with self.lock:
            if scan.cache_key is not None:
                slot = scan.cache_key[:2]
                known = self._views.get(slot)
                if known is not None and known[0] == scan.cache_key:
                    return known[1]
                if known is not None:
                    self.con.unregister(known[1])
                name = f"__kbsql_{scan.cache_key[0]}_{next(self._counter)}"
                self.con.register(name, scan.frame)
                self._views[slot] = (scan.cache_key, name)
                return name
            name = f"__kbsql_tmp_{next(self._counter)}"
            self.con.register(name, scan.frame)
            temps.append(name)
            return name

    def release(self, temps: list[str]) -> None:
        with self.lock:
            for name in temps:
                try:
                    self.con.unregister(name)
                except duckdb.Error:
                    pass
            temps.clear()

    def run(self, sql: str) -> pa.Table:
        """Execute one SELECT; the result as Arrow (no per-row Python)."""
        with self.lock:
            relation = self.con.sql(sql)
            if relation is None:
                return pa.table({})
            return relation.to_arrow_table()
