"""Separate, bounded thread pools for the three kinds of work a request hands the service.

Why: every service call ran on one pool of 40 threads, so 45 completions held by a slow
model (25 s each) made `SELECT 1` and the knowledge-base list wait 22 s. Now:

- `sql`: statements (`POST /api/sql/query`);
- `upload`: file uploads, which wait for a parse or PDF process (`--upload-timeout`): in the
  SQL lane, 32 uploads of two tokens waiting for one parse process held every SQL worker;
- `model`: what may call a model (completions and their streams, creating or changing an
  agent or a knowledge base, inserting rows, which embeds them);
- `catalog`: status, projects, listing, reading and dropping knowledge bases and agents.

A lane runs at most `size` calls at once; a call that finds it full waits up to `wait`
seconds for a slot, then fails with `Busy` (503 with Retry-After): a burst is queued
briefly, a flood is refused rather than piled up. Admission is bookkeeping on the event
loop (no lock, no task): the `SELECT 1` fast path pays two integer updates.

Fair share: a call names its owner (`owner_key`: the credential it presented), and one
owner holds at most `share` slots (half the lane, rounded up): one token running three long
statements on `--sql-workers 3` used to take the whole lane from every other user. A freed
slot goes to a waiting call whose owner is under its share: the owner holding fewest, then
the one served longest ago, then the longest-waiting call (`_wake`).

The lanes belong to the app (`build_app`, `serve`), never to a module: both doors (HTTP and
the MySQL door) take their catalog, SQL and model workers from the same `Lanes`, and
`serve` closes them at shutdown. Nothing here knows Starlette: the MySQL door stands on
this module, not on the HTTP routes.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from kbsql.interface.control import CLIENT_GONE, CURRENT, SERVER_STOPPING, Control, Turns, owner_share
from kbsql.interface.errors import Busy

DEFAULT_SQL_WORKERS = 32
DEFAULT_MODEL_WORKERS = 32
DEFAULT_UPLOAD_WORKERS = 8
CATALOG_WORKERS = 8
SQL_WAIT_S = 30.0  # a statement queues longer than a model call: nothing slow holds it
MODEL_WAIT_S = 5.0
UPLOAD_WAIT_S = 30.0
CATALOG_WAIT_S = 30.0
WATCH_AFTER_S = 0.2
"""A call still running after this long gets its client watched: one that goes away stops
it (`controlled`). Later than 0 so a fast statement (the keep-alive `SELECT 1`) starts no
task; a disconnect is then noticed within this plus the time the socket takes to close."""


class Lane:
    """One bounded pool (see the module docstring)."""

    def __init__(self, name: str, size: int, wait: float, flag: str = ""):
        self.name = name
        self.size = size
        self.wait = wait
        self.flag = flag  # the option that sizes it, named in a 503
        self.busy = 0
        self.share = owner_share(size)
        """Slots one owner may hold at once (see the module docstring)."""
        self.pool = ThreadPoolExecutor(size, thread_name_prefix=f"kbsql-{name}")
        self._waiters: deque[tuple[asyncio.Future[None], str | None]] = deque()
        self.turns = Turns()  # who holds how many slots, who was served last (`_wake`)

    async def run(self, fn: Callable[..., Any], *args: Any, owner: str | None = None) -> Any:
        """`fn(*args)` in this lane's pool once a slot is free (see `slot` and `call`)."""
        async with self.slot(owner):
            return await self.call(fn, *args)

    @asynccontextmanager
    async def slot(self, owner: str | None = None) -> AsyncIterator[None]:
        """One of the lane's `size` slots while the block runs."""
        await self.acquire(owner)
        try:
            yield
        finally:
            self.release(owner)

    def _may_take(self, owner: str | None) -> bool:
        return self.busy < self.size and (owner is None or self.turns.held.get(owner, 0) < self.share)

    def _take(self, owner: str | None) -> None:
        self.busy += 1
        self.turns.take(owner, (o for _, o in self._waiters))

    async def acquire(self, owner: str | None = None) -> None:
        """Take a slot, waiting up to `wait` seconds (then `Busy`). A stream takes one for
        all its calls (`release` when it ends): admitted once, never refused half-way.
        `owner` (None: unnamed, no share) holds at most `share` slots."""
        if not self._waiters and self._may_take(owner):
            self._take(owner)
        else:
            await self._admit(owner)  # the slot is taken on our behalf when we are woken

    def release(self, owner: str | None = None) -> None:
        self.busy -= 1
        self.turns.give_back(owner)
        self._wake()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in this lane's pool, with the caller's context variables, for a caller
        holding a slot. Like Starlette's threadpool, the call cannot be cancelled halfway: a
        request cancelled at the end of a graceful shutdown waits for its call (the service
        is closed right after the last request, never under a write; a committed insert
        must not answer 500). Its control is stopped then, so what can stop at once does
        (a statement is interrupted and rolled back, an upload's parse or PDF extraction
        killed): a stop is never longer than the grace period plus a moment."""
        context = contextvars.copy_context()
        future = asyncio.get_running_loop().run_in_executor(self.pool, context.run, fn, *args)
        while True:
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.cancelled():
                    raise
                control = context.get(CURRENT, None)
                if control is not None:
                    control.stop(SERVER_STOPPING)

    async def _admit(self, owner: str | None) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (waiter, owner)
        self._waiters.append(entry)
        self._wake()  # a free slot that earlier waiters may not take (their share is used) is ours
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.wait)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if waiter.done():  # a slot was taken for us just as we gave up: give it back
                self.release(owner)
            else:
                waiter.cancel()
                self._waiters.remove(entry)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise self._busy(owner) from None

    def _busy(self, owner: str | None) -> Busy:
        """The 503: the lane is full, or this owner holds its share of it."""
        if owner is not None and self.turns.held.get(owner, 0) >= self.share and self.busy < self.size:
            return Busy(f"The server is busy: these credentials already hold {self.share} of the "
                        f"{self.size} {self.name} workers (a fair share, half the lane"
                        f"{f', {self.flag}' if self.flag else ''}); try again shortly",
                        retry_after=max(1, round(self.wait)))
        return Busy(f"The server is busy: all {self.size} {self.name} workers are taken"
                    f"{f' ({self.flag})' if self.flag else ''}; try again shortly",
                    retry_after=max(1, round(self.wait)))

    def _wake(self) -> None:
        """Hand free slots to waiting calls whose owner is under its share (taking each slot
        for it): first the owner holding fewest slots, then the one served longest ago, then
        the longest waiting call. A call over its share keeps its place in the queue. Calls
        naming no owner count as one owner in this order (they have no share).
        Without the middle rule a small lane (`--sql-workers 2`: one slot an owner) went
        first in, first out: an owner's freed slot went back to its own calls queued before
        another user's one, so the other user waited behind the whole flood."""
        while self.busy < self.size:
            best: tuple[int, int] | None = None
            chosen = None
            for entry in self._waiters:
                owner = entry[1]
                if not self._may_take(owner):
                    continue
                key = self.turns.order(owner)
                if best is None or key < best:
                    best, chosen = key, entry
            if chosen is None:
                return
            self._waiters.remove(chosen)
            self._take(chosen[1])
            chosen[0].set_result(None)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class Lanes:
    sql: Lane
    model: Lane
    catalog: Lane
    upload: Lane

    @classmethod
    def sized(cls, sql_workers: int = DEFAULT_SQL_WORKERS,
              model_workers: int = DEFAULT_MODEL_WORKERS,
              upload_workers: int = DEFAULT_UPLOAD_WORKERS) -> Lanes:
        return cls(Lane("SQL", sql_workers, SQL_WAIT_S, "kbsql serve --sql-workers"),
                   Lane("model", model_workers, MODEL_WAIT_S, "kbsql serve --model-workers"),
                   Lane("catalog", CATALOG_WORKERS, CATALOG_WAIT_S),
                   Lane("upload", upload_workers, UPLOAD_WAIT_S, "kbsql serve --upload-workers"))

    def close(self) -> None:
        for lane in (self.sql, self.model, self.catalog, self.upload):
            lane.close()


OWNER = "kbsql.owner"
"""The ASGI scope key where authentication (`auth.TokenAuth`) puts the fair-share owner of
the credential it accepted."""


def owner_key(scope: Mapping[str, Any]) -> str | None:
    """Whose call this is, for the lanes' fair share: on a server with authentication, the
    owner of the credential that was accepted (`OWNER`: the token, or the login user for any
    of its sessions). Without authentication, a digest of the Authorization / X-Api-Key
    header a client sends (they are not checked: a label, not a credential), None without
    one (one anonymous user, no share)."""
    if OWNER in scope:
        return str(scope[OWNER])
    for name, value in scope.get("headers") or ():
        if name.lower() in (b"authorization", b"x-api-key") and value:
            scheme, _, rest = value.partition(b" ")  # the same token as Bearer or X-Api-Key: one owner
            secret = rest.strip() if scheme.lower() == b"bearer" and rest else value
            return owner_of(secret)
    return None


OWNER_KEY = secrets.token_bytes(32)
"""The key of `owner_of`'s digests, new in each process."""


def owner_of(secret: bytes) -> str:
    """The fair-share owner of a credential, the same on both doors (HTTP's token, the MySQL
    door's password): a digest keyed for this process, so no secret is kept in the lanes and
    none can be tried against an owner offline. An owner is stored with a job it creates
    (the catalog's jobs.creator), and the login user's owner is its password's: a plain
    SHA-256 there was a fast hash of the password on disk. After a restart a job's stored
    owner is a user of its own for the shares (its runs still share among themselves)."""
    return hmac.new(OWNER_KEY, secret, hashlib.sha256).hexdigest()[:16]


async def controlled(gone: Callable[[], Awaitable[object]], control: Control,
                     fn: Callable[..., Any], *args: Any, lane: Lane, owner: str | None = None) -> Any:
    """`lane.run(fn, *args)` under `control` (the service reads it as
    `interface.control.CURRENT`). When the call is still running after `WATCH_AFTER_S`,
    `gone()` is awaited beside it (it returns when the client has gone away: HTTP's
    disconnect, the MySQL stream's end); the control is then stopped, which interrupts the
    statement or the model call within the watcher's tick."""
    loop = asyncio.get_running_loop()
    watcher: list[asyncio.Task[None]] = []
    timer = loop.call_later(WATCH_AFTER_S, lambda: watcher.append(
        loop.create_task(_stop_when_gone(gone, control))))
    control.owner = owner  # what the call starts for later keeps its owner (background inserts)
    token = CURRENT.set(control)
    try:
        return await lane.run(fn, *args, owner=owner)
    finally:
        CURRENT.reset(token)
        timer.cancel()
        for task in watcher:
            task.cancel()


async def _stop_when_gone(gone: Callable[[], Awaitable[object]], control: Control) -> None:
    await gone()
    control.stop(CLIENT_GONE)
