"""The SQL engine's bounds: DuckDB's memory limit, where it spills and how much, and the
value-cap macros (`value_caps`), set once on the database (every cursor shares them).

DuckDB's allocator gives memory back to the system from a background thread: without it
a server that had run a big statement and then sat idle kept the memory (1.1 GB held after
a refused 512 MB aggregate, given back within 5 s with it). The allocator is one per
process and a database opened without the setting turns the thread off for all: every
database kbsql opens sets it (the MySQL door's metadata database too).

The spill folder is `<data dir>/tmp/duckdb-<pid>`: one per process, since several
processes (a notebook and `kbsql serve`) may share a data directory and DuckDB names its
temp files alike; a folder left by a process that is gone is removed at the next start.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from kbsql.engine.sql.tables import value_caps

MB = 1024 * 1024


@dataclass(frozen=True)
class DuckSettings:
    """Bounds of the SQL engine. None: DuckDB's own default (memory: 80% of RAM)."""

    memory_limit_mb: int | None = None
    spill_mb: int | None = None
    temp_dir: Path | None = None
    threads: int | None = None
    statement_timeout: float | None = None
    """Seconds a statement may run (None or 0: no limit); a request may ask for less."""
    limit_note: str = "sql_memory_mb in config.json"
    """Where the user sets the memory limit (the server names its flag)."""
    timeout_note: str = "statement_timeout in config.json"
    spill_note: str = "sql_spill_mb in config.json"
    disk_reserve_mb: int = 0
    """Free space the default spill cap leaves on the disk where spills go (disk_reserve_mb)."""
    read_only_sources: bool = False
    """Connected data sources are never written (source_writes refuses in one line)."""
    read_only_note: str = "read_only_sources in config.json"
    checks: value_caps.CheckBounds = field(default_factory=value_caps.CheckBounds)
    """The value caps' other bounds: nodes their checks may add, an edit distance's pairs."""
    long_statement_tokens: int = 1000
    """A statement of more tokens is parsed and compiled in one of `long_statement_slots`
    (parse/long_statements.py); 0: none is."""
    long_statement_slots: int = 1
    long_statement_note: str = "long_statement_slots in config.json"


def configure(con: duckdb.DuckDBPyConnection, s: DuckSettings) -> Path | None:
    """Memory limit, spill folder and its cap, value-cap macros (database-wide); the
    spill folder of this process."""
    con.execute("SET enable_external_file_cache = false")  # keyed by path: /proc/self/fd/N is reused
    con.execute("SET allocator_background_threads = true")  # else freed memory stays held
    if s.memory_limit_mb:
        con.execute(f"SET memory_limit = '{int(s.memory_limit_mb)}MiB'")  # MB would be 10^6
    if s.threads:
        con.execute(f"SET threads = {int(s.threads)}")
    temp: Path | None = None
    if s.temp_dir is not None:
        temp = s.temp_dir / f"duckdb-{os.getpid()}"  # one per process: servers may share a data dir
        _remove_stale(s.temp_dir)
        s.temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # DuckDB makes only the leaf
        con.execute(f"SET temp_directory = '{_quote(str(temp))}'")
    con.execute(f"SET max_temp_directory_size = '{_spill_bytes(con, s, temp) // MB}MiB'")
    for statement in value_caps.MACROS.split(";"):
        if statement.strip():
            con.execute(statement)
    return temp


def _spill_bytes(con: duckdb.DuckDBPyConnection, s: DuckSettings, temp: Path | None) -> int:
    """The spill cap: as set, else 4x the memory limit but at most a quarter of the
    free space where spills go (DuckDB's own default is 90% of it), and no more than leaves
    `disk_reserve_mb` free: one sort spilled 200 MB into a disk an upload of 1 MB was refused
    on, and a disk filled by a spill fails every user's writes. The space DuckDB's own spill
    files hold counts as room (they are its to reuse); `spill_refresh` reads it again as the
    disk fills."""
    if s.spill_mb is not None:
        return int(s.spill_mb) * MB
    where = temp.parent if temp is not None else Path.cwd()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free + _spilled(temp)
    except OSError:
        free = 1 << 40
    room = free - s.disk_reserve_mb * MB if s.disk_reserve_mb > 0 else free
    return max(MB, min(4 * setting_bytes(con, "memory_limit"), free // 4, room))


def _spilled(temp: Path | None) -> int:
    """Bytes in this process's spill folder (DuckDB's temp files), 0 when there is none."""
    if temp is None:
        return 0
    try:
        return sum(entry.stat().st_blocks * 512 for entry in os.scandir(temp) if entry.is_file())
    except OSError:
        return 0


def spill_refresh(con: duckdb.DuckDBPyConnection, s: DuckSettings, temp: Path | None) -> int | None:
    """The default spill cap read again from the disk's free space now (an upload, another
    process or a log may have filled it since the engine opened, when it was first read: a
    sort could then spill into the reserve every user's writes need); the new cap in bytes,
    or None when it is set (`spill_mb`) or unchanged. DuckDB refuses a cap below what its
    spill files hold (a sort in flight as the disk filled): the cap is then what they hold,
    so the spill grows no further, and the statement that read it is not failed by
    DuckDB's 'failed to adjust the max_temp_directory_size'."""
    if s.spill_mb is not None:
        return None
    cap = _spill_bytes(con, s, temp)
    if cap // MB == setting_bytes(con, "max_temp_directory_size") // MB:
        return None
    try:
        con.execute(f"SET max_temp_directory_size = '{cap // MB}MiB'")
    except duckdb.OutOfMemoryException:
        row = con.execute("SELECT coalesce(sum(size), 0) FROM duckdb_temporary_files()").fetchone()
        held = -(-int(row[0] if row else 0) // MB) * MB  # rounded up to the MiB the setting takes
        if held <= cap:
            return None
        try:
            con.execute(f"SET max_temp_directory_size = '{held // MB}MiB'")
        except duckdb.OutOfMemoryException:
            return None  # it grew meanwhile: read again at the next refresh
        return held
    return cap


def setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    row = con.execute(f"SELECT current_setting('{name}')").fetchone()
    return str(row[0]) if row else ""


def setting_bytes(con: duckdb.DuckDBPyConnection, name: str) -> int:
    return parse_size(setting(con, name))


def parse_size(text: str) -> int:
    """Bytes of a DuckDB size setting such as '19.0 GiB' or '256.0 MiB'."""
    units = {"b": 1, "bytes": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2,
             "gb": 1000**3, "gib": 1024**3, "tb": 1000**4, "tib": 1024**4}
    number, _, unit = text.strip().partition(" ")
    try:
        return int(float(number) * units.get(unit.strip().lower() or "b", 1))
    except ValueError:
        return 1 << 40


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _remove_stale(folder: Path) -> None:
    """Spill folders of processes that are gone (killed before they could remove theirs)."""
    if not folder.is_dir():
        return
    for path in folder.glob("duckdb-*"):
        try:
            pid = int(path.name.split("-", 1)[1])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass
