"""Connections a door keeps open for the credentials that got in: a cap, one owner at most half.

Why: every connection holds a file descriptor, one pool for both doors and the data files.
The pending caps (door_bounds.Pending) bound connections that have not yet shown a request
head or logged in; past them, one token's connections had no bound. 300 HTTP connections of
one token, each with a statement queued in the SQL lane, took every descriptor of a server
limited to 256: another user's `SELECT 1` had no answer in 10 s (redteam3); idle MySQL logins
did the same. So each door lets at most `cap` connections in (a quarter of the descriptors at
most, the pending cap's rule) and one owner (the credential accepted, lanes.owner_key) at most
half of them; None, a server without authentication, has no share. HTTP counts a connection
from its first request naming an owner until it closes (`HttpConnectionShare`, the
protocol's `release`); one past a bound answers 503 and is closed. The MySQL door counts
logins (mysql/door.py).
"""

from __future__ import annotations

from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

from kbsql.interface.control import Turns, owner_share
from kbsql.server.guard import send_problem
from kbsql.server.lanes import owner_key

TOO_MANY = "Too many connections"
"""How a refusal by the connection caps begins (the MySQL door answers it with code 1040)."""

CONNECTION: ContextVar[object | None] = ContextVar("kbsql_http_connection", default=None)
"""The HTTP connection (its protocol object) a request came on: set by the protocol
(http_protocol.head_timeout_protocol) as the request's task is made, read by the middleware."""


class ConnectionShares:
    """`cap` connections in all, one owner at most half; `held` says what it counts ("logged
    in", "open"), `flag` the setting that raises it."""

    def __init__(self, cap: int, flag: str, held: str, anonymous_share: bool = False) -> None:
        self.cap, self.flag, self.held = cap, flag, held
        self.anonymous_share = anonymous_share  # None (no credential) is held to a share too
        self.turns = Turns()  # how many each owner holds (the lanes' bookkeeping)

    def admit(self, owner: str | None) -> str | None:
        """Count a connection of `owner` in (None), or say why not (no await between check
        and count: parallel connections cannot all pass)."""
        total = sum(self.turns.held.values())
        mine = self.turns.held.get(owner, 0)
        if total >= self.cap:
            return (f"{TOO_MANY}: {total} are {self.held}, this server's limit "
                    f"(kbsql serve {self.flag} {self.cap}); close some or try again later")
        if (owner is not None or self.anonymous_share) and mine >= owner_share(self.cap):
            whose = "these credentials have" if owner is not None else "clients without credentials have"
            return (f"{TOO_MANY}: {whose} {mine} {self.held}, half of this "
                    f"server's {self.cap} (a fair share, kbsql serve {self.flag}); close some")
        self.turns.take(owner, ())
        return None

    def release(self, owner: str | None) -> None:
        self.turns.give_back(owner)


class HttpConnections:
    """The HTTP door's connections by the owner of their latest request."""

    def __init__(self, cap: int, anonymous_share: bool = False) -> None:
        """`anonymous_share`: on a server with authentication, connections whose requests carry
        no credential (its open paths: status, login) are one owner held to half the cap, so
        they cannot fill it and lock out every user who has one."""
        self.shares = ConnectionShares(cap, "--max-http-connections", "open", anonymous_share)
        self._owners: dict[object, str | None] = {}

    def claim(self, connection: object, owner: str | None) -> str | None:
        """A request of `owner` on `connection`: counted (None), or why it may not be."""
        if connection in self._owners:
            if self._owners[connection] == owner:
                return None
            self.release(connection)  # the same connection, another credential
        refusal = self.shares.admit(owner)
        if refusal is None:
            self._owners[connection] = owner
        return refusal

    def release(self, connection: object) -> None:
        """`connection` closed (or changed hands)."""
        if connection in self._owners:
            self.shares.release(self._owners.pop(connection))


class HttpConnectionShare:
    """ASGI middleware after the token check: a request on a connection the bounds do not let
    in answers 503 and closes it."""

    def __init__(self, app: ASGIApp, *, connections: HttpConnections | None) -> None:
        self.app, self.connections = app, connections

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = CONNECTION.get()
        if scope["type"] == "http" and self.connections is not None and connection is not None:
            refusal = self.connections.claim(connection, owner_key(scope))
            if refusal is not None:
                await send_problem(send, 503, "Busy", refusal,
                                   [(b"connection", b"close"), (b"retry-after", b"5")])
                return
        await self.app(scope, receive, send)
