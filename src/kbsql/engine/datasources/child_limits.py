"""The bounds a process reading an uploaded file sets on itself, once it is running.

Shared by the PDF extraction child (pdf_text.py) and the child parsing other uploads
(parse_process.py): what a file makes a reader do is not known before reading it, so the
reader runs where it can be bounded and killed, and bounds itself in case its parent is gone.
"""

from __future__ import annotations

import os
import resource
import signal

EXTRACTION_NICE = 10
"""The child's CPU priority once it has used `DEMOTE_AFTER_S` of CPU, lowered: a file that parses
for its whole budget takes a core, and the server's own requests come first then."""
DEMOTE_AFTER_S = 1.0
"""CPU-seconds a child runs at the server's priority. An ordinary PDF is read in less (~0.3-0.6
CPU-s for tens of pages): niced from its start, it got ~7% of a core on a busy 2-core machine
and was refused by the deadline (a 2-page PDF took over 6 s) while nothing else was wrong."""
CPU_KILLED = (-signal.SIGXCPU, -signal.SIGKILL)
"""Exit codes of a child stopped by RLIMIT_CPU (its soft limit, then its hard one)."""
KEPT_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH", "PYTHONHOME",
            "VIRTUAL_ENV")
"""The server's environment variables a reading child keeps (and LC_*): what Python needs to
start, none of the server's secrets (its token, password, API keys, libpq's PGPASSWORD)."""


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a process that reads a stranger's file."""
    env = {k: v for k, v in os.environ.items() if k in KEPT_ENV or k.startswith("LC_")}
    env.update(extra)
    return env


def limit_this_process(cpu_seconds: int, memory: int | None = None) -> None:
    """RLIMIT_CPU at `cpu_seconds` (SIGXCPU, then SIGKILL a second later), no core dump, the
    address space at `memory` bytes (None: as it is), and the priority lowered once
    `DEMOTE_AFTER_S` of CPU are used (a timer counting this process's CPU time)."""
    signal.signal(signal.SIGPROF, lambda *_: os.nice(EXTRACTION_NICE))
    signal.setitimer(signal.ITIMER_PROF, DEMOTE_AFTER_S)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would dump a core of the child
    if memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
