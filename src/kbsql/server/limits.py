"""Bounded inputs of `kbsql serve`: body size, SQL size, time to send a request, JSON shape.

Why: one request must not be able to take the server's memory or hold a worker forever.

- A body over `max_body` bytes is refused with 413 before any of it is read when the
  client declares its length, and as soon as it passes the limit when it is chunked.
- SQL text over `max_sql` bytes is refused before the parser sees it (the parser's memory
  grows ~190x the statement's size, see platform-facts.md), as an SQL error (HTTP 200,
  `type: error`) like any other refused statement.
- Request headers must arrive within `timeout` seconds of the connection (or of the
  previous answer on a kept-alive connection), and a body may not stall for `timeout`
  seconds nor take longer than `body_time` in all: 408 (`BodyLimit`; the head and what the
  connection leaves unread are bounded in uvicorn's protocol: http_protocol.py).
- A client that goes away in the middle of its body is logged in one line, no traceback.
- JSON bodies are UTF-8 (RFC 8259) and hold no NaN/Infinity (not JSON): a clear 400.

`BodyLimit` is a plain ASGI middleware (like `guard.py`); it only watches `receive` while
the body is still coming, so streamed answers and disconnect watching pass through.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from kbsql.interface.errors import BadRequest, ServiceError
from kbsql.server.guard import App, Message, Receive, Scope, Send, send_problem

log = logging.getLogger("kbsql.server")

MB = 1024 * 1024
DEFAULT_MAX_BODY = 64 * MB
DEFAULT_MAX_SQL = 1 * MB
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_HEAD = 64 * 1024
DEFAULT_MAX_HEADERS = 200
DEFAULT_MAX_UNREAD = 256 * MB
DEFAULT_WRITE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Limits:
    max_body: int = DEFAULT_MAX_BODY
    max_sql: int = DEFAULT_MAX_SQL
    timeout: float = DEFAULT_TIMEOUT_S
    """Seconds for the request head to arrive, and the longest pause inside a body."""
    max_head: int = DEFAULT_MAX_HEAD
    """Bytes of one request head (request line and headers), counted before parsing."""
    max_headers: int = DEFAULT_MAX_HEADERS
    """Header lines of one request head, counted before parsing."""
    max_unread: int = DEFAULT_MAX_UNREAD
    """Bytes all connections together may hold in answers their clients do not read."""
    write_timeout: float = DEFAULT_WRITE_TIMEOUT_S
    """Seconds a connection's answer may wait unread (its socket full) before it is closed."""

    @property
    def max_json_values(self) -> int:
        """Most values a JSON body may hold. Each parsed value costs Python ~30-70 bytes
        while costing JSON as little as 2 (`1,`): a 64 MB body of tiny values would take
        over 1 GB once parsed. A value per 32 bytes of the body limit keeps the worst request
        at a few hundred MB (measured on the default limits: 2M strings in a 57 MB SQL
        `context`, parsed and echoed back, raise the peak by ~420 MB); real rows (text of
        hundreds of bytes) never come near it."""
        return max(100_000, self.max_body // 32)

    @property
    def max_upload_table(self) -> int:
        """Most bytes an uploaded Parquet file may decode to (`PUT /api/files`): 8x the body
        limit, 512 MB by default. Parquet packs repeated values ~1000x, so without it a
        file under the body limit could take tens of GB once read."""
        return 8 * self.max_body

    @property
    def body_time(self) -> float:
        """The longest a whole body may take (a slow drip that never pauses long)."""
        return 10 * self.timeout


class PayloadTooLarge(ServiceError):
    status = 413
    default_title = "Payload too large"


class RequestTimeout(ServiceError):
    status = 408
    default_title = "Request timeout"


class ClientGone(ServiceError):
    """The client closed the connection mid-body; the answer goes nowhere."""

    status = 400
    default_title = "Client disconnected"


def too_large_detail(size: int | str, limit: int) -> str:
    return (f"The request body ({size} bytes) is over this server's limit of {limit} bytes "
            "(kbsql serve --max-body-mb)")


class BodyLimit:
    """ASGI middleware enforcing `Limits` on request bodies."""

    def __init__(self, app: App, *, limits: Limits):
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope.get("headers") or []:
            if name.lower() == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_problem(send, 400, "Bad request", "Content-Length is not a number")
                    return
        if declared is not None and declared > self.limits.max_body:
            await send_problem(send, 413, PayloadTooLarge.default_title,
                               too_large_detail(declared, self.limits.max_body),
                               [(b"connection", b"close")])
            return
        await self.app(scope, _BodyWatch(scope, receive, self.limits, declared), send)


class _BodyWatch:
    """`receive` while the body is coming: counts bytes, times pauses, notices a client
    that goes away. Once the body is complete it is a plain pass-through."""

    def __init__(self, scope: Scope, receive: Receive, limits: Limits, declared: int | None):
        self.scope = scope
        self.receive = receive
        self.limits = limits
        self.declared = declared
        self.size = 0
        self.done = False
        self.deadline: float | None = None

    async def __call__(self) -> Message:
        if self.done:
            return await self.receive()
        loop = asyncio.get_running_loop()
        if self.deadline is None:
            self.deadline = loop.time() + self.limits.body_time
        wait = min(self.limits.timeout, max(0.0, self.deadline - loop.time()))
        try:
            async with asyncio.timeout(wait):  # no task per message, unlike wait_for
                message = await self.receive()
        except TimeoutError:
            self.done = True
            log.warning("%s: the request body stalled after %d bytes; answered 408",
                        self._what(), self.size)
            raise RequestTimeout(f"The request body did not arrive in time (got {self.size} "
                                 "bytes); send it without pausing") from None
        if message["type"] == "http.disconnect":
            self.done = True
            log.warning("%s: the client disconnected after %d of %s bytes of its body",
                        self._what(), self.size, self.declared if self.declared is not None else "?")
            raise ClientGone("The client disconnected before sending the whole body")
        self.size += len(message.get("body", b""))
        if self.size > self.limits.max_body:
            self.done = True
            raise PayloadTooLarge(too_large_detail(f"more than {self.size}", self.limits.max_body))
        if not message.get("more_body", False):
            self.done = True
        return message

    def _what(self) -> str:
        client = self.scope.get("client") or ("?", 0)
        return f"{self.scope.get('method')} {self.scope.get('path')} from {client[0]}"


def parse_json(raw: bytes, limits: Limits | None = None) -> Any:
    """A JSON body: UTF-8 only, no NaN/Infinity, at most `limits.max_json_values` values
    (counted from the separators and opening brackets, an upper bound, before parsing).
    Errors name the problem."""
    if limits is not None and len(raw) > limits.max_json_values:
        # nested empty containers (`[[[]]]`) need no separator: 64 MB of them are 30M+
        # lists (~3 GB parsed), so each opening bracket counts as a value too
        values = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{") + 1
        if values > limits.max_json_values:
            raise PayloadTooLarge(f"The request body holds up to {values} JSON values, over this "
                                  f"server's limit of {limits.max_json_values} (one per 32 bytes "
                                  "of --max-body-mb): send the rows in several requests")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"The request body is not UTF-8 (byte {exc.start}): JSON must be sent "
                         "as UTF-8", title="Invalid JSON") from None
    if text.startswith("\ufeff"):
        raise BadRequest("The request body starts with a byte order mark: send UTF-8 JSON "
                         "without one", title="Invalid JSON")
    return json.loads(text, parse_constant=_no_constant) if text else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (use null or a number)")


def check_sql_size(query: str, limits: Limits) -> str | None:
    """The error message when `query` is over the SQL size limit, else None."""
    if len(query) * 4 <= limits.max_sql:  # cheap: a str never takes more than 4 UTF-8 bytes a char
        return None
    size = len(query.encode("utf-8"))
    if size <= limits.max_sql:
        return None
    return (f"The SQL text ({size} bytes) is over this server's limit of {limits.max_sql} bytes "
            "(kbsql serve --max-sql-kb): insert large data through the REST insert "
            "(PUT .../knowledge_bases/{name} with rows) or split the statement")
