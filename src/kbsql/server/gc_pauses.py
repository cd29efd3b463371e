"""Short full garbage collections in a long-running server: what later imports made is frozen
too, once the server is quiet.

Why: a full collection walks every container object with the interpreter lock held, and every
request in flight waits for it. `kbsql serve` freezes what it has made by the time its engine
is open (`cli._freeze_imports`), but the libraries the first statements load (DuckDB, Arrow,
pandas, sqlglot, the embedding model's runtime) come later: a warm server still walked ~57,000
objects, and under bench_isolation's load full collections took 20-109 ms. Their functions,
classes and tables live as long as the process, like what startup imported.

Freezing (`gc.freeze`) takes every object alive at that moment out of later collections, so
one alive then that later becomes garbage in a reference cycle is never freed: a freeze while
a client held an unread answer kept that answer for good (stop 38). So a freeze happens only
when new modules were imported since the last one and the server is quiet (`_Server.quiet`):
no HTTP request in flight, no unread answer, no MySQL connection, no lane running a call.
Then only the server's own long-lived state is alive, and the small objects of idle HTTP
keep-alive connections (if one of those later ends in a reference cycle, a few KB stay).
Work outside the lanes is not seen: a background insert or a job running then has its objects
frozen too (none was found in a reference cycle; one that is would stay). It
happens a handful of times in a server's life (the first statement, the first search, the
first upload of a kind...); a server that never has such a moment collects as before.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import Callable

log = logging.getLogger("kbsql.server")

CHECK_S = 1.0
"""How often the server looks for a quiet moment with new modules to freeze."""


class ImportFreezer:
    """Freezes once per batch of new imports, when `quiet()` says nothing of a client is alive."""

    def __init__(self, quiet: Callable[[], bool]) -> None:
        self.quiet = quiet
        self.modules = len(sys.modules)
        self.freezes = 0

    def check(self) -> bool:
        """Freeze now if modules were imported since the last freeze and the server is quiet."""
        if len(sys.modules) <= self.modules or not self.quiet():
            return False
        self.modules = len(sys.modules)
        gc.collect()  # the garbage of the imports' work is not frozen with them
        gc.freeze()
        self.freezes += 1
        log.debug("new modules frozen: %d objects out of full collections", gc.get_freeze_count())
        return True

    async def watch(self) -> None:
        """`check` every CHECK_S seconds until cancelled (the server's shutdown)."""
        while True:
            await asyncio.sleep(CHECK_S)
            try:
                self.check()
            except Exception:  # never the end of the watch: the next quiet moment tries again
                log.exception("freezing what new imports made failed")
