"""The gate between statements running on DuckDB and a data source being re-attached.

Why: a write to a data source detaches its read-only attach and attaches it read-write, then
back (DuckSession.writable). A statement reading that source in between failed: 'Binder Error:
Catalog "kbsql_ds_1" does not exist!', "Table 'a' not found in database 'src'", or the write
itself 'Unique file handle conflict' (a detach refused while a read used the file). Three
threads over one engine, two writing and one reading, saw 59 such errors in 120 statements
(sql/create/jobs.mdx: two jobs on one source). Statements hold the gate shared while DuckDB
runs them (those that read an attached source: `shared_if`); a swap holds it alone, for the
detach and attach only (milliseconds), not for the write, which runs shared beside the
reads. A waiting swap goes before new statements, so a stream of reads cannot hold it off; a
thread already inside passes again (a statement that asks a metadata question while it runs
must not wait for a swap that waits for it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SwapGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0  # statements inside
        self._swapping = False
        self._waiting_swaps = 0
        self._held = threading.local()  # this thread's depth inside

    @contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._held, "depth", 0)
        if depth == 0:
            with self._cond:
                while self._swapping or self._waiting_swaps:
                    self._cond.wait()
                self._running += 1
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if depth == 0:
                with self._cond:
                    self._running -= 1
                    if self._running == 0:
                        self._cond.notify_all()

    @contextmanager
    def shared_if(self, reads_a_source: bool) -> Iterator[None]:
        """`shared()` for a statement that reads an attached source; any other passes.

        Why: a swap waits for every statement inside and holds every new one back meanwhile,
        so with all statements inside, one user's INSERT INTO a duckdb source waited for
        another's 20 s statement over files, and every user's `SELECT 1` waited behind it
        (18 s). A statement reading no attached source cannot meet a re-attach."""
        if not reads_a_source:
            yield
            return
        with self.shared():
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting_swaps += 1
            try:
                while self._swapping or self._running:
                    self._cond.wait()
            finally:
                self._waiting_swaps -= 1
            self._swapping = True
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()
