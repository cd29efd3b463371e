"""One thread that stops statements past their deadline, or all of them when the process
grows past its memory ceiling.

Why a thread: the thread running a statement is inside DuckDB and cannot look at a clock;
someone else must call `Control.time_up()` (which interrupts its cursor). One thread for
all statements, ticking every `TICK_S` only while a statement runs, costs a dict insert per
statement, where a timer per statement would start a thread each time.

The memory check: DuckDB's memory limit does not count the values expressions build (see
`value_caps`). At each tick the watchdog reads this process's resident size (from /proc,
~10 us) and stops every running statement once the process has grown by more than
`max_growth` bytes since the oldest of them was first seen: what slips past the limit
is then bounded by what one tick lets through.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kbsql.interface.control import Control

TICK_S = 0.1
MEMORY_REASON = ("the server ran short of memory for SQL (kbsql serve --sql-memory-mb): "
                 "add a LIMIT, select fewer columns or aggregate")
log = logging.getLogger("kbsql.sql")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory (Linux), None where /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class Watchdog:
    """Watches the controls of running statements (`watching`)."""

    def __init__(self, max_growth: int | None = None, on_tick: Callable[[], None] | None = None):
        """`on_tick`: called at each tick while statements run (it keeps its own pace), e.g.
        reading the disk's free space again during a long sort that spills."""
        self.max_growth = max_growth
        self.on_tick = on_tick
        self._running: dict[int, Control] = {}
        self._baseline: dict[int, int] = {}  # control -> resident bytes when first seen
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextmanager
    def watching(self, control: Control) -> Iterator[None]:
        key = id(control)
        with self._lock:
            idle = not self._running  # the thread may be asleep: wake it (else it is ticking)
            nested = key in self._running
            self._running[key] = control
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name="kbsql-sql-watchdog",
                                                daemon=True)
                self._thread.start()
        if idle:
            self._wake.set()
        try:
            yield
        finally:
            if not nested:
                with self._lock:
                    self._running.pop(key, None)

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait()
            with self._lock:
                running = dict(self._running)
                if not running:
                    self._wake.clear()
                    self._baseline.clear()
                    continue
            for control in running.values():
                if control.expired():
                    control.time_up()
            if self.max_growth is not None:
                self._check_memory(running)
            if self.on_tick is not None:
                try:
                    self.on_tick()
                except Exception:  # never the watchdog's end: deadlines still need it
                    log.exception("the watchdog's tick failed")
            time.sleep(TICK_S)

    def _check_memory(self, running: dict[int, Control]) -> None:
        rss = resident_bytes()
        if rss is None:
            return
        for key in [k for k in self._baseline if k not in running]:
            del self._baseline[key]
        for key in running:
            self._baseline.setdefault(key, rss)
        base = min(self._baseline.values())
        assert self.max_growth is not None
        if rss - base > self.max_growth:
            log.warning("SQL statements stopped: the server grew by %d MB while they ran, over "
                        "%d MB", (rss - base) >> 20, self.max_growth >> 20)
            for control in running.values():
                control.stop(MEMORY_REASON)
            self._baseline.clear()
