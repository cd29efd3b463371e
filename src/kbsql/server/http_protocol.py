"""The HTTP connection's own bounds, in uvicorn's protocol (limits.py bounds the request's
body and SQL; this is what happens before and after a request reaches the app): a request
head bounded in bytes, lines and time (431, or the connection closed), an answer the client
leaves unread bounded in bytes and time, a body it was answered for drained within a time,
connections waiting to be let in and those each credential keeps open counted
(door_bounds.py, connection_shares.py), a flood of new connections braked (flood.py).
`head_timeout_protocol` builds the protocol class `kbsql serve` hands uvicorn (run.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from kbsql.server.connection_shares import CONNECTION, HttpConnections
from kbsql.server.door_bounds import Pending, Unread
from kbsql.server.flood import FloodBrake
from kbsql.server.limits import (
    DEFAULT_MAX_HEAD,
    DEFAULT_MAX_HEADERS,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WRITE_TIMEOUT_S,
)

log = logging.getLogger("kbsql.server")


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
