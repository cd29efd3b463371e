"""Bounded inputs of `kbsql serve`: body size, SQL size, time to send a request, JSON shape.

Why: one request must not be able to take the server's memory or hold a worker forever.

- A body over `max_body` bytes is refused with 413 before any of it is read when the
  client declares its length, and as soon as it passes the limit when it is chunked.
- SQL text over `max_sql` bytes is refused before the parser sees it (the parser's memory
  grows ~190x the statement's size, see platform-facts.md), as an SQL error (HTTP 200,
  `type: error`) like any other refused statement.
- Request headers must arrive within `timeout` seconds of the connection (or of the
  previous answer on a kept-alive connection), and a body may not stall for `timeout`
  seconds nor take longer than `body_time` in all: 408 (`HeadTimeoutProtocol`, `BodyLimit`).
- A client that goes away in the middle of its body is logged in one line, no traceback.
- JSON bodies are UTF-8 (RFC 8259) and hold no NaN/Infinity (not JSON): a clear 400.

`BodyLimit` is a plain ASGI middleware (like `guard.py`); it only watches `receive` while
the body is still coming, so streamed answers and disconnect watching pass through.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from kbsql.interface.errors import BadRequest, ServiceError
from kbsql.server.connection_shares import CONNECTION, HttpConnections
from kbsql.server.door_bounds import Pending, Unread
from kbsql.server.flood import FloodBrake
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


def _head_part(tail: bytes, data: bytes) -> tuple[bytes, bytes]:
    """(the part of `data` that belongs to the request head, the last 3 bytes seen): the
    head ends at the first blank line, which may straddle two reads (`tail` is the end of
    the previous one); a body sent in the same read is not counted."""
    window = tail + data
    end = window.find(b"\r\n\r\n")
    part = data if end < 0 else data[:max(0, end + 4 - len(tail))]
    return part, window[-3:]


def _refuse_head(transport: asyncio.Transport, max_head: int, max_headers: int) -> None:
    """431 problem+json for a head over its bounds, and the connection closed."""
    if transport.is_closing():
        return
    log.warning("a request head passed %d bytes or %d headers; answered 431", max_head, max_headers)
    detail = (f"The request head is over this server's limit of {max_head} bytes or "
              f"{max_headers} headers (kbsql serve --max-head-kb, --max-headers)")
    body = json.dumps({"type": "about:blank", "title": "Request header fields too large",
                       "status": 431, "detail": detail}).encode()
    transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                    b"content-type: application/problem+json\r\n"
                    b"content-length: " + str(len(body)).encode() +
                    b"\r\nconnection: close\r\n\r\n" + body)
    transport.close()


class _UnreadBound(HttpToolsProtocol):
    """uvicorn's httptools protocol counting, in `unread`, what it holds of an answer while
    its client does not take it (a full socket pauses the writes), and in `flood` its
    closing by the pending cap."""

    unread = Unread(sys.maxsize)
    flood: FloodBrake | None = None
    owned = HttpConnections(sys.maxsize)  # what each credential keeps open (connection_shares)
    write_timeout = DEFAULT_WRITE_TIMEOUT_S
    _write_timer: asyncio.TimerHandle | None = None

    def evicted(self) -> None:
        """Closed by the pending cap: counted by the flood brake (its block's rate)."""
        if self.flood is not None:
            self.flood.evicted(self.transport.get_extra_info("peername"))
        self.transport.abort()

    def pause_writing(self) -> None:
        super().pause_writing()
        self.unread.paused(self, self.transport.get_write_buffer_size, self.transport.abort)
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout, self._write_expired)

    def resume_writing(self) -> None:
        self.unread.resumed(self)
        self._write_taken()
        super().resume_writing()

    def on_headers_complete(self) -> None:
        CONNECTION.set(self)  # the request's task (made next) knows its connection
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.owned.release(self)
        self.unread.resumed(self)
        self._write_taken()
        self._drained()
        super().connection_lost(exc)

    def _write_taken(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_expired(self) -> None:
        """The client has left its answer unread for `write_timeout` (the MySQL door's
        --mysql-write-timeout): closed, which ends a stream whose model call the server had
        stopped reading. Without it two completion streams nobody read held two model
        workers and both slots of their model host for as long as their clients stayed (60 s
        and more with --model-timeout 10: a stream's call is not read, so nothing timed it)."""
        self._write_timer = None
        if not self.transport.is_closing():
            log.warning("a client left its answer unread for %.0f s (--http-write-timeout); closed",
                        self.write_timeout)
            self.transport.abort()

    # a request answered before its body has all come (a 401 without a token, a 413) ----------
    not_let_in = Pending(sys.maxsize, "HTTP")
    drain_s = DEFAULT_TIMEOUT_S
    _drain_timer: asyncio.TimerHandle | None = None
    _body_open = False  # a head has come, its body has not all come yet

    def on_response_complete(self) -> None:
        """Answered before its body has all come: the rest of the body has `drain_s`, and the
        connection counts as one not let in (`not_let_in`, the pending cap), so bodies dripped
        after a refusal cannot hold the descriptors the cap keeps for everyone (1,100 tokenless
        POSTs sending a byte every 3 s kept both doors from new clients)."""
        super().on_response_complete()
        if self._body_open and not self.transport.is_closing():
            self._drain_timer = self.loop.call_later(self.drain_s, self._drain_expired)
            self.not_let_in.add(self, self.evicted)

    def _drain_expired(self) -> None:
        self._drain_timer = None
        if not self.transport.is_closing():
            log.warning("a client did not finish a request body it was answered for in %.0f s; closed",
                        self.drain_s)
            self.transport.close()

    def _drained(self) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        self.not_let_in.done(self)


def head_timeout_protocol(timeout: float, max_head: int = DEFAULT_MAX_HEAD,
                          max_headers: int = DEFAULT_MAX_HEADERS, pending: Pending | None = None,
                          unread: Unread | None = None, brake: FloodBrake | None = None,
                          write_timeout: float = DEFAULT_WRITE_TIMEOUT_S,
                          connections: HttpConnections | None = None) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with a deadline and a size bound for the request head (uvicorn times out
    idle connections, not a head that never completes; httptools keeps every header: 3,000,000 tiny ones
    grew the server 345 MB), so its bytes and lines are counted as they arrive (431 and close); `pending`:
    a cap on connections whose first head has not come (the oldest closed, counted by `brake`);
    `_UnreadBound`, and `connections`: what each credential keeps open."""
    waiting = pending if pending is not None else Pending(sys.maxsize, "HTTP")  # no cap
    bound = unread if unread is not None else _UnreadBound.unread
    shared = connections if connections is not None else _UnreadBound.owned
    unread_wait = write_timeout  # the class body below cannot read a parameter of the same name

    class HeadTimeoutProtocol(_UnreadBound):
        unread, flood, not_let_in, drain_s, write_timeout = bound, brake, waiting, timeout, unread_wait
        owned = shared
        _head_timer: asyncio.TimerHandle | None = None
        _in_head, _head_bytes, _head_lines, _tail = True, 0, 0, b""

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(timeout, self._head_expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                log.warning("a client did not finish its request head in %.0f s; closed", timeout)
                self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n"
                                     b"connection: close\r\n\r\n")
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            waiting.add(self, self.evicted)

        def data_received(self, data: bytes) -> None:
            if self._in_head:  # the bytes up to the blank line that ends the head
                part, self._tail = _head_part(self._tail, data)
                self._head_bytes += len(part)
                self._head_lines += part.count(b"\n")
                if self._head_bytes > max_head or self._head_lines > max_headers + 2:
                    self._head_too_large()
                    return
            super().data_received(data)

        def _head_too_large(self) -> None:
            self._disarm()
            self._in_head = False
            _refuse_head(self.transport, max_head, max_headers)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            self._in_head, self._head_bytes, self._head_lines, self._tail = False, 0, 0, b""
            self._body_open = True
            waiting.done(self)
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._body_open = True, False  # the next request's head
            self._drained()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            waiting.done(self)
            super().connection_lost(exc)

    return HeadTimeoutProtocol
