"""A PDF's page texts, read in a process of its own under a deadline and a CPU bound.

Why: pypdf's text extraction is pure Python and its cost follows the content streams, not
the file's size: a 3 KB PDF of 12 pages sharing one stream of 90,000 text operators kept
a server worker busy ~2 CPU-s a page, and a thread cannot be stopped. In a child process
(`python -m kbsql.engine.datasources.pdf_text`, the PDF on stdin, a JSON list of page
texts on stdout) it is killed at the deadline, and RLIMIT_CPU stops it even if the parent
is gone. It is killed at once, too, when the work it serves is stopped (the uploading
client went away: `interface.control.CURRENT`); it used to go on to the deadline.

Its CPU time is bounded by what was sent (`cpu_budget`: `pdf_cpu_per_mb` CPU-seconds per MB
of the file, at least `CPU_FLOOR_S`): the 3.7 KB PDF above parsed for 35 CPU-s within the
60 s deadline; it now stops at the floor, while an ordinary PDF needs ~0.3 CPU-s to start
and ~2-7 per MB (a 263 KB manual of 36 pages: 1.7 CPU-s). The extractions at once are
shared fairly between the users uploading them (engine/fair_slots.py).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from kbsql.engine.fair_slots import FairSlots
from kbsql.interface.control import Stopped
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import Busy

CHILD_MEMORY = 1 << 30  # address space of the child beyond which allocation fails
EXTRACTION_NICE = 10
"""The child's CPU priority once it has used `DEMOTE_AFTER_S` of CPU, lowered: a PDF that parses
for its whole budget takes a core, and the server's own requests come first then."""
DEMOTE_AFTER_S = 1.0
"""CPU-seconds a child runs at the server's priority. An ordinary PDF is read in less (~0.3-0.6
CPU-s for tens of pages): niced from its start, it got ~7% of a core on a busy 2-core machine
and was refused by the deadline (a 2-page PDF took over 6 s) while nothing else was wrong."""
CPU_FLOOR_S = 2
"""CPU-seconds any PDF may take, however small (starting the child takes ~0.3)."""
RUN_AT_LEAST_S = 1.0
"""A PDF waits for a slot until this much of its deadline is left (at most half of it), then
answers 503 Busy: started with less, the extraction (~0.3 s to start) would be refused by the
deadline after a fraction of a second, naming the wrong cause."""
CPU_KILLED = (-signal.SIGXCPU, -signal.SIGKILL)
"""Exit codes of a child stopped by RLIMIT_CPU (its soft limit, then its hard one)."""


def cpu_budget(size: int, per_mb: float) -> int:
    """Whole CPU-seconds the extraction of a PDF of `size` bytes may take (RLIMIT_CPU's unit)."""
    return max(CPU_FLOOR_S, math.ceil(per_mb * size / 2**20))


def page_texts(raw: bytes, seconds: float, max_chars: int, refuse: Callable[[str], Exception],
               slots: FairSlots | None = None, slots_note: str = "",
               cpu_seconds: int | None = None) -> list[str]:
    """The text of each page of `raw`; `refuse(line)` makes the error for a PDF that
    cannot be read, is over `max_chars` of text, takes more than `seconds`, or more than
    `cpu_seconds` of CPU (its line starts "CPU: "; None: no bound but the deadline's). `slots`:
    the extractions that may run at once (each child takes a core), shared fairly between
    owners; the wait for one counts toward `seconds`, and one not had while `RUN_AT_LEAST_S`
    of them are left is a `Busy` naming `slots_note`."""
    control = current_control()
    owner = control.owner if control is not None else None
    start = time.monotonic()
    stopped = (lambda: control.stopped) if control is not None else (lambda: False)
    if slots is not None and not slots.acquire(owner, seconds - min(RUN_AT_LEAST_S, seconds / 2), stopped):
        if control is not None and control.stopped:
            raise Stopped(control.reason or "stopped")
        raise Busy(f"The server is reading as many PDFs as it may at once ({slots_note}); try "
                   f"again shortly", retry_after=max(1, round(seconds / 4)))
    try:
        left = max(0.1, seconds - (time.monotonic() - start))
        cpu = int(left) + 1 if cpu_seconds is None else min(cpu_seconds, int(left) + 1)
        out, err, returncode = _extract(raw, max_chars, seconds, left, cpu, control, refuse)
    finally:
        if slots is not None:
            slots.release(owner)
    if control is not None and control.stopped:  # killed because its client left
        raise Stopped(control.reason or "stopped")
    if returncode in CPU_KILLED and cpu_seconds is not None and cpu == cpu_seconds:
        raise refuse(f"CPU: reading the PDF took more than {cpu} CPU-seconds")
    if returncode != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["killed"]
        raise refuse(last[0][:300])
    texts: list[str] = json.loads(out)
    return texts


def _extract(raw: bytes, max_chars: int, seconds: float, left: float, cpu: int, control: Any,
             refuse: Callable[[str], Exception]) -> tuple[bytes, bytes, int]:
    """The child's stdout, stderr and exit code; killed after `left` seconds (the deadline
    named is `seconds`) or `cpu` CPU-seconds, or at once when `control` stops."""
    with subprocess.Popen([sys.executable, "-m", __name__, str(max_chars), str(cpu)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        try:
            with control.stoppable(child.kill) if control is not None else nullcontext():
                out, err = child.communicate(raw, timeout=left)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise refuse(f"reading the PDF took more than {seconds:g} s") from None
        except BaseException:  # stopped before it began, or interrupted: no child is left
            child.kill()
            raise
    return out, err, child.returncode


def _main(max_chars: int, cpu_seconds: int) -> None:
    import io
    import resource

    signal.signal(signal.SIGPROF, lambda *_: os.nice(EXTRACTION_NICE))
    signal.setitimer(signal.ITIMER_PROF, DEMOTE_AFTER_S)  # counts this process's CPU time
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would dump a core of the child
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    try:
        from pypdf import PdfReader
    except ImportError:
        sys.exit("Reading pdf needs pypdf (pip install pypdf)")
    pages: list[str] = []
    size = 0
    try:  # pypdf bounds each stream it inflates (ZLIB_MAX_OUTPUT_LENGTH); the text is bounded here
        for page in PdfReader(io.BytesIO(sys.stdin.buffer.read())).pages:
            pages.append(page.extract_text() or "")
            size += len(pages[-1])
            if size > max_chars:
                sys.exit(f"TOO_LONG {max_chars}")
    except Exception as exc:  # any failure of a damaged PDF is one line for the parent
        sys.exit(f"The PDF cannot be read: {type(exc).__name__}: {exc}")
    json.dump(pages, sys.stdout)


if __name__ == "__main__":
    _main(int(sys.argv[1]), int(sys.argv[2]))
