"""Storage faults in words: a full disk and a damaged knowledge-base file as typed errors.

Why: both used to reach the user as `500 Internal server error: DatabaseError: database
disk image is malformed`, which says neither what broke nor what to do. A full disk is an
`InsufficientStorage` (507; the write in progress was rolled back, nothing acknowledged is
lost); a damaged chunk store is a `StoreDamaged` naming the knowledge base and the way out.
"""

from __future__ import annotations

import errno
import functools
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kbsql.interface.errors import InsufficientStorage, ServiceError, StoreDamaged

SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_NOTADB = 26
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")
_DAMAGED_WORDS = ("malformed", "file is not a database", "database disk image")

F = TypeVar("F", bound=Callable[..., Any])


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the disk (or the user's quota) is full."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    if isinstance(exc, sqlite3.DatabaseError) and getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL:
        return True
    return isinstance(exc, OSError | sqlite3.DatabaseError) and says_disk_full(str(exc))


def says_disk_full(message: str) -> bool:
    """Whether an error's text says the disk (or the quota) is full: DuckDB's errors (a write
    into a data source's file or its SQLite file) and PostgreSQL's carry no errno."""
    return any(w in message.lower() for w in _FULL_WORDS)


def damaged(exc: BaseException) -> bool:
    """Whether `exc` is SQLite finding a file damaged (or not a database at all)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code in (SQLITE_CORRUPT, SQLITE_NOTADB) or any(w in str(exc).lower() for w in _DAMAGED_WORDS)


def full_error(what: str) -> InsufficientStorage:
    return InsufficientStorage(f"The disk is full: {what} was not stored (nothing stored before "
                               "is lost). Free some space on the server and send it again")


def check_room(place: Path, needed: int, reserve: int, what: str) -> None:
    """Refuse a write of about `needed` bytes under `place` that would leave less than
    `reserve` free on its disk (the `disk_reserve_mb` setting; 0: no check): a disk filled by
    one user's uploads or inserts fails every other write (inserts, the catalog, the query
    log) with a 507, so the write that would fill it is refused first, before any of it is
    written, in the same kind of error."""
    if reserve <= 0:
        return
    free = shutil.disk_usage(place).free
    if free - needed < reserve:
        raise InsufficientStorage(
            f"Storing {what} (~{_mb(needed)} MB) would leave less than {_mb(reserve)} MB free on "
            f"the data directory's disk ({_mb(free)} MB free; the setting disk_reserve_mb: kbsql serve "
            "--disk-reserve-mb, or connect(settings={'disk_reserve_mb': ...}) embedded): nothing was "
            "stored")


def _mb(size: int) -> int:
    return max(1, round(size / 2**20))


def storage_fault(exc: BaseException, what: str) -> ServiceError | None:
    """The typed error for a full disk while writing `what`, None for anything else."""
    return full_error(what) if disk_full(exc) else None


def kb_faults(method: F) -> F:
    """For a knowledge service method taking the knowledge base's record first: a full disk
    or a damaged chunk store becomes its typed error, naming the knowledge base."""

    @functools.wraps(method)
    def wrapped(self: Any, record: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, record, *args, **kwargs)
        except ServiceError:
            raise
        except Exception as exc:
            name = f"{record.project_name}.{record.name}"
            if disk_full(exc):
                raise full_error(f"the change to knowledge base {name}") from exc
            if damaged(exc):
                raise StoreDamaged(
                    f"The stored chunks of knowledge base {name} are damaged ({exc}). Restore its "
                    f"folder knowledge_bases/{record.id} in the server's data directory from a "
                    f"backup, or drop it (DROP KNOWLEDGE_BASE {name}) and insert its rows again; "
                    "other knowledge bases are not affected") from exc
            raise

    return wrapped  # type: ignore[return-value]
