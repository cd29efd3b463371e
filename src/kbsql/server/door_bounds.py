"""What one connection may make the server hold, on both doors, before and after it logs in.

Why: every connection costs a file descriptor, and the process has one limit for all of
them (1,024 on many machines), shared by HTTP, MySQL, the data files and the models. 1,100
connections that never finish a request head or a MySQL login would use it up, and nobody,
an authenticated colleague included, could connect. So each door keeps at most
`max_pending` connections that have not yet shown a complete request head (HTTP) or logged
in (MySQL); one more closes the oldest of them, which a real client (whose head or login
takes milliseconds) never is. Together both doors' caps stay below a quarter of the
descriptor limit each, so there is always room for the connections that did get in; and
each door's listen backlog is its cap, since asyncio accepts a whole backlog's worth of
connections in one go before the cap can close any (a burst of 2,048 would pass it).

After the login, the MySQL door bounds what a connection may keep between its statements:
prepared statements and their long data (`mysql_held`, per connection and for all of them),
open cursors, an answer the client does not read (`mysql_write_timeout`), and the time it
may sit idle (`mysql_idle_timeout`: MySQL's own 8 hours would let idle connections pile up).

On HTTP an answer is written whole into the connection's buffer, so a client that asks for
a big answer and never reads it holds it there for as long as it keeps the connection (six
such clients of ~31 MB answers held that memory for good). `Unread` bounds the bytes all
connections together hold in answers waiting for their clients (`http_unread`, counted in
their send buffers whenever a socket is full): past it the connections that have waited
longest are closed and their answers freed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import gc
import logging
import resource
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("kbsql.server")

MB = 1024 * 1024
METADATA_TIMEOUT_S = 10.0
"""Seconds the MySQL door's own metadata statements (SHOW ... WHERE) may run at most."""


@dataclass(frozen=True)
class DoorBounds:
    """The bounds, each a setting of `engine/settings_table.py` (its flag in the name)."""

    max_pending: int = 256
    """--max-pending-connections: connections per door not yet past their head or login."""
    mysql_idle_timeout: float = 900.0
    """--mysql-idle-timeout: seconds a logged-in MySQL connection may wait between commands."""
    mysql_write_timeout: float = 60.0
    """--mysql-write-timeout: seconds a client may leave its answer unread."""
    mysql_max_prepared: int = 64
    """--mysql-max-prepared: prepared statements one connection keeps."""
    mysql_max_cursors: int = 4
    """--mysql-max-cursors: open cursors (each holding a result) one connection keeps."""
    mysql_max_connections: int = 256
    """--mysql-max-connections: logged-in MySQL connections at once, one owner at most half."""
    http_max_connections: int = 512
    """--max-http-connections: HTTP connections let in at once, one owner at most half."""
    mysql_held: int = 16 * MB
    """--mysql-held-mb: one connection's prepared statements' text and long data."""
    mysql_total_held: int = 64 * MB
    """--mysql-total-held-mb: the same, all connections together."""
    flood_closes: int = 32
    """--flood-closes: connections of one address block the pending cap closes within a
    second that make the block flood (its new ones closed at accept, `flood.py`); 0: never."""
    flood_hold: float = 1.0
    """--flood-hold: seconds a flooding block's new connections stay closed after the rate."""
    flood_pause_rate: int = 500
    """--flood-pause-rate: closes at accept a second past which a door pauses accepting."""
    metadata_timeout: float = METADATA_TIMEOUT_S
    """Seconds the MySQL door's own metadata statements (SHOW ... WHERE) may run: 10, or the
    engine's --statement-timeout when that is less (`serve` sets it from the engine)."""

    def with_statement_timeout(self, seconds: float | None) -> DoorBounds:
        """These bounds, the metadata statements' time cut to the engine's statement timeout
        (None or 0: none) when that is less."""
        if seconds and 0 < seconds < self.metadata_timeout:
            return dataclasses.replace(self, metadata_timeout=seconds)
        return self

    def pending_cap(self) -> int:
        """`max_pending`, but at most a quarter of the process's descriptor limit."""
        return _quarter_of_descriptors(self.max_pending)

    def connection_cap(self) -> int:
        """`mysql_max_connections`, but at most a quarter of the process's descriptor limit:
        idle logged-in connections (900 s each by default) of one token used to take every
        descriptor (250 at a limit of 256), and then no one got in on either door (an HTTP
        `SELECT 1` had no answer in 10 s)."""
        return _quarter_of_descriptors(self.mysql_max_connections)

    def http_connection_cap(self) -> int:
        """`http_max_connections`, at most a quarter of the descriptors (connection_shares.py)."""
        return _quarter_of_descriptors(self.http_max_connections)


def _quarter_of_descriptors(wanted: int) -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return wanted
    return max(4, min(wanted, soft // 4))


class Pending:
    """The connections of one door that have not yet shown a request head or logged in,
    oldest first. `add` past the cap closes the oldest (one log line; repeated lines are
    collapsed by `log_collapse`)."""

    def __init__(self, cap: int, door: str) -> None:
        self.cap = cap
        self.door = door
        self._open: OrderedDict[object, Callable[[], None]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def add(self, key: object, close: Callable[[], None]) -> None:
        while len(self._open) >= self.cap:
            _, close_oldest = self._open.popitem(last=False)
            log.warning("%s: %d connections had not yet %s (--max-pending-connections); closed the "
                        "oldest", self.door, self.cap,
                        "sent a request head" if self.door == "HTTP" else "logged in")
            close_oldest()
        self._open[key] = close

    def done(self, key: object) -> None:
        self._open.pop(key, None)


class HeldBytes:
    """Bytes all MySQL connections hold in prepared statements and long data together."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0

    def take(self, size: int) -> bool:
        if self.total + size > self.limit:
            return False
        self.total += size
        return True

    def give(self, size: int) -> None:
        self.total = max(0, self.total - size)


def give_back_memory() -> None:
    """Return freed memory to the system (glibc's `malloc_trim`). The rows of an answer a
    client left unread are freed when its connection closes, but glibc keeps the pages for
    the process: six such answers kept the server 470 MB larger for good. The collection
    first: the answer is held in reference cycles (the traceback of the timeout that ended
    its connection), which reference counting alone never frees."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class Unread:
    """The answers all connections of a door hold for clients that are not reading them: a
    connection whose send buffer is full (`paused`, with a way to measure and to close it)
    counts its buffered bytes until it drains (`resumed`) or closes. When the total is over
    `limit`, the connections paused the longest are closed (one log line each) and the
    memory is given back: a client reading its answer drains within moments, one that
    never reads is the first to go. The newest is never closed for the bound: one answer
    larger than it (a result near the result cap) is still delivered."""

    def __init__(self, limit: int, door: str = "HTTP") -> None:
        self.limit = limit
        self.door = door
        self._paused: OrderedDict[object, tuple[float, Callable[[], int], Callable[[], None]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._paused)

    def paused(self, key: object, size: Callable[[], int], close: Callable[[], None]) -> None:
        if key not in self._paused:
            self._paused[key] = (time.monotonic(), size, close)
        self._enforce()

    def resumed(self, key: object) -> None:
        self._paused.pop(key, None)

    def _enforce(self) -> None:
        held = {key: size() for key, (_, size, _) in self._paused.items()}
        total = sum(held.values())
        if total <= self.limit:
            return
        for key in list(self._paused)[:-1]:  # the oldest first; the newest always stays, so
            if total <= self.limit:              # one answer bigger than the bound still goes out
                break
            since, _, close = self._paused.pop(key)
            total -= held[key]
            log.warning("%s: answers left unread held %.0f MB (--http-unread-mb %.0f); closed the "
                        "connection that waited longest (%.0f MB, %.0f s)", self.door,
                        (total + held[key]) / MB, self.limit / MB, held[key] / MB, time.monotonic() - since)
            close()
        give_back_memory()
