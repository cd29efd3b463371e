"""The built-in data source `df`: pandas DataFrames registered from Python.

`client.register("sales", frame)` (embedded) stores a snapshot of the frame as
`<data_dir>/frames/sales.parquet` and makes it the table `df.sales`:

    client.register("sales", frame)
    client.query("SELECT region, sum(amount) FROM df.sales GROUP BY region")

Why a snapshot and Parquet: a later change to the caller's frame must not change a table
under a running query, and the table must survive a restart and be visible to a
`kbsql serve` on the same data directory. Registering a name again replaces the table
(atomically: a reader sees the old file or the new one); `unregister` removes it.

Why DuckDB reads the file itself (a stored `FileScan`) rather than an Arrow table kept
here: nothing is held in memory between statements. Each table kept after its upload held
~1.4x its CSV's size for good: twenty 38 MB uploads to a live server took it from 72 MB
to 1.16 GB of memory, and one user's uploads could so exhaust the server for everyone.
DuckDB reads only the columns and row groups a statement needs, under its memory limit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from kbsql.engine.datasources.scans import FileScan, FrameScan, Scan, match_name
from kbsql.engine.faults import check_room, storage_fault
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
    if not isinstance(name, str) or not _NAME.fullmatch(name):  # match's `$` lets a final \n by
        raise BadRequest(f"Table name {clipped(repr(name))} is not valid: use letters, digits and _ "
                         "(starting with a letter or _, at most 128)", title="Invalid name")
    return name


class FrameStore:
    """Registered frames: Parquet files on disk, read by DuckDB at each statement."""

    name = FRAMES_SOURCE
    engine = "dataframe"

    def __init__(self, data_dir: Path, folder: str = "frames", reserve: int = 0):
        self.folder = data_dir / folder  # `frames`, or `uploads` for the files' pages (upload_store.py)
        self.reserve = reserve  # bytes a stored table must leave free on the disk (disk_reserve_mb)
        self._spans: dict[str, tuple[int, bool]] = {}  # path -> (version, holds a duration)

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.parquet"

    def register(self, name: str, frame: Any) -> int:
        """Store `frame` as table `df.<name>`; returns its row count."""
        name = frame_name(name)
        table = to_arrow(frame)
        self.folder.mkdir(parents=True, exist_ok=True)
        # its size in memory stands for its file's (Parquet is mostly smaller); checked before
        # the table it replaces is touched, so a refusal loses nothing
        check_room(self.folder, table.nbytes, self.reserve, "this table")
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
        return table.num_rows

    def unregister(self, name: str) -> bool:
        found = match_name(name, self.tables())
        if found is None:
            return False
        self._path(found).unlink(missing_ok=True)
        self._spans.pop(str(self._path(found)), None)
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

    def _find(self, name: str) -> Path | None:
        """The file of table `name` (names are case-insensitive), None if there is none. A
        name that could not be registered is no table: taken as a file name, df.`/x/y` or
        df.`../../y` read any Parquet file the server could, past the path policy."""
        if not _NAME.fullmatch(name):
            return None
        path = self._path(name)
        if path.is_file():
            return path
        found = match_name(name, self.tables())
        return None if found is None else self._path(found)

    def exists(self, name: str) -> bool:
        """Whether `df.<name>` is a table, without reading it (CREATE TABLE df.x checks)."""
        return self._find(name) is not None

    def table(self, name: str) -> pa.Table | None:
        """The Arrow table of `name`, read from its file (an INSERT's merge, a file's pages)."""
        path = self._find(name)
        return None if path is None else _read(path)

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        path = self._find(parts[0]) if len(parts) == 1 else None
        if path is None:
            return None
        try:
            stat = path.stat()
        except FileNotFoundError:  # unregistered meanwhile
            return None
        # a replace is a new file (os.replace of a temp): its inode tells it even within one
        # tick of a coarse mtime
        version = hash((stat.st_ino, stat.st_mtime_ns))
        if self._holds_duration(path, version):
            table = _read(path)
            return None if table is None else FrameScan(table, cache_key=("df", path.stem.lower(), version))
        return FileScan("read_parquet", str(path), stored=True, version=version)

    def _holds_duration(self, path: Path, version: int) -> bool:
        """Whether the file holds a duration (a pandas timedelta): DuckDB's Parquet reader
        reads one as the bare integer of its unit (5 for 5 seconds), where Arrow's, which
        reads the schema pyarrow stored beside it, gives the INTERVAL the frame held. Such a
        table is read through Arrow, as before 91e8551; the answer is kept per file version,
        so the footer is read once."""
        known = self._spans.get(str(path))
        if known is not None and known[0] == version:
            return known[1]
        try:
            schema = _parquet().read_schema(path)
        except (OSError, pa.ArrowInvalid):
            return False  # gone or unreadable: DuckDB's read says so
        holds = any(_has_duration(field.type) for field in schema)
        self._spans[str(path)] = (version, holds)
        return holds


def _read(path: Path) -> pa.Table | None:
    """A stored table's file as Arrow; None when it was unregistered meanwhile."""
    try:
        return _parquet().read_table(path)
    except FileNotFoundError:
        return None


def _has_duration(kind: pa.DataType) -> bool:
    nested = (kind.field(i).type for i in range(kind.num_fields))  # lists, structs, maps
    return pa.types.is_duration(kind) or any(_has_duration(inner) for inner in nested)
