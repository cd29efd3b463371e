"""Accepting connections one at a time, and closing a flood of them at accept, on both doors.

Why: a flood of connections that never finish a request head (HTTP) or a login (MySQL),
clients reconnecting as fast as the pending cap (`door_bounds.Pending`) closes them, keeps
the event loop both doors share busy setting each one up: 60 such clients made ~2,700
HTTP connections a second (0.7 of a core) or ~1,400 MySQL ones (a whole core, each
greeted), and every answer waited behind them. asyncio's own server also accepts a whole
backlog in one go, past the pending cap and the descriptor limit before the cap can close
any (one EMFILE, with a traceback, at a 256-descriptor limit).

So each door accepts one connection at a time (`accept_loop`), yielding to the event loop
after each. Once the cap has closed `flood_closes` connections of one address block (a /24,
on loopback the /8, an IPv6 /64: the lockouts' blocks, `throttle.address_block`) within a
second, that block floods: its new connections are closed as they are accepted, before any
protocol object, greeting or log line, until the block has gone below that rate for
`flood_hold` seconds (one log line names the block when it starts). Past `flood_pause_rate`
such closes a second the door stops accepting for FLOOD_PAUSE_S, leaving the rest in the
kernel's listen backlog at no cost. Out of descriptors at accept is one log line and a
second's pause, never a traceback.

What a legitimate client of a flooding block sees: a connection it already has (logged in,
or an HTTP keep-alive connection) is served as before, since only new connections are
closed; a new one is closed at once ("lost connection", "server disconnected"), for as long
as the flood goes on plus `flood_hold`, and a retry after that gets in. Clients of other
blocks are not affected. Behind a reverse proxy every connection comes from the proxy's
address, but a proxy completes each request head before it connects (caddy does), so its
connections are never pending long enough to be closed by the cap and never make a flood:
the clients flooding the proxy are the proxy's to refuse.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import functools
import logging
import socket
import time
from collections.abc import Awaitable, Callable

from kbsql.server.door_bounds import DoorBounds
from kbsql.server.throttle import address_block, client_key

log = logging.getLogger("kbsql.server")

FLOOD_PAUSE_S = 0.1
"""How long a door stops accepting past `flood_pause_rate` closes at accept a second."""
OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
MAX_BLOCKS = 4096
"""Blocks remembered before those that stopped are forgotten."""


def block_of(peer: object) -> str:
    """The address block a peer's connections are counted under (the lockouts' blocks)."""
    if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
        return _block_of_host(peer[0])
    key = client_key(peer)
    return address_block(key) or key


@functools.lru_cache(maxsize=MAX_BLOCKS)
def _block_of_host(host: str) -> str:
    """Parsing an address takes ~50 us: a flood's connections come from few hosts, each parsed once."""
    key = client_key((host, 0))
    return address_block(key) or key


class FloodBrake:
    """One door's count of connections closed unauthenticated, per address block, and the
    blocks that flood. `evicted` when the pending cap closed one; `refused` at accept."""

    def __init__(self, door: str, bounds: DoorBounds, cap: int) -> None:
        self.door = door
        self.cap = cap
        self.closes = min(bounds.flood_closes, cap)  # 0: no brake
        self.hold = bounds.flood_hold
        self._closed: dict[str, collections.deque[float]] = {}
        self._until: dict[str, float] = {}
        self._refused: collections.deque[float] = collections.deque(maxlen=max(1, bounds.flood_pause_rate))
        self._pause = bounds.flood_pause_rate > 0

    def evicted(self, peer: object) -> None:
        """The pending cap closed a connection of `peer`: the block's first second at the
        flood rate is said once in the log."""
        block = block_of(peer)
        was = self.flooding(block)
        if self._rate_reached(block) and not was:
            log.warning("%s: the pending cap (--max-pending-connections %d) closed %d connections "
                        "from %s within a second; its new connections are closed at once until it "
                        "stops", self.door, self.cap, self.closes, block)

    def refused(self, peer: object) -> bool:
        """Whether a connection just accepted from `peer` is to be closed at once (its
        block floods); one that is counts, so a block still coming at the rate stays closed."""
        block = block_of(peer)
        if not self.flooding(block):
            return False
        self._rate_reached(block)
        self._refused.append(time.monotonic())
        return True

    def pausing(self) -> bool:
        """More than `flood_pause_rate` connections were closed at accept in the last second."""
        return (self._pause and len(self._refused) == self._refused.maxlen
                and self._refused[0] > time.monotonic() - 1.0)

    def flooding(self, block: str) -> bool:
        return self._until.get(block, 0.0) > time.monotonic()

    def _rate_reached(self, block: str) -> bool:
        """Count one connection of `block` closed unauthenticated; at `closes` within a
        second the block floods for `hold` seconds more. A client retrying now and then
        never reaches it."""
        if self.closes <= 0:
            return False
        now = time.monotonic()
        times = self._closed.setdefault(block, collections.deque(maxlen=self.closes))
        times.append(now)
        reached = len(times) == times.maxlen and now - times[0] <= 1.0
        if reached:
            self._until[block] = now + self.hold
        if len(self._closed) > MAX_BLOCKS:  # blocks that stopped are forgotten
            for key in [k for k, t in self._closed.items() if t[-1] < now - 1.0]:
                del self._closed[key]
        if len(self._until) > MAX_BLOCKS:
            for key in [k for k, until in self._until.items() if until < now]:
                del self._until[key]
        return reached


async def accept_loop(sock: socket.socket, brake: FloodBrake,
                      open_connection: Callable[[socket.socket], Awaitable[None]]) -> None:
    """Accept on `sock` (listening, non-blocking) one connection at a time until cancelled,
    handing each to `open_connection` in its own task unless its block floods."""
    loop = asyncio.get_running_loop()
    starting: set[asyncio.Task[None]] = set()
    while True:
        if brake.pausing():
            await asyncio.sleep(FLOOD_PAUSE_S)
            continue
        try:
            conn, peer = await loop.sock_accept(sock)
        except OSError as exc:
            if exc.errno not in OUT_OF_DESCRIPTORS:
                raise
            log.warning("%s: no file descriptor left for a new connection (%s); accepting again in "
                        "1 s (raise `ulimit -n` or lower --max-pending-connections)", brake.door,
                        exc.strerror)
            await asyncio.sleep(1.0)
            continue
        if brake.refused(peer):
            conn.close()  # no protocol, no task, no log line: the cheapest refusal there is
            await asyncio.sleep(0)  # a backlog of them is not refused in one turn either
            continue
        task = asyncio.ensure_future(open_connection(conn))
        starting.add(task)
        task.add_done_callback(starting.discard)
        # a connection waiting is accepted without a pause, so without this a burst of them
        # would all be set up before anything else's turn: one each, between other turns
        await asyncio.sleep(0)


def start_accepting(sock: socket.socket, brake: FloodBrake,
                    open_connection: Callable[[socket.socket], Awaitable[None]]) -> asyncio.Task[None]:
    """`accept_loop` as a task of the running loop. Its end by an error (not by a cancel, the
    door's own stop) is one log line naming the door, since nothing else would say it."""
    task = asyncio.create_task(accept_loop(sock, brake, open_connection))
    task.add_done_callback(functools.partial(_said_if_stopped, brake.door))
    return task


def _said_if_stopped(door: str, task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s: the door stopped accepting connections: %s", door, task.exception())
