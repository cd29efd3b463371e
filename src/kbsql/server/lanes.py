"""Separate, bounded thread pools for the three kinds of work a request hands the service.

Why: every service call ran on one pool of 40 threads, so 45 completions held by a slow
model (25 s each) made `SELECT 1` and the knowledge-base list wait 22 s. Now:

- `sql`: statements (`POST /api/sql/query`) and file uploads;
- `model`: what may call a model (completions and their streams, creating or changing an
  agent or a knowledge base, inserting rows, which embeds them);
- `catalog`: status, projects, listing, reading and dropping knowledge bases and agents.

A lane runs at most `size` calls at once; a call that finds it full waits up to `wait`
seconds for a slot, then fails with `Busy` (503 with Retry-After): a burst is queued
briefly, a flood is refused rather than piled up. Admission is bookkeeping on the event
loop (no lock, no task): the `SELECT 1` fast path pays two integer updates.

The lanes belong to the app (`build_app`, `serve`), never to a module: both doors (HTTP and
the MySQL door) take their catalog, SQL and model workers from the same `Lanes`, and
`serve` closes them at shutdown. Nothing here knows Starlette: the MySQL door stands on
this module, not on the HTTP routes.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from kbsql.interface.control import CLIENT_GONE, CURRENT, Control
from kbsql.interface.errors import Busy

DEFAULT_SQL_WORKERS = 32
DEFAULT_MODEL_WORKERS = 32
CATALOG_WORKERS = 8
SQL_WAIT_S = 30.0  # a statement queues longer than a model call: nothing slow holds it
MODEL_WAIT_S = 5.0
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
        self.pool = ThreadPoolExecutor(size, thread_name_prefix=f"kbsql-{name}")
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in this lane's pool once a slot is free (see `slot` and `call`)."""
        async with self.slot():
            return await self.call(fn, *args)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One of the lane's `size` slots while the block runs."""
        await self.acquire()
        try:
            yield
        finally:
            self.release()

    async def acquire(self) -> None:
        """Take a slot, waiting up to `wait` seconds (then `Busy`). A stream takes one for
        all its calls (`release` when it ends): admitted once, never refused half-way."""
        if self.busy < self.size and not self._waiters:
            self.busy += 1
        else:
            await self._admit()  # the slot is taken on our behalf when we are woken

    def release(self) -> None:
        self.busy -= 1
        self._wake()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in this lane's pool, with the caller's context variables, for a caller
        holding a slot. Like Starlette's threadpool, the call cannot be cancelled halfway: a
        request cancelled at the end of a graceful shutdown waits for its call (the service
        is closed right after the last request, never under a write; a committed insert
        must not answer 500)."""
        context = contextvars.copy_context()
        future = asyncio.get_running_loop().run_in_executor(self.pool, context.run, fn, *args)
        while True:
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.cancelled():
                    raise

    async def _admit(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.wait)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if waiter.done():  # a slot was taken for us just as we gave up: give it back
                self.busy -= 1
                self._wake()
            else:
                waiter.cancel()
                self._waiters.remove(waiter)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise Busy(f"The server is busy: all {self.size} {self.name} workers are taken"
                       f"{f' ({self.flag})' if self.flag else ''}; try again shortly",
                       retry_after=max(1, round(self.wait))) from None

    def _wake(self) -> None:
        """Hand free slots to the longest waiting calls (taking each slot for it)."""
        while self._waiters and self.busy < self.size:
            waiter = self._waiters.popleft()
            self.busy += 1
            waiter.set_result(None)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class Lanes:
    sql: Lane
    model: Lane
    catalog: Lane

    @classmethod
    def sized(cls, sql_workers: int = DEFAULT_SQL_WORKERS,
              model_workers: int = DEFAULT_MODEL_WORKERS) -> Lanes:
        return cls(Lane("SQL", sql_workers, SQL_WAIT_S, "kbsql serve --sql-workers"),
                   Lane("model", model_workers, MODEL_WAIT_S, "kbsql serve --model-workers"),
                   Lane("catalog", CATALOG_WORKERS, CATALOG_WAIT_S))

    def close(self) -> None:
        for lane in (self.sql, self.model, self.catalog):
            lane.close()


async def controlled(gone: Callable[[], Awaitable[object]], control: Control,
                     fn: Callable[..., Any], *args: Any, lane: Lane) -> Any:
    """`lane.run(fn, *args)` under `control` (the service reads it as
    `interface.control.CURRENT`). When the call is still running after `WATCH_AFTER_S`,
    `gone()` is awaited beside it (it returns when the client has gone away: HTTP's
    disconnect, the MySQL stream's end); the control is then stopped, which interrupts the
    statement or the model call within the watcher's tick."""
    loop = asyncio.get_running_loop()
    watcher: list[asyncio.Task[None]] = []
    timer = loop.call_later(WATCH_AFTER_S, lambda: watcher.append(
        loop.create_task(_stop_when_gone(gone, control))))
    token = CURRENT.set(control)
    try:
        return await lane.run(fn, *args)
    finally:
        CURRENT.reset(token)
        timer.cancel()
        for task in watcher:
            task.cancel()


async def _stop_when_gone(gone: Callable[[], Awaitable[object]], control: Control) -> None:
    await gone()
    control.stop(CLIENT_GONE)
