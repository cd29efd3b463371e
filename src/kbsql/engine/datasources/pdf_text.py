"""A PDF's page texts, read in a process of its own under a deadline and a CPU bound.

Why: pypdf's text extraction is pure Python and its cost follows the content streams, not
the file's size: a 3 KB PDF of 12 pages sharing one stream of 90,000 text operators kept
a server worker busy ~2 CPU-s a page, and a thread cannot be stopped. In a child process
(`python -m kbsql.engine.datasources.pdf_text`, the PDF on stdin, a JSON list of page
texts on stdout) it is killed at the deadline, and RLIMIT_CPU stops it even if the parent
is gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

CHILD_MEMORY = 1 << 30  # address space of the child beyond which allocation fails


def page_texts(raw: bytes, seconds: float, max_chars: int,
               refuse: Callable[[str], Exception]) -> list[str]:
    """The text of each page of `raw`; `refuse(line)` makes the error for a PDF that
    cannot be read, is over `max_chars` of text, or takes more than `seconds`."""
    try:
        done = subprocess.run([sys.executable, "-m", __name__, str(max_chars), str(int(seconds) + 1)],
                              input=raw, capture_output=True, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise refuse(f"reading the PDF took more than {seconds:g} s") from None
    if done.returncode != 0:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["killed"]
        raise refuse(last[0][:300])
    texts: list[str] = json.loads(done.stdout)
    return texts


def _main(max_chars: int, cpu_seconds: int) -> None:
    import io
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
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
