"""The listening side of the MySQL door: accepting connections, ending them, shutting down.

It runs on the HTTP server's event loop, in the same process, over the same `ServiceApi`
(engine), limits and failed-login throttle. Each connection is one task; whatever ends it
(the client's goodbye, a login refused, a malformed or oversized packet, a client that
stalls or goes away in the middle of an answer) ends that connection only, with at most one
log line naming the client address and the reason, never the statement (it may hold keys);
so does a port probe (a connection closed before, or garbage sent instead of, a login).
What connections may hold, logged in or not, is bounded by `DoorBounds` (`door_bounds.py`):
past `--max-pending-connections` not yet logged in, the oldest is closed.

A flood of connections that never log in (clients reconnecting as fast as the cap closes
them: 600 measured at ~500 a second, each greeted at ~0.85 ms of CPU) would keep the shared
event loop busy, and HTTP's answers would wait behind it (SELECT 1's p99 went from 33 ms to
1.6 s). So the door accepts one connection at a time and closes a flooding address block's
new connections at accept, as HTTP does: `server/flood.py` (`--flood-closes`, `--flood-hold`,
`--flood-pause-rate`); a client there gets "lost connection" and may retry once the flood stops.

Shutdown (SIGTERM/SIGINT, with HTTP's graceful timeout): the port stops accepting, idle
connections close at once, a connection in the middle of a statement finishes it first.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import socket
import struct

from mysql_mimic.control import LocalControl
from mysql_mimic.stream import ConnectionClosed

from kbsql.interface.api import ServiceApi
from kbsql.server.auth import AuthSettings
from kbsql.server.connection_shares import ConnectionShares
from kbsql.server.door_bounds import DoorBounds, HeldBytes, Pending, Unread, give_back_memory
from kbsql.server.flood import FloodBrake, start_accepting
from kbsql.server.lanes import Lanes
from kbsql.server.limits import Limits
from kbsql.server.mysql.connection import CAPABILITIES, DoorConnection, LoginFailed
from kbsql.server.mysql.framing import BoundedStream, ClientStalled, MalformedPacket, PacketTooLarge
from kbsql.server.mysql.identity import DoorIdentity, DoorPassword
from kbsql.server.mysql.router import DoorSession
from kbsql.server.mysql.sysvars import server_variables
from kbsql.server.throttle import FailureThrottle, client_key

log = logging.getLogger("kbsql.server")

CLOSE_TIMEOUT_S = 5.0
"""How long a closing connection's last bytes may wait for a client that stopped reading."""
TRIM_AFTER_S = 1.0
"""Memory freed by stalled connections is given back this long after the first of them closed."""
PACKET_MARGIN = 64 * 1024
"""Bytes a command may carry beyond the SQL size limit (a prepared statement's parameters,
the command byte): anything larger is refused before it is read."""


class MysqlDoor:
    """MySQL's wire protocol on `sock` (already bound), answering from `api`."""

    def __init__(self, api: ServiceApi, sock: socket.socket, *, auth: AuthSettings | None = None,
                 limits: Limits | None = None, throttle: FailureThrottle | None = None,
                 lanes: Lanes | None = None, bounds: DoorBounds | None = None):
        self.api = api
        self.sock = sock
        self.auth = auth or AuthSettings()
        self.limits = limits or Limits()
        self.throttle = throttle if throttle is not None else FailureThrottle()  # an empty one is falsy
        # HTTP's (serve passes the app's): a statement here takes an SQL worker there; a door
        # alone makes its own and closes them with itself
        self._own_lanes = lanes is None
        self.lanes = lanes if lanes is not None else Lanes.sized()
        self.bounds = bounds or DoorBounds()
        self.held = HeldBytes(self.bounds.mysql_total_held)
        self.unread = Unread(self.limits.max_unread, "MySQL")  # answers not taken: --http-unread-mb too
        self.pending = Pending(self.bounds.pending_cap(), "MySQL")
        # logged-in connections, one owner at most half (connection_shares.py)
        self.logged_in = ConnectionShares(self.bounds.connection_cap(), "--mysql-max-connections",
                                          "logged in")
        self.control = LocalControl()
        self.connections: dict[DoorConnection, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self._acceptor: asyncio.Task[None] | None = None
        self.brake = FloodBrake("MySQL", self.bounds, self.pending.cap)
        self._closing = False
        self._trim: asyncio.TimerHandle | None = None
        self.defaults = server_variables(None)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port

    async def start(self) -> None:
        status = await self.lanes.catalog.run(self.api.status)
        self.defaults = server_variables(str(status.get("version") or "") or None)
        self.sock.setblocking(False)
        self.sock.listen(min(128, self.pending.cap))
        self._acceptor = start_accepting(self.sock, self.brake, self._open)
        self._acceptor.add_done_callback(lambda _: self.sock.close())

    def stop_accepting(self) -> None:
        self._closing = True
        if self._acceptor is not None:
            self._acceptor.cancel()

    async def _open(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn)
        except OSError:
            conn.close()
            return
        await self._accept(reader, writer)

    async def close(self, timeout: float) -> None:
        """Stop accepting; close idle connections now, busy ones after their statement (or
        after `timeout` seconds, once their engine call has returned)."""
        self.stop_accepting()
        for connection, task in list(self.connections.items()):
            connection.closing = True
            if not connection.busy:
                task.cancel()
        tasks = list(self.connections.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._acceptor is not None:
            await asyncio.wait([self._acceptor])
        if self._own_lanes:
            self.lanes.close()

    def _admit(self, owner: str | None) -> str | None:
        """Count a login of `owner` in (None), or say why not: at most `connection_cap()`
        logged-in connections (a quarter of the descriptors: the pending cap's rule), one owner
        at most half (None, a server without authentication: no share)."""
        return self.logged_in.admit(owner)

    def _forget(self, connection: DoorConnection, password: DoorPassword) -> None:
        """A connection ends: its place (pending, or logged in) and its statements go."""
        self.connections.pop(connection, None)
        self.pending.done(connection)
        if password.admitted:
            self.logged_in.release(password.owner)
        connection.forget_statements()

    def _logged_in(self, connection: DoorConnection, password: DoorPassword) -> None:
        """No longer pending (the pre-auth cap); its statements take the SQL lane's fair
        share of the credential it logged in with (a token: one owner on both doors)."""
        self.pending.done(connection)
        connection.owner = password.owner

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = client_key(peer)
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "localhost"
        if self._closing:
            writer.close()
            return
        stream = BoundedStream(reader, writer, max_packet=self.limits.max_sql + PACKET_MARGIN,
                               timeout=self.limits.timeout, write_timeout=self.bounds.mysql_write_timeout,
                               idle_timeout=self.bounds.mysql_idle_timeout)
        session = DoorSession(self.api, self.limits, host, self.defaults)
        session.metadata_timeout = self.bounds.metadata_timeout
        password = DoorPassword(self.auth, self.throttle, client, host, self._admit)
        identity = DoorIdentity(password)
        connection = DoorConnection(stream=stream, session=session, control=self.control,
                                    identity_provider=identity, server_capabilities=CAPABILITIES,
                                    login_timeout=self.limits.timeout, lane=self.lanes.sql,
                                    bounds=self.bounds, held=self.held, unread=self.unread)
        connection.connection_id = next(self._ids) % 2**32
        task = asyncio.current_task()
        assert task is not None
        self.connections[connection] = task

        def evict() -> None:
            self.brake.evicted(peer)
            connection.evicted = True
            writer.transport.abort()  # its descriptor now, not once the task has run
            task.cancel()

        self.pending.add(connection, evict)
        stalled = False
        connection.on_login = functools.partial(self._logged_in, connection, password)
        password.release = self.logged_in.release
        password.moved = functools.partial(setattr, connection, "owner")
        try:
            await connection.start()
        except LoginFailed:
            pass  # the client was told; a wrong password was logged and counted (identity.py)
        except PacketTooLarge as exc:
            log.warning("MySQL client %s sent %s; closed its connection", client, exc)
        except ClientStalled as exc:
            log.warning("MySQL client %s: %s; closed its connection", client, exc)
            writer.transport.abort()  # what it did not read goes nowhere: no wait to flush it
            stalled = True
        except (MalformedPacket, ValueError, struct.error, IndexError, AssertionError) as exc:
            log.warning("MySQL client %s sent a malformed packet (%s); closed its connection", client,
                        str(exc)[:200])
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.warning("MySQL client %s went away (%s)", client, type(exc).__name__)
        except ConnectionClosed:  # before its login: a port probe, a health check
            log.warning("MySQL client %s closed its connection without logging in", client)
        except asyncio.CancelledError:
            if not (self._closing or connection.evicted):
                raise
        except Exception:  # a fault of the door itself: this connection ends, the server goes on
            log.exception("MySQL connection from %s failed", client)
        finally:
            self._forget(connection, password)
            writer.close()
            try:  # what is still buffered goes out, unless the client has stopped reading
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await writer.wait_closed()
            except (TimeoutError, asyncio.CancelledError):
                writer.transport.abort()
            except Exception:
                pass
            if stalled:  # the rows of its answer are free now: give their pages back
                del connection, session, stream
                self._trim_soon()

    def _trim_soon(self) -> None:
        """`give_back_memory` in a second, once for all the connections closed meanwhile
        (it runs on the event loop: a client must not make it run in a loop)."""
        if self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(TRIM_AFTER_S, self._trimmed)

    def _trimmed(self) -> None:
        self._trim = None
        give_back_memory()
