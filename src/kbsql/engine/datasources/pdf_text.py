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
import subprocess
import sys
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from kbsql.engine.datasources.child_limits import CPU_KILLED, child_env, limit_this_process
from kbsql.engine.fair_slots import FairSlots, slot_within
from kbsql.interface.control import Stopped
from kbsql.interface.control import current as current_control

CHILD_MEMORY = 1 << 30  # address space of the child beyond which allocation fails
CPU_FLOOR_S = 2
"""CPU-seconds any PDF may take, however small (starting the child takes ~0.3)."""


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
    owners; the wait for one counts toward `seconds`, and one not had while `fair_slots.RUN_AT_LEAST_S`
    of them are left is a `Busy` naming `slots_note`."""
    control = current_control()
    with slot_within(slots, seconds, f"reading as many PDFs as it may at once ({slots_note})") as left:
        cpu = int(left) + 1 if cpu_seconds is None else min(cpu_seconds, int(left) + 1)
        out, err, returncode = _extract(raw, max_chars, seconds, left, cpu, control, refuse)
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
    with subprocess.Popen([sys.executable, "-m", __name__, str(max_chars), str(cpu)], env=child_env(),
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

    limit_this_process(cpu_seconds, CHILD_MEMORY)
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
