"""Stopping work in flight: one switch shared by whoever started a request and the code
running it.

Why: a statement must stop when its client goes away (the server notices, in another task)
or when its time is up (a watchdog notices, in another thread), and the thread running it
is blocked inside DuckDB or a model call meanwhile. So the runner registers how to stop
what it is doing (`stoppable(cursor.interrupt)`), and `stop()` from any thread calls it.

The server puts a `Control` in the request's context (`CURRENT`, a context variable that
goes along into the worker thread) and keeps a reference to stop it; the engine reads it,
or makes its own for an embedded call. Plain data, a lock and callbacks: no thread here.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from kbsql.interface.errors import KbsqlError

CLIENT_GONE = "the client disconnected"
INTERRUPTED = "interrupted (Ctrl-C); nothing is left half-written"
SERVER_STOPPING = "the server is stopping"


class Stopped(KbsqlError):
    """The work was stopped on purpose: `reason` says why, in a few words a user reads."""

    stored: int | None = None
    """The rows a stopped insert kept (its reason says so too; information_schema.queries
    counts them), None otherwise."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class Control:
    """A stop switch with an optional deadline (`time.monotonic()` seconds).

    `stop(reason)` is idempotent (the first reason wins) and calls every registered stopper
    once, at once. The stoppers run under the lock, so one that `stoppable` is about to
    remove cannot be called after its block ended (a DuckDB cursor back in its pool must
    not be interrupted in its next user's statement)."""

    __slots__ = ("_lock", "_stoppers", "deadline", "limit_note", "owner", "reason")

    def __init__(self, deadline: float | None = None, limit_note: str = ""):
        self.deadline = deadline
        self.limit_note = limit_note  # names the limit in the deadline's message
        self.owner: str | None = None
        """Whose work this is (the server's fair-share owner, `lanes.owner_of`): work it
        starts to run later (a background insert) keeps that user's share."""
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._stoppers: list[Callable[[], None]] = []

    @classmethod
    def after(cls, seconds: float | None, limit_note: str = "") -> Control:
        """A control whose deadline is `seconds` from now (None or <= 0: no deadline)."""
        deadline = time.monotonic() + seconds if seconds and seconds > 0 else None
        return cls(deadline, limit_note)

    def tighten(self, seconds: float | None, limit_note: str) -> None:
        """Bring the deadline to `seconds` from now if that is sooner (never later)."""
        if not seconds or seconds <= 0:
            return
        deadline = time.monotonic() + seconds
        if self.deadline is None or deadline < self.deadline:
            self.deadline = deadline
            self.limit_note = limit_note

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            stoppers = list(self._stoppers)
            for stopper in stoppers:
                try:
                    stopper()
                except Exception:  # a stopper racing its own end: the work stops either way
                    pass

    def time_up(self) -> None:
        """Stop because the deadline passed (the watchdog calls it)."""
        self.stop(f"it ran past its time limit{' (' + self.limit_note + ')' if self.limit_note else ''}")

    def check(self) -> None:
        """Raise `Stopped` when the work must stop (stopped, or past the deadline)."""
        if self.reason is None and self.expired():
            self.time_up()
        if self.reason is not None:
            raise Stopped(self.reason)

    @contextmanager
    def stoppable(self, stopper: Callable[[], None]) -> Iterator[None]:
        """While the block runs, `stop()` calls `stopper`; stopped already: raise at once."""
        with self._lock:
            if self.reason is not None:
                raise Stopped(self.reason)
            self._stoppers.append(stopper)
        try:
            yield
        finally:
            with self._lock:
                self._stoppers.remove(stopper)


def owner_share(slots: int) -> int:
    """Slots of a pool of `slots` one owner (`Control.owner`) may hold at once: half, rounded
    up, at least one. One rule for the server's lanes and the engine's background inserts."""
    return max(1, -(-slots // 2))


class Turns:
    """Whose waiting call a freed slot goes to: the owner holding fewest slots, then the one
    served longest ago (ties: the caller's oldest call first). One rule for the server's lanes
    and the engine's PDF slots; None (no owner named) counts as one owner. The caller keeps
    its own queue and lock: this is the bookkeeping of who holds what and who came last."""

    REMEMBERED = 256
    """Owners whose last turn is kept beyond those holding or waiting (login sessions come and go)."""

    def __init__(self) -> None:
        self.held: dict[str | None, int] = {}
        self._last: dict[str | None, int] = {}  # owner -> its last turn
        self._count = itertools.count()

    def take(self, owner: str | None, waiting: Iterable[str | None]) -> None:
        """`owner` got a slot; `waiting`: the owners of the calls still waiting."""
        self.held[owner] = self.held.get(owner, 0) + 1
        self._last[owner] = next(self._count)
        if len(self._last) > self.REMEMBERED:  # owners neither holding nor waiting are forgotten
            active = set(self.held) | set(waiting)
            self._last = {o: n for o, n in self._last.items() if o in active}

    def give_back(self, owner: str | None) -> None:
        left = self.held.get(owner, 1) - 1
        if left > 0:
            self.held[owner] = left
        else:
            self.held.pop(owner, None)

    def order(self, owner: str | None) -> tuple[int, int]:
        """The sort key of `owner`'s waiting call: the smallest goes first."""
        return self.held.get(owner, 0), self._last.get(owner, -1)


CURRENT: ContextVar[Control | None] = ContextVar("kbsql_control", default=None)
"""The control of the request being served in this context (None: an embedded call)."""


def current() -> Control | None:
    return CURRENT.get()


def checkpoint() -> None:
    """Raise `Stopped` if the work of this context must stop (its deadline passed, its
    client left, it was cancelled): for loops of slow steps no watchdog interrupts
    (EVALUATE's questions), called between steps."""
    control = CURRENT.get()
    if control is not None:
        control.check()


@contextmanager
def bound(control: Control | None) -> Iterator[None]:
    """Run the block as work of `control` (None: of no one, so nothing it starts is stopped
    by the surrounding work's deadline or client). Set and reset in one frame: never around
    a `yield` of a generator, whose next step may run in another context."""
    token = CURRENT.set(control)
    try:
        yield
    finally:
        CURRENT.reset(token)
