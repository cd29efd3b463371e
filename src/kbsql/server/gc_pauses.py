"""Short garbage-collector pauses for a long-running server.

Why: a full (generation 2) collection walks every container object the process holds, and
holds the interpreter lock while it does. After its first search a server holds ~130,000 of
them (modules, the SQL parsers' tables, the embedding model's tokenizer), and a full
collection took 50-120 ms on a 2-core machine, during which every request waits. Under
bench_isolation's load a server made three of them in 40 s, each delaying all four measuring
clients at once: those pauses were the SELECT 1 p99 (63-90 ms).

What survives a full collection in a server is almost all its own long-lived state. So the
objects startup made are frozen before serving (`gc.freeze`: moved to a generation no
collection examines again), and so are the survivors of any later full collection that took
longer than `PAUSE_MS` (the first search loads the model; a big catalog grows caches). The
next full collection then walks only what came since, a few ms.

The trade-off: an object frozen while alive that later becomes part of a reference cycle is
never freed (reference counting still frees everything else). A freeze happens only after a
slow full collection, i.e. when the long-lived state has grown by tens of thousands of
objects: a handful of times in a server's life, each freezing what was alive then.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

PAUSE_MS = 20.0
"""A full collection slower than this freezes its survivors."""

log = logging.getLogger("kbsql.server")


class _Freezer:
    """The `gc.callbacks` entry: times each full collection, freezes after a slow one."""

    def __init__(self, pause_ms: float):
        self.pause_ms = pause_ms
        self.started = 0.0
        self.freezes = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self.started = time.perf_counter()
            return
        took = (time.perf_counter() - self.started) * 1000
        if took > self.pause_ms:
            gc.freeze()  # the collection is over: its survivors go to the permanent generation
            self.freezes += 1
            log.debug("a full garbage collection took %.0f ms: %d objects frozen", took,
                      gc.get_freeze_count())


def keep_pauses_short(pause_ms: float = PAUSE_MS) -> _Freezer:
    """Freeze what startup made and install the freezer (once per process: `kbsql serve`)."""
    for hook in gc.callbacks:
        if isinstance(hook, _Freezer):
            return hook
    gc.freeze()  # no collection first: startup leaves ~200 unreachable objects, and a full
    # collection here would cost every start ~40 ms of CPU
    freezer = _Freezer(pause_ms)
    gc.callbacks.append(freezer)
    return freezer
