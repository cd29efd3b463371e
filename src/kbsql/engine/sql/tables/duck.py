"""The DuckDB side: one in-process database, a cursor per running statement, the data
sources attached to it, and the frames each cursor reads.

Why cursors: one DuckDB connection runs one statement at a time, so a slow statement froze
every other user's SQL. `con.cursor()` is another connection to the same database: attached
sources and settings are shared, and statements on different cursors run side by side.
Idle cursors wait in a pool (making one costs ~50 us, a tenth of a keep-alive `SELECT 1`).
A registered frame is seen only by the cursor it was registered on, so a plan lists the
frames it reads (`Compiled.frames`) and each cursor registers them on first use.

Each statement runs under a `Control` (interface/control.py): its cursor's `interrupt` is
the stopper, so a deadline (the watchdog), a client that goes away (the server) or Ctrl-C
(DuckDB itself, in the main thread) stops it within a tick. The database's bounds
(memory, spill) are set in `duck_settings`; results are fetched in batches and refused
past `result_cap` bytes (DuckDB's limit does not count the Arrow result; duck_fetch.py).
"""

from __future__ import annotations

import itertools
import logging
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from kbsql.engine.datasources.confine import PathPolicy, Pinned, pin_stored
from kbsql.engine.datasources.frame_store import FRAMES_SOURCE, FrameStore
from kbsql.engine.datasources.registry import (
    ATTACH_PREFIX,
    Engines,
    data_source_engines,
    normalize,
    open_source,
)
from kbsql.engine.datasources.scans import DataSource, FileScan, FrameScan, NativeTable, Scan
from kbsql.engine.sql.parse import long_statements
from kbsql.engine.sql.tables import value_caps
from kbsql.engine.sql.tables.duck_errors import readable
from kbsql.engine.sql.tables.duck_fetch import MainThreadRelay, fetch
from kbsql.engine.sql.tables.duck_settings import (
    DuckSettings,
    configure,
    setting,
    setting_bytes,
    spill_refresh,
)
from kbsql.engine.sql.tables.plans import Compiled, FrameUse
from kbsql.engine.sql.tables.swap_gate import SwapGate
from kbsql.engine.sql.tables.watchdog import Watchdog
from kbsql.interface.control import CURRENT, Control
from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    from kbsql.engine.catalog import Catalog, DatasourceRecord

log = logging.getLogger("kbsql.sql")
MB = 1024 * 1024
FILE_TOKEN = "__kbsql_file_{}__"
PINNED_ENGINES = frozenset({"sqlite", "duckdb"})  # sources that are one file, re-checked at each use
SPILL_REFRESH_S = 5.0  # seconds between two readings of the disk's free space (the spill cap)
SLOT_MAX_BYTES = 16 * MB  # frames a pooled cursor keeps registered between statements, in all


class _Cursor:
    """A pooled DuckDB cursor and the cached frames registered on it (slot -> name, table)."""

    __slots__ = ("con", "slots")

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.slots: dict[tuple[Any, ...], tuple[str, Any]] = {}


def _unregister(cursor: _Cursor, name: str) -> None:
    try:
        cursor.con.unregister(name)
    except duckdb.Error:
        pass


class DuckSession:
    """Owns the database; turns a source's `Scan` into a FROM item and runs plans."""

    def __init__(self, catalog: Catalog, frames: FrameStore, policy: PathPolicy | None = None,
                 settings: DuckSettings | None = None,
                 builtins: dict[str, DataSource] | None = None, engines: Engines | None = None):
        self.catalog = catalog
        self.engines = engines or data_source_engines()  # CREATE DATABASE ... ENGINE's names
        self.frames = frames
        # the built-in sources by lower-case name: `df` (registered frames), `files` (uploads)
        self.builtins: dict[str, DataSource] = {FRAMES_SOURCE: frames, **(builtins or {})}
        self.policy = policy  # which files sources may open (datasources/confine.py)
        self.settings = settings or DuckSettings()
        self.con = duckdb.connect(":memory:")
        self.lock = threading.RLock()  # attaching and detaching sources
        self._write_lock = threading.Lock()  # one write to a data source at a time
        self.swaps = SwapGate()  # statements run shared; a source is re-attached alone
        self._idle: list[_Cursor] = []
        self._pool_lock = threading.Lock()
        self._sources: dict[str, tuple[tuple[int, str], DataSource, Pinned | None]] = {}
        self._attaches = itertools.count()
        """Each attach of a source has a DuckDB name of its own (but a write's swap, which
        keeps its name for the statements waiting at the gate): DROP and ALTER DATABASE detach
        outside the gate, and attaching a file under the name just detached while statements
        were binding made DuckDB fail 'INTERNAL Error: Database name kbsql_ds_19 was already
        used by a different database', then invalidate the database (every user's statement
        answered FATAL until a restart) or die of SIGSEGV."""
        self._views: dict[tuple[Any, ...], tuple[tuple[Any, ...], str]] = {}
        self._counter = itertools.count()
        self._temp_dir = configure(self.con, self.settings)
        self.memory_limit = setting_bytes(self.con, "memory_limit")
        self.spill_limit = setting_bytes(self.con, "max_temp_directory_size")
        self._spill_checked = time.monotonic()
        self._spill_lock = threading.Lock()
        threads = int(setting(self.con, "threads"))
        self.value_cap = value_caps.value_cap(self.memory_limit, threads)
        # an answer is Arrow here, ~10x that as Python rows and JSON on its way out
        self.result_cap = max(16 * MB, self.memory_limit // 16)
        # the watchdog's ticks read the disk again while a long statement spills (not only when
        # the next one starts)
        self.watchdog = Watchdog(max_growth=2 * self.memory_limit, on_tick=self._refresh_spill_cap)
        self._relay = MainThreadRelay()  # runs the main thread's statements (Ctrl-C)

    def close(self) -> None:
        self.watchdog.close()
        self._relay.close()
        with self.lock:
            for _, _, pinned in self._sources.values():
                if pinned is not None:
                    pinned.close()
            with self._pool_lock:
                idle, self._idle = self._idle, []
            for cursor in idle:
                cursor.con.close()
            self.con.close()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)

    # cursors ------------------------------------------------------------------------------
    @contextmanager
    def _checkout(self) -> Iterator[_Cursor]:
        with self._pool_lock:
            cursor = self._idle.pop() if self._idle else None
        if cursor is None:
            cursor = _Cursor(self.con.cursor())
        try:
            yield cursor
        except BaseException:  # a cursor that failed mid-way is not reused; DuckDB's own Ctrl-C
            cursor.con.interrupt()  # leaves the query running (and close() waiting): stop it
            cursor.con.close()
            raise
        with self._pool_lock:
            self._idle.append(cursor)

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for a short metadata question (tables of a source, a view's type)."""
        with self.swaps.shared(), self._checkout() as cursor:
            yield cursor.con

    # data sources -------------------------------------------------------------------------
    def source(self, name: str) -> DataSource | None:
        """The data source called `name` (attached on first use), None if there is none.
        A one-file source is checked at every use: its path must still name the file that
        was opened and checked (a swap reopens it, checking the new file)."""
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
            if cached is not None and cached[0] == version and \
                    (cached[2] is None or cached[2].same_file()):
                return cached[1]
            if cached is not None:
                self.forget(name)
            return self._attach(record, version, read_only=True)

    def _attach(self, record: DatasourceRecord, version: tuple[int, str], read_only: bool,
                alias: str | None = None) -> DataSource:
        """Open, check (the path policy, at each attach) and attach a stored source."""
        if self.policy is not None:
            self.policy.check_source(record.engine, record.parameters)
        if record.engine in self.engines:  # a source stored lazily (REST, no check_connection)
            normalize(record.engine, dict(record.parameters), self.engines)  # may be incomplete
        alias = alias or f"{ATTACH_PREFIX}{record.id}_{next(self._attaches)}"
        source = open_source(record, self.engines, alias)
        confine = getattr(source, "confine", None)  # a network source: the host policy
        if confine is not None and self.policy is not None:
            confine(self.policy.source_hosts, self.policy.source_connect_s)
        bound = getattr(source, "bound_statements", None)  # a server: it stops what it runs
        if bound is not None:
            bound(self.settings.statement_timeout)
        if not read_only:
            source.read_only = False  # type: ignore[attr-defined]
        pinned = self._pin_source(source)
        try:
            source.attach(self.con)
        except BaseException:
            if pinned is not None:
                pinned.close()
            raise
        self._sources[record.name.lower()] = (version, source, pinned)
        return source

    @contextmanager
    def writable(self, name: str) -> Iterator[DataSource]:
        """Source `name` attached read-write for one write, then read-only again.

        Why not read-write always: an attached DuckDB file is locked against every other
        process while it is open for writing (a second server on the same state, the user's
        own notebook). So a write re-attaches the source (checked against the path policy
        again, as any use is), runs, and detaches it; the next read attaches it read-only.
        Writes run one at a time (`_write_lock`), reads go on meanwhile."""
        with self._write_lock:
            with self.swaps.exclusive(), self.lock:  # no statement runs while it is swapped
                record = self.catalog.find_datasource(name)
                if record is None:
                    raise SqlError(f"Database {name} does not exist")
                held = self._sources.get(name.lower())
                alias = getattr(held[1], "alias", None) if held is not None else None
                self.forget(name)
                source = self._attach(record, (record.id, repr(sorted(record.parameters.items()))),
                                      read_only=False, alias=alias)
            try:
                yield source
            finally:
                with self.swaps.exclusive(), self.lock:  # read-only again at once: a statement
                    self.forget(name)                    # compiled meanwhile finds its catalog
                    record = self.catalog.find_datasource(name)
                    if record is not None:
                        try:
                            self._attach(record, (record.id, repr(sorted(record.parameters.items()))),
                                         read_only=True, alias=getattr(source, "alias", None))
                        except Exception:  # the next read attaches it and says why it cannot
                            pass

    def _pin_source(self, source: DataSource) -> Pinned | None:
        """Open a sqlite/duckdb source's file and check what was opened. SQLite reopens its
        file at every query: it is given the open file (`/proc/self/fd/N`, whose links it
        resolves to the same file, WAL included). A DuckDB file is opened once by ATTACH:
        it gets the checked real path."""
        if source.engine not in PINNED_ENGINES or self.policy is None:
            return None
        path = getattr(source, "path", None)
        if not isinstance(path, str):
            return None
        pinned = self.policy.pin(path, f"{source.engine} data source file")
        source.path = pinned.read_path if source.engine == "sqlite" else pinned.real  # type: ignore[attr-defined]
        return pinned

    def forget(self, name: str) -> None:
        """Detach a dropped (or replaced) source."""
        with self.lock:
            cached = self._sources.pop(name.lower(), None)
            if cached is not None:
                try:
                    cached[1].detach(self.con)
                except duckdb.Error:
                    pass
                if cached[2] is not None:
                    cached[2].close()

    # FROM items ---------------------------------------------------------------------------
    def from_item(self, scan: Scan, compiled: Compiled) -> exp.Expression:
        """The FROM item reading `scan`; frames and files it needs go into `compiled`."""
        if isinstance(scan, NativeTable):
            if self.policy is not None and self.policy.confined:
                self._refuse_duckdb_view(scan)
            return exp.table_(scan.table, db=scan.schema, catalog=scan.catalog, quoted=True)
        if isinstance(scan, FileScan):  # opened and checked at each run (`_bind`)
            token = FILE_TOKEN.format(len(compiled.files))
            compiled.files.append(scan)
            call = exp.Anonymous(this=scan.reader, expressions=[exp.Literal.string(token)])
            if scan.stored:  # its own columns only: read_parquet adds virtual ones (filename,
                # file_row_number, ...), and a `filename` of another table joined was then
                # "ambiguous"; a stored table's SQL must see what its frame had
                return exp.Subquery(this=exp.select("*").from_(exp.Table(this=call)))
            return exp.Table(this=call)
        return exp.table_(self._frame_name(scan, compiled), quoted=True)

    def _refuse_duckdb_view(self, scan: NativeTable) -> None:
        """A view of an attached DuckDB file runs its own SQL here, where nothing checks
        it: `CREATE VIEW v AS SELECT * FROM read_csv('/anywhere.csv')` in a file under an
        --allow-path root would read past the roots (and the data directory). Confined,
        such views are refused. (SQLite and PostgreSQL views run in their own database.)"""
        with self.cursor() as con:  # the type first: listing views would also list a PostgreSQL's
            kind = con.execute("SELECT type FROM duckdb_databases() WHERE database_name = ?",
                               [scan.catalog]).fetchone()
            if kind is None or kind[0] != "duckdb":
                return
            view = con.execute(
                "SELECT 1 FROM duckdb_views() WHERE database_name = ? AND schema_name = ? "
                "AND view_name = ?", [scan.catalog, scan.schema, scan.table]).fetchone()
        if view is not None:
            raise SqlError(f"{scan.table} is a view of a DuckDB file; this server reads only "
                           "their tables (a view may read files outside --allow-path)")

    def _frame_name(self, scan: FrameScan, compiled: Compiled) -> str:
        """The name a frame is read under. A cached frame keeps one name while its rows do
        not change (cursors register it once and keep up to `SLOT_MAX_BYTES` of such frames,
        the least recently used going first: each pooled cursor kept every table it ever
        read); any other is a temp of this statement."""
        if scan.cache_key is not None and getattr(scan.frame, "nbytes", 0) <= SLOT_MAX_BYTES:
            slot = scan.cache_key[:2]
            with self.lock:
                known = self._views.get(slot)
                if known is not None and known[0] == scan.cache_key:
                    name = known[1]
                else:
                    name = f"__kbsql_{scan.cache_key[0]}_{next(self._counter)}"
                    self._views[slot] = (scan.cache_key, name)
            compiled.frames.append(FrameUse(name, slot, scan.frame))
            return name
        name = f"__kbsql_tmp_{next(self._counter)}"
        compiled.frames.append(FrameUse(name, None, scan.frame))
        compiled.cacheable = False
        return name

    # running ------------------------------------------------------------------------------
    def run(self, plan: Compiled) -> pa.Table:
        """Execute one compiled SELECT on a cursor of its own; the answer as Arrow."""
        control = CURRENT.get() or Control()
        self._refresh_spill_cap()
        with self.swaps.shared_if(ATTACH_PREFIX in plan.sql), self._checkout() as cursor:
            return self._execute(cursor, plan, control, "")

    def _refresh_spill_cap(self) -> None:
        """The default spill cap follows the disk's free space, read again at most every
        SPILL_REFRESH_S seconds, by a statement as it starts or the watchdog while statements
        run (a cursor, a statfs, a directory listing and two settings read: ~0.4 ms at load 6.5)."""
        now = time.monotonic()
        if now < self._spill_checked + SPILL_REFRESH_S or not self._spill_lock.acquire(blocking=False):
            return
        try:
            self._spill_checked = now
            con = self.con.cursor()  # the database's setting; self.con itself serves attaches
            try:
                cap = spill_refresh(con, self.settings, self._temp_dir)
            finally:
                con.close()
            if cap is not None:
                self.spill_limit = cap
        finally:
            self._spill_lock.release()

    def describe(self, plan: Compiled) -> pa.Table:
        """Column names and DuckDB types of a compiled SELECT."""
        control = CURRENT.get() or Control()
        with self.swaps.shared_if(ATTACH_PREFIX in plan.sql), self._checkout() as cursor:
            table = self._execute(cursor, plan, control, "DESCRIBE ")
        return table.select(["column_name", "column_type"])

    def _execute(self, cursor: _Cursor, plan: Compiled, control: Control, prefix: str) -> pa.Table:
        pinned: list[Pinned] = []
        temps: list[str] = []
        try:
            sql = self._bind(cursor, plan, pinned, temps)
            control.check()
            long_statements.started()  # DuckDB lets go of the interpreter: the next long one may compile
            with control.stoppable(cursor.con.interrupt), self.watchdog.watching(control):
                if threading.current_thread() is threading.main_thread():
                    return self._relay.run(self._fetch, cursor.con, prefix + sql, control, plan.query)
                return self._fetch(cursor.con, prefix + sql, control, plan.query)
        except duckdb.Error as exc:
            raise readable(exc, control, pinned, self.memory_limit, self.spill_limit, self.settings) from None
        except RuntimeError as exc:  # Ctrl-C seen by DuckDB itself: it stopped the query
            if "interrupted" in str(exc).lower():
                raise KeyboardInterrupt from None
            raise
        finally:
            for name in temps:
                try:
                    cursor.con.unregister(name)
                except duckdb.Error:
                    pass
            for item in pinned:
                item.close()

    def _bind(self, cursor: _Cursor, plan: Compiled, pinned: list[Pinned], temps: list[str]) -> str:
        """Register the plan's frames on `cursor`, open and check its files; the SQL to run."""
        for use in plan.frames:
            if use.slot is None:
                cursor.con.register(use.name, use.frame)
                temps.append(use.name)
                continue
            held = cursor.slots.pop(use.slot, None)
            if held is not None and held[0] != use.name:
                _unregister(cursor, held[0])
                held = None
            if held is None:
                cursor.con.register(use.name, use.frame)
            cursor.slots[use.slot] = (use.name, use.frame)  # the most recently used last
        in_use = {use.slot for use in plan.frames}
        while sum(getattr(f, "nbytes", 0) for _, f in cursor.slots.values()) > SLOT_MAX_BYTES:
            oldest = next((slot for slot in cursor.slots if slot not in in_use), None)
            if oldest is None:
                break
            _unregister(cursor, cursor.slots.pop(oldest)[0])
        sql = plan.sql
        for i, scan in enumerate(plan.files):
            path = scan.path
            item = pin_stored(path) if scan.stored else \
                self.policy.pin(path, "file") if self.policy is not None else None
            if item is not None:
                pinned.append(item)
                path = item.read_path
            sql = sql.replace(f"'{FILE_TOKEN.format(i)}'", f"'{_quote(path)}'")
        return sql

    def _fetch(self, con: duckdb.DuckDBPyConnection, sql: str, control: Control,
               query: bool = True) -> pa.Table:
        return fetch(con, sql, control, query, self.result_cap, self.settings.limit_note)


def _quote(text: str) -> str:
    return text.replace("'", "''")
