"""Limit on failed credentials per client address, for `kbsql serve` with authentication.

Why: a failed `POST /api/login` waits `FAILED_LOGIN_DELAY_S` before answering, but that
delay is per request: an attacker sending guesses in parallel is not slowed at all, and
wrong bearer tokens / `X-Api-Key` values were not slowed either. This counts failures per
client address instead: after `limit` failed attempts within `window_s` seconds the address
is locked for `window_s` seconds, and while locked every credentialed request and every
login from it gets `429 Too Many Requests` with `Retry-After`, before any password or token
is checked, so nothing more can be learned by guessing.

What counts as a failure: a wrong password on `/api/login`, and a bearer token or
`X-Api-Key` the server does not accept (including a session token lost to a restart: the
SDK's single retry after that is one failure). A request with no credentials at all is not
counted (a client that has not logged in yet) and is never answered 429.

Trade-offs, on purpose:

- A locked address gets 429 even with the right password or a valid token: letting those
  through would tell a guesser which guess was right, which is what the lock prevents.
  Other addresses are never affected: a lock is per address and a success elsewhere neither
  sets nor clears it.
- The address is `scope["client"][0]`. uvicorn (`proxy_headers`, on by default) replaces it
  with the `X-Forwarded-For` client only when the connection comes from an address in
  `$FORWARDED_ALLOW_IPS` (default `127.0.0.1,::1`). So a reverse proxy on the same machine
  gives per-client limits; a proxy on another machine makes every client share the proxy's
  address (one guesser then locks all of them out for a window) unless that variable names
  the proxy; and a local user connecting over loopback can pick its own address by sending
  `X-Forwarded-For` (a local user is not who this guards against).
- IPv6 clients are counted per /64 network, since one host usually holds a whole /64 and
  could otherwise take a fresh address per guess.
- Failures are also counted per address block (`address_block`: an IPv4 address's /24, a
  loopback one's whole 127.0.0.0/8, where any local user may bind any address), at
  `BLOCK_FACTOR` times the per-address limit: six addresses of one /24 could otherwise make
  six times the guesses. A locked block refuses every address in it, the cost being that
  colleagues behind one NAT (or on one machine) share a block's lock.
- Memory is bounded: at most `max_addresses` addresses are tracked, the least recently
  failed go first, and an address's state expires `window_s` after its last failure or lock.
  An attacker with more addresses than that can push a locked address out; the limit then
  still holds per address, at `limit` guesses per window each.

Plain data and functions, no I/O but one warning line per lock (address and count, never the
attempted secret); the clock is injectable so tests need not wait a window.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("kbsql.server")

FAILED_ATTEMPTS_LIMIT = 10
WINDOW_S = 60.0
MAX_ADDRESSES = 10_000
BLOCK_FACTOR = 3
"""Failures one address block may make in a window, in multiples of the per-address limit."""


@dataclass
class _Entry:
    failures: deque[float] = field(default_factory=deque)
    locked_until: float = 0.0
    touched: float = 0.0  # last failure or lock; the entry expires window_s after it


def client_key(scope_client: object) -> str:
    """The key an ASGI `scope["client"]` is counted under: its host, an IPv6 host as its
    /64 network (an IPv4-mapped one as the IPv4 address); "unknown" when there is none."""
    if not isinstance(scope_client, (tuple, list)) or not scope_client:
        return "unknown"
    host = str(scope_client[0])
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # a unix socket path or a name: counted as given
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def address_block(key: str) -> str | None:
    """The block `key` (a `client_key`) is counted under as well: its /24 (on loopback the
    /8); None for an IPv6 key (already a /64 network) or one that is not an address."""
    try:
        address = ipaddress.IPv4Address(key)
    except ValueError:
        return None
    prefix = 8 if address.is_loopback else 24
    return str(ipaddress.IPv4Network((address, prefix), strict=False))


class FailureThrottle:
    """Failed attempts per address; `retry_after` says whether (and how long) one is locked."""

    def __init__(self, *, limit: int = FAILED_ATTEMPTS_LIMIT, window_s: float = WINDOW_S,
                 max_addresses: int = MAX_ADDRESSES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1 or window_s <= 0 or max_addresses < 1:
            raise ValueError("limit and max_addresses must be >= 1 and window_s > 0")
        self.limit = limit
        self.block_limit = limit * BLOCK_FACTOR
        self.window_s = window_s
        self.max_addresses = max_addresses
        self.clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently touched first

    def __len__(self) -> int:
        return len(self._entries)

    def retry_after(self, key: str) -> int | None:
        """Whole seconds until `key` may try again (at least 1), or None when it is not
        locked (itself or its address block). Check it before looking at the credentials."""
        block = address_block(key)
        locked_until = max(entry.locked_until for entry in
                           (self._entries.get(key), self._entries.get(block) if block else None, _Entry())
                           if entry is not None)
        remaining = locked_until - self.clock()
        return max(1, math.ceil(remaining)) if remaining > 0 else None

    def failed(self, key: str) -> None:
        """Count one failed attempt of `key`; the `limit`-th within a window locks it for
        `window_s`; so does the `block_limit`-th of its address block. Call it before any
        delay, so parallel attempts are counted at once."""
        now = self.clock()
        self._expire(now)
        self._count(key, self.limit, now)
        block = address_block(key)
        if block is not None:
            self._count(block, self.block_limit, now)
        while len(self._entries) > self.max_addresses:
            self._entries.popitem(last=False)

    def _count(self, key: str, limit: int, now: float) -> None:
        entry = self._entries.pop(key, None) or _Entry()
        self._entries[key] = entry  # now the most recently touched
        entry.touched = now
        if entry.locked_until > now:
            return  # already locked (a caller that checked before an await): nothing new
        while entry.failures and entry.failures[0] <= now - self.window_s:
            entry.failures.popleft()
        entry.failures.append(now)
        if len(entry.failures) >= limit:
            log.warning("too many failed credentials from %s: %d failed in %gs, refusing it for %gs",
                        key, len(entry.failures), self.window_s, self.window_s)
            entry.failures.clear()
            entry.locked_until = now + self.window_s

    def _expire(self, now: float) -> None:
        """Drop entries untouched for a window: their failures are too old to count and any
        lock they had has run out (a lock ends `window_s` after it was touched)."""
        while self._entries:
            entry = next(iter(self._entries.values()))
            if entry.touched > now - self.window_s:
                break
            self._entries.popitem(last=False)
