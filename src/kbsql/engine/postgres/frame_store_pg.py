"""Registered DataFrames (`df.<name>`) in the shared PostgreSQL catalog.

The same interface as `FrameStore` (frames.py), for servers started with `--catalog URL`:
a frame registered through one server is a table for all of them. Each frame is one row
of `kbsql.frames` (Parquet bytes); its `version` changes on every register, so a server
re-reads a frame only when another one replaced it (one small query per lookup).

The tables read are kept for the next statement up to `CACHE_BYTES` in all, the least
recently used going first: kept without a bound, every table ever read stayed in memory
(a local store keeps none: DuckDB reads its Parquet files, frame_store.py).
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kbsql.engine.catalog import now
from kbsql.engine.datasources.frame_store import FrameStore, frame_name
from kbsql.engine.datasources.scans import FrameScan, Scan
from kbsql.engine.postgres.catalog_pg import SCHEMA, PgConnection
from kbsql.interface.frames import to_arrow

CACHE_BYTES = 256 * 1024 * 1024


class PgFrameStore(FrameStore):
    """A FrameStore whose frames live in PostgreSQL instead of the data directory."""

    def __init__(self, url: str, table: str = "frames"):  # no folder: nothing of it on local disk
        self.url = url
        self.rows = f"{SCHEMA}.{table}"  # `frames`, or `uploads` for the files' pages (upload_store.py)
        self._lock = threading.Lock()
        self._conn = PgConnection(url)  # reconnects after a restart; 503 while PostgreSQL is away
        self._versions: OrderedDict[str, tuple[int, pa.Table]] = OrderedDict()

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        return self._conn.execute(sql, args)

    def register(self, name: str, frame: Any) -> int:
        name = frame_name(name)
        table = to_arrow(frame)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        with self._lock:
            self._execute("BEGIN")
            try:
                self._execute(f"DELETE FROM {self.rows} WHERE lower(name) = lower(%s)", (name,))
                self._execute(f"INSERT INTO {self.rows} (name, data, created_at) VALUES (%s, %s, %s)",
                              (name, buffer.getvalue(), now()))
            except BaseException:
                self._execute("ROLLBACK")
                raise
            self._execute("COMMIT")
        return table.num_rows

    def unregister(self, name: str) -> bool:
        with self._lock:
            cur = self._execute(f"DELETE FROM {self.rows} WHERE lower(name) = lower(%s)", (name,))
            self._versions.pop(name.lower(), None)
            return cur.rowcount > 0

    def tables(self, con: Any = None) -> list[str]:
        with self._lock:
            return [r["name"] for r in self._execute(f"SELECT name FROM {self.rows} ORDER BY name")]

    def exists(self, name: str) -> bool:
        with self._lock:
            return self._execute(f"SELECT 1 FROM {self.rows} WHERE lower(name) = %s",
                                 (name.lower(),)).fetchone() is not None

    def table(self, name: str) -> pa.Table | None:
        found = self._versioned(name)
        return None if found is None else found[1]

    def _versioned(self, name: str) -> tuple[int, pa.Table] | None:
        key = name.lower()
        with self._lock:
            row = self._execute(f"SELECT version FROM {self.rows} WHERE lower(name) = %s",
                                (key,)).fetchone()
            if row is None:
                self._versions.pop(key, None)
                return None
            cached = self._versions.get(key)
            if cached is not None and cached[0] == row["version"]:
                self._versions.move_to_end(key)
                return cached
            data = self._execute(f"SELECT version, data FROM {self.rows} WHERE lower(name) = %s",
                                 (key,)).fetchone()
            if data is None:
                return None
            loaded = (int(data["version"]), pq.read_table(io.BytesIO(bytes(data["data"]))))
            self._versions.pop(key, None)
            if loaded[1].nbytes <= CACHE_BYTES:
                self._versions[key] = loaded
                while sum(t.nbytes for _, t in self._versions.values()) > CACHE_BYTES:
                    self._versions.popitem(last=False)
            return loaded

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        if len(parts) != 1:
            return None
        found = self._versioned(parts[0])
        if found is None:
            return None
        version, table = found
        return FrameScan(table, cache_key=("df", parts[0].lower(), version, id(table)))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
