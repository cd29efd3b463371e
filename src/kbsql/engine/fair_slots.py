"""A few slots shared fairly between owners, for work that blocks a thread while it waits.

Why: at most `--pdf-workers` PDF extractions run at once (each a process taking a core), and
a plain semaphore hands a freed slot to whichever waiter the OS wakes: one token sending PDFs
without pause kept another token's one PDF waiting until its deadline (503). Here a freed
slot goes to a waiting owner holding the fewest slots, among those to the owner served
longest ago (round robin), and within one owner to its oldest call: an owner holding slots
waits while another owner waits with fewer, and a lone owner may still use every slot.

The owner is the lanes' (`interface.control.Control.owner`: a digest of the credential the
request presented, the same on both doors); None (an embedded engine, a server without
authentication) is one owner like any other. The server's lanes (server/lanes.py) follow the
same rule of half the slots per owner and the same order (`interface.control.Turns`) on the
event loop, without a thread; this is the engine's form, waited for in the worker thread that runs the upload.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kbsql.interface.control import Stopped, Turns
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import Busy

POLL_S = 0.2
"""How often a waiter looks whether its work was stopped meanwhile (its client left)."""
RUN_AT_LEAST_S = 1.0
"""Work waits for a slot until this much of its deadline is left (at most half of it), then
answers 503 Busy: started with less, a child process (~0.3 s to start) would be refused by the
deadline after a fraction of a second, naming the wrong cause."""


class FairSlots:
    """`size` slots; `acquire(owner, seconds)` waits for one in the order the docstring says."""

    def __init__(self, size: int):
        self.size = max(1, size)
        self.busy = 0
        self._waiting: list[list[str | None]] = []  # one ticket per waiting call, oldest first
        self._turns = Turns()
        self._changed = threading.Condition()

    def acquire(self, owner: str | None, seconds: float,
                stopped: Callable[[], bool] = lambda: False) -> bool:
        """Take a slot for `owner` within `seconds`; False when none came in time or
        `stopped()` turned true meanwhile (the caller tells the two apart)."""
        deadline = time.monotonic() + seconds
        ticket = [owner]
        with self._changed:
            self._waiting.append(ticket)
            try:
                while self._next() is not ticket:
                    left = deadline - time.monotonic()
                    if left <= 0 or stopped():
                        return False
                    self._changed.wait(min(POLL_S, left))
                self.busy += 1
                self._turns.take(owner, (t[0] for t in self._waiting))
                return True
            finally:
                self._waiting.remove(ticket)
                self._changed.notify_all()  # the next in line may be another call now

    def release(self, owner: str | None) -> None:
        with self._changed:
            self.busy -= 1
            self._turns.give_back(owner)
            self._changed.notify_all()

    def held(self, owner: str | None) -> int:
        with self._changed:
            return self._turns.held.get(owner, 0)

    def _next(self) -> list[str | None] | None:
        """The waiting call a free slot goes to (None: no slot is free); lock held."""
        if self.busy >= self.size or not self._waiting:
            return None
        return min(self._waiting, key=lambda t: self._turns.order(t[0]))


@contextmanager
def slot_within(slots: FairSlots | None, seconds: float, busy: str) -> Iterator[float]:
    """Hold one of `slots` (None: no bound) for the current work's owner while the block runs;
    yields the seconds left of `seconds`, the wait included. A slot not had while
    `RUN_AT_LEAST_S` of them are left is a `Busy` saying "The server is <busy>"; work stopped
    while it waits (its client left) is `Stopped`."""
    control = current_control()
    owner = control.owner if control is not None else None
    start = time.monotonic()
    stopped = (lambda: control.stopped) if control is not None else (lambda: False)
    if slots is not None and not slots.acquire(owner, seconds - min(RUN_AT_LEAST_S, seconds / 2), stopped):
        if control is not None and control.stopped:
            raise Stopped(control.reason or "stopped")
        raise Busy(f"The server is {busy}; try again shortly", retry_after=max(1, round(seconds / 4)))
    try:
        yield max(0.1, seconds - (time.monotonic() - start))
    finally:
        if slots is not None:
            slots.release(owner)
