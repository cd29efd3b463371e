"""Repeated log lines, collapsed: one line per interval, with a count.

Why: with 256 file descriptors and 300 stalled clients, asyncio logged the same
`socket.accept() out of system resource` line (with its traceback) for every accept
attempt: 56 MB of identical lines, filling the disk the server needs. The first line of a
kind is written as it comes; the same line again within `interval` seconds is counted, not
written; the first one after the interval is written once with the count of those it
stood for (and without its traceback, which the first one showed). Lines still counted when
the server stops are reported then (`flush`).

A `logging.Filter` on the handlers that write (`install`), so every logger is covered: the
server's own, uvicorn's and asyncio's.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

INTERVAL_S = 10.0
MAX_KINDS = 1000


class CollapseRepeats(logging.Filter):
    def __init__(self, interval: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()  # [start, count]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.getMessage())
        now = self.clock()
        with self._lock:
            state = self._seen.get(key)
            if state is not None and now - state[0] < self.interval:
                state[1] += 1
                return False
            repeated = int(state[1]) if state is not None else 0
            self._seen[key] = [now, 0]
            self._seen.move_to_end(key)
            while len(self._seen) > MAX_KINDS:
                self._seen.popitem(last=False)
        if repeated:
            record.msg = (f"{key[2]} [the same line {repeated} more times in the "
                          f"{self.interval:g} s before]")
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True

    def flush(self) -> list[str]:
        """The counts still pending, as lines (written by `install`'s handler at exit)."""
        with self._lock:
            pending = [(k, int(s[1])) for k, s in self._seen.items() if s[1]]
            self._seen.clear()
        return [f"{message} [the same line {count} more times since]" for (_, _, message), count in pending]


def install(interval: float = INTERVAL_S) -> CollapseRepeats:
    """Put one `CollapseRepeats` on every handler that writes: the root's (added, writing
    WARNING and up to stderr as plain messages, as Python's last-resort handler did) and
    uvicorn's."""
    collapse = CollapseRepeats(interval)
    root = logging.getLogger()
    if not any(getattr(h, "_kbsql_collapse", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._kbsql_collapse = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for writer in logging.getLogger(name).handlers:
            writer.addFilter(collapse)
    return collapse


def report_pending(collapse: CollapseRepeats) -> None:
    """Write the counts of lines held back when the server stops."""
    for line in collapse.flush():
        print(line, file=sys.stderr, flush=True)
