"""SQLite files in the data directory: created private, opened read-only when the directory
cannot be written.

The catalog (catalog.py) and the local knowledge-base store (knowledge/store.py) keep their
state in SQLite files side by side; both need the same two guarantees (keys stay the
owner's whatever the umask; a read-only mount is read as it is, never as an older state), so
they live here once. `kbsql.engine.catalog` re-exports the names for existing importers.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from kbsql.interface.errors import PermissionDenied

__all__ = ["ReadOnlyData", "open_read_only", "private_file"]


def private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist: SQLite then gives its -wal
    and -shm files the same mode, so stored keys stay the owner's whatever the umask."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass


class ReadOnlyData(PermissionDenied):
    """403: the data directory cannot be written (a read-only mount): reads only."""

    status = 403
    default_title = "Read-only data directory"

    def __init__(self) -> None:
        super().__init__("The data directory cannot be written: this engine serves reads only "
                         "(queries, searches, agent answers)")


def open_read_only(path: Path) -> sqlite3.Connection:
    """A SQLite file opened for reading only. In a directory that can be written (only the
    reader is read-only: `kbsql migrate`'s source) `mode=ro`, which reads the write-ahead log
    too (it needs a -shm file beside it). In one that cannot, `immutable` (SQLite then needs
    no -shm file, which it could not create), refused when a write-ahead log holds changes
    not merged into the file: reading without them would answer an older state."""
    if path.exists() and os.access(path.parent, os.W_OK):
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                               check_same_thread=False, isolation_level=None)
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise sqlite3.OperationalError(
            f"{path.name} has changes in {wal.name} that a read-only directory cannot merge; "
            "open the data directory once with write access")
    if not path.exists():
        raise sqlite3.OperationalError(f"{path} does not exist and the directory is read-only")
    return sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True,
                           check_same_thread=False, isolation_level=None)
