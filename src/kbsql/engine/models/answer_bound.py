"""A model's answer read with a bound on its bytes (`model_answer_mb`, `kbsql serve
--model-answer-mb`).

A chat provider's stream is the model server's to end: one that sent 1 MB deltas without end
grew `kbsql serve --sql-memory-mb 256` by 21 GB in the 300 s of an agent's wall time (the turn's
text is kept whole for the answer and the conversation), and one 50 MB `data:` line cost
+200 MB before anything looked at it (`httpx`'s `iter_lines` keeps a line whole). Here the
answer's bytes are counted as they arrive, a line included before it ends, and the call fails
at the bound in one line; `check` (the run's deadline and cancel) is looked at between reads,
so a line that never ends does not outlive the run either (issue 39).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx

DEFAULT_MB = 8
"""A model turn is kilobytes (its text and tool arguments); 8 MB leaves room for a long one."""


class TooLong(Exception):
    """The answer passed its bound; the message says which and where to change it."""


def lines(response: httpx.Response, limit: int, check: Callable[[], None], note: str) -> Iterator[str]:
    """The response's text lines (without their `\\n` or `\\r\\n`), failing with `TooLong` once
    more than `limit` bytes have come (`note`: the setting that raises it)."""
    parts: list[str] = []  # the line so far, joined only when it ends (no quadratic copy)
    received = 0
    for text in response.iter_text():
        check()
        received += len(text) if text.isascii() else len(text.encode())
        if received > limit:
            raise TooLong(too_long(limit, note))
        *ended, rest = text.split("\n")
        for piece in ended:
            parts.append(piece)
            yield "".join(parts).removesuffix("\r")
            parts = []
        if rest:
            parts.append(rest)
    if parts:
        yield "".join(parts).removesuffix("\r")


def head(response: httpx.Response, limit: int) -> str:
    """At most `limit` bytes of an error answer's body, as text (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit].decode("utf-8", "replace")


def whole(response: httpx.Response, limit: int) -> bytes:
    """The whole body, failing with `TooLong` once more than `limit` bytes have come."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise TooLong(f"more than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def too_long(limit: int, note: str) -> str:
    return f"it answered more than {limit / 2**20:g} MB ({note})"
