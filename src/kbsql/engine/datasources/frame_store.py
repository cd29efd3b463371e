"""The built-in data source `df`: pandas DataFrames registered from Python.

`client.register("sales", frame)` (embedded) stores a snapshot of the frame as
`<data_dir>/frames/sales.parquet` and makes it the table `df.sales`:

    client.register("sales", frame)
    client.query("SELECT region, sum(amount) FROM df.sales GROUP BY region")

Why a snapshot and Parquet: a later change to the caller's frame must not change a table
under a running query, and the table must survive a restart and be visible to a
`kbsql serve` on the same data directory. The file's mtime is checked on each lookup, so
another process registering the same name is seen without a restart. Registering a name
again replaces the table; `unregister` removes it.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from kbsql.engine.datasources.scans import FrameScan, Scan, match_name
from kbsql.engine.faults import storage_fault
from kbsql.interface.errors import BadRequest, clipped
from kbsql.interface.frames import to_arrow

FRAMES_SOURCE = "df"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _parquet() -> Any:
    """pyarrow.parquet, imported when a frame is first stored or read (~5 MB a server that
    never sees a DataFrame does not need)."""
    import pyarrow.parquet

    return pyarrow.parquet


def frame_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise BadRequest(f"Table name {clipped(repr(name))} is not valid: use letters, digits and _ "
                         "(starting with a letter or _, at most 128)", title="Invalid name")
    return name


class FrameStore:
    """Registered frames: Parquet files on disk, Arrow tables in memory."""

    name = FRAMES_SOURCE
    engine = "dataframe"

    def __init__(self, data_dir: Path, folder: str = "frames"):
        self.folder = data_dir / folder  # `frames`, or `uploads` for the files' pages (upload_store.py)
        self._lock = threading.Lock()
        self._loaded: dict[str, tuple[float, pa.Table]] = {}

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.parquet"

    def register(self, name: str, frame: Any) -> int:
        """Store `frame` as table `df.<name>`; returns its row count."""
        name = frame_name(name)
        table = to_arrow(frame)
        self.folder.mkdir(parents=True, exist_ok=True)
        existing = match_name(name, self.tables())
        if existing is not None and existing != name:  # names are case-insensitive
            self._path(existing).unlink(missing_ok=True)
        tmp = self.folder / f".{name}.{os.getpid()}.tmp"
        try:
            _parquet().write_table(table, tmp)
            os.replace(tmp, self._path(name))  # atomic: a reader sees the old or the new file
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            fault = storage_fault(exc, f"the table df.{name}")
            if fault is not None:
                raise fault from exc
            raise
        with self._lock:
            self._loaded[name] = (self._path(name).stat().st_mtime, table)
        return table.num_rows

    def unregister(self, name: str) -> bool:
        found = match_name(name, self.tables())
        if found is None:
            return False
        self._path(found).unlink(missing_ok=True)
        with self._lock:
            self._loaded.pop(found, None)
        return True

    def close(self) -> None:
        """Nothing is held open (frames_pg's subclass holds a connection)."""

    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def tables(self, con: Any = None) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.parquet"))

    def table(self, name: str) -> pa.Table | None:
        """The Arrow table of `name`, reloaded when its file changed."""
        with self._lock:
            cached = self._loaded.get(name)
        path = self._path(name)
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            found = match_name(name, self.tables())
            if found is None or found == name:
                return None
            return self.table(found)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        table = _parquet().read_table(path)
        with self._lock:
            self._loaded[name] = (mtime, table)
        return table

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        if len(parts) != 1:
            return None
        name = parts[0]
        table = self.table(name)
        if table is None:
            return None
        mtime = self._loaded.get(name, (0.0,))[0]
        return FrameScan(table, cache_key=("df", name.lower(), mtime, id(table)))
