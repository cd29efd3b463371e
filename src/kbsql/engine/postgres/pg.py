"""PostgreSQL plumbing shared by pgvector storage (postgres/pgvector.py) and the shared
catalog (catalog_pg.py): the lazy psycopg import, connection pools, advisory-lock keys and
the one error for an unreachable server.

psycopg 3 is the optional `postgres` extra: a notebook on the local store never loads it.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from kbsql.interface.errors import BadRequest, Unavailable
from kbsql.interface.secrets import mask_connection_string


def psycopg_modules() -> tuple[Any, Any, Any]:
    """(psycopg, psycopg.sql, psycopg_pool), or a one-line error saying what to install: the
    extra of the checkout kbsql is installed from, as README does it (`pip install
    'kbsql[postgres]'` asked PyPI for a project of that name, which is not this one)."""
    try:
        import psycopg
        import psycopg_pool
        from psycopg import sql
    except ImportError as exc:
        raise BadRequest("PostgreSQL storage needs psycopg 3, kbsql's postgres extra: "
                         ".venv/bin/pip install -e '.[postgres]' in kbsql's folder",
                         title="Missing dependency") from exc
    return psycopg, sql, psycopg_pool


class StorageUnavailable(Unavailable):
    """PostgreSQL (a KB's storage or the catalog) cannot be reached: 503 with Retry-After,
    one line (host:port/database, never the password)."""

    def __init__(self, detail: str):
        super().__init__(detail, title="Storage unavailable")


def connection_errors() -> tuple[type[Exception], ...]:
    """What psycopg raises when the server is gone: a restart (AdminShutdown, "the database
    system is starting up"), a dropped or closed connection, a pool that has none to give.
    SQL errors (a bad statement, a constraint) are not among them."""
    psycopg, _, pool_mod = psycopg_modules()
    return psycopg.OperationalError, psycopg.InterfaceError, pool_mod.PoolTimeout


# connection pools, shared by every knowledge base (and the catalog) on one server --------
POOL_TIMEOUT = 10.0  # seconds a request waits for a connection (PostgreSQL restarting) before its 503
_POOLS: dict[str, tuple[Any, int]] = {}
_POOLS_LOCK = threading.Lock()


def conninfo_of(settings: dict[str, str]) -> str:
    psycopg, _, _ = psycopg_modules()
    return psycopg.conninfo.make_conninfo(**settings)


def where_of(settings: dict[str, str]) -> str:
    """host:port/database, for error messages (never the password)."""
    return f"{settings.get('host', '')}:{settings.get('port', 5432)}/{settings.get('dbname', '')}"


def acquire_pool(settings: dict[str, str]) -> Any:
    """The process's pool for these settings (made, and checked to connect, on first use)."""
    psycopg, _, pool_mod = psycopg_modules()
    key = conninfo_of(settings)
    with _POOLS_LOCK:
        if key in _POOLS:
            pool, refs = _POOLS[key]
            _POOLS[key] = (pool, refs + 1)
            return pool
        try:  # fail now with one clear line, not after the pool's 30 s of retries
            psycopg.connect(key, connect_timeout=int(settings.get("connect_timeout", 5))).close()
        except psycopg.Error as exc:
            raise StorageUnavailable(f"Cannot connect to PostgreSQL at {where_of(settings)}: "
                                     f"{first_line(exc)}") from None
        # `check`: a connection is tested (an empty query) as it leaves the pool, so after a
        # PostgreSQL restart no request gets one the restart broke; the pool reconnects by
        # itself, and a request waits up to `timeout` for PostgreSQL to come back
        pool = pool_mod.ConnectionPool(key, min_size=1, max_size=10, timeout=POOL_TIMEOUT, open=True,
                                       kwargs={"autocommit": True},
                                       check=pool_mod.ConnectionPool.check_connection,
                                       name=f"kbsql-{where_of(settings)}")
        _POOLS[key] = (pool, 1)
        return pool


def release_pool(pool: Any) -> None:
    with _POOLS_LOCK:
        for key, (p, refs) in list(_POOLS.items()):
            if p is pool:
                if refs <= 1:
                    del _POOLS[key]
                    pool.close()
                else:
                    _POOLS[key] = (p, refs - 1)
                return


def first_line(exc: Exception) -> str:
    """The first line of a driver error, any connection string in it masked (libpq echoes
    a URI it cannot parse, password and all)."""
    return mask_connection_string((str(exc).strip().splitlines() or [type(exc).__name__])[0])


def lock_key(text: str) -> int:
    """A signed 64-bit advisory-lock key for a name."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)
