"""An httpx transport over the standard library's `http.client`, for plain-HTTP servers.

Why: a keep-alive `SELECT 1` to `kbsql serve` is ~1.2 ms in all on these machines, and
httpx's default transport (httpcore + h11) spends ~0.13 ms more client CPU on it than this
one (0.65 against 0.52 ms a request, blocks of 400 alternating on one server): httpcore
writes a request's head and body in two `send()` calls, polls the socket before every
read and write, and runs h11's state machine in Python. httpx stays the client (its API,
redirects, timeouts, errors, streaming); only the bytes on the wire go through here, and
`http.client` parses the answers. HTTPS (also an http:// server redirecting to https://)
goes to httpx's own transport, whose TLS settings are httpx's.

Connections are kept alive in a small pool shared by threads; one that the server closed
while idle is noticed before reuse (readable with nothing to read) and replaced. What
httpcore does is kept where a user would notice it: a write timeout is per 64 KB sent, not
for a whole upload; an answer the server sends before reading the whole body (a 413) is
read; interim 1xx answers are skipped; a request whose answer was lost is sent again only
when that is safe (the write failed, or the method is safe to repeat).
"""

from __future__ import annotations

import http.client
import re
import select
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

SocketOption = tuple[int, int, int]
POOL_SIZE = 8
"""Idle connections kept per server; more may be open at once, the rest close when done."""
READ_CHUNK = 64 * 1024
WRITE_CHUNK = 64 * 1024
"""A request goes out in pieces this big, each with the whole write timeout (as httpcore);
a body up to this size leaves with its head in one write."""
_UNSAFE = re.compile(rb"[\r\n\0]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_FRAMING = (b"content-length", b"transfer-encoding")


class StdlibTransport(httpx.BaseTransport):
    """`http://` requests on pooled keep-alive sockets, answers parsed by `http.client`."""

    def __init__(self, *, socket_options: Sequence[SocketOption] = (), pool_size: int = POOL_SIZE):
        self._options = tuple(socket_options)
        self._pool_size = pool_size
        self._idle: dict[tuple[str, int], list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._other: httpx.HTTPTransport | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return self._httpx().handle_request(request)
        key = (url.host, url.port or 80)
        timeouts = request.extensions.get("timeout") or {}
        body = request.read()
        head = _head(request, len(body))
        message = [head + body] if len(body) <= WRITE_CHUNK else [head, body]
        sock, reused = self._take(key, timeouts.get("connect"), request)
        try:
            try:
                response = _exchange(sock, request, message, timeouts)
            except _Stale as stale:
                sock.close()
                # A kept-alive connection the server closed while idle: the request never
                # reached it when the write failed; when the answer is missing it may have,
                # so only a method safe to repeat (RFC 9110 9.2.2) is sent again.
                if not reused or not (stale.unsent or request.method in SAFE_METHODS):
                    raise _lost(request) from None
                sock, _ = self._take(key, timeouts.get("connect"), request, fresh=True)
                try:
                    response = _exchange(sock, request, message, timeouts)
                except _Stale:
                    raise _lost(request) from None
        except BaseException:  # also Ctrl-C while waiting: the socket is in an unknown state
            sock.close()
            raise
        return httpx.Response(
            status_code=response.status,
            headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()],
            stream=_Body(response, sock, self, key, request),
            extensions={"http_version": b"HTTP/1.0" if response.version == 10 else b"HTTP/1.1",
                        "reason_phrase": (response.reason or "").encode("latin-1")},
        )

    def _httpx(self) -> httpx.HTTPTransport:
        with self._lock:
            if self._other is None:
                self._other = httpx.HTTPTransport(socket_options=list(self._options))
            return self._other

    def _take(self, key: tuple[str, int], connect_timeout: float | None, request: httpx.Request,
              *, fresh: bool = False) -> tuple[socket.socket, bool]:
        """An idle connection still open, else a new one; and whether it was reused."""
        if self._closed:
            raise RuntimeError("The transport is closed")
        if not fresh:
            with self._lock:
                idle = self._idle.get(key, [])
                while idle:
                    sock = idle.pop()
                    if _still_open(sock):
                        return sock, True
                    sock.close()
        try:
            sock = socket.create_connection(key, timeout=connect_timeout)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"Connecting timed out: {exc}", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"[Errno {exc.errno}] {exc.strerror or exc}",
                                     request=request) from exc
        try:
            for option in self._options:
                sock.setsockopt(*option)
        except OSError as exc:
            sock.close()
            raise httpx.ConnectError(f"Cannot set a socket option: {exc}", request=request) from exc
        return sock, False

    def _give_back(self, key: tuple[str, int], sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and len(idle) < self._pool_size and sock not in idle:
                idle.append(sock)
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
            other, self._other = self._other, None
        for sock in sockets:
            sock.close()
        if other is not None:
            other.close()


class _Stale(Exception):
    """The server closed the connection before answering; `unsent`: before the request
    was written."""

    def __init__(self, unsent: bool):
        super().__init__()
        self.unsent = unsent


def _lost(request: httpx.Request) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError("The server closed the connection without answering",
                                     request=request)


def _head(request: httpx.Request, length: int) -> bytes:
    """The request line and headers as httpx built them (Host, Accept...). The body is
    always sent whole, so it is framed by its length (a streamed body httpx marked
    `chunked` has been read by now)."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if _UNSAFE.search(name) or _UNSAFE.search(value):
            raise httpx.LocalProtocolError(f"Illegal character in header {name!r}", request=request)
        if name.lower() not in _FRAMING:
            lines.append(name + b": " + value)
    if length or request.method not in SAFE_METHODS:
        lines.append(b"Content-Length: %d" % length)
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


class _Response(http.client.HTTPResponse):
    """`http.client`'s answer, skipping every interim 1xx answer (it skips only 100)."""

    def _read_status(self) -> tuple[str, int, str]:
        version, status, reason = super()._read_status()  # type: ignore[misc]
        if 100 < status < 200 and status != 101:  # 102, 103 Early Hints: begin() skips it
            return version, http.client.CONTINUE, reason
        return version, status, reason


def _exchange(sock: socket.socket, request: httpx.Request, message: list[bytes],
              timeouts: dict[str, Any]) -> http.client.HTTPResponse:
    """Send the request and read the answer's head."""
    try:
        sock.settimeout(timeouts.get("write"))
        for part in message:
            view = memoryview(part)
            for start in range(0, len(view), WRITE_CHUNK):
                sock.sendall(view[start:start + WRITE_CHUNK])
    except (BrokenPipeError, ConnectionResetError):
        early = _read_answer(sock, request, timeouts)
        if early is not None:  # e.g. a 413 sent before the body was read, then a hang-up
            return early
        raise _Stale(unsent=True) from None
    except TimeoutError as exc:
        raise httpx.WriteTimeout(f"Sending timed out: {exc}", request=request) from exc
    except OSError as exc:
        raise httpx.WriteError(f"{type(exc).__name__}: {exc}", request=request) from exc
    try:
        return _answer(sock, request, timeouts)
    except (ConnectionResetError, http.client.RemoteDisconnected):
        raise _Stale(unsent=False) from None
    except TimeoutError as exc:
        raise httpx.ReadTimeout(f"No answer in time: {exc}", request=request) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise httpx.RemoteProtocolError(f"{type(exc).__name__}: {exc}", request=request) from exc


def _answer(sock: socket.socket, request: httpx.Request,
            timeouts: dict[str, Any]) -> http.client.HTTPResponse:
    """The answer's status line and headers, read from `sock`."""
    sock.settimeout(timeouts.get("read"))
    response = _Response(sock, method=request.method)
    response.begin()
    return response


def _read_answer(sock: socket.socket, request: httpx.Request,
                 timeouts: dict[str, Any]) -> http.client.HTTPResponse | None:
    """The answer a server sent before it stopped reading our request, if it did."""
    try:
        return _answer(sock, request, timeouts)
    except (OSError, http.client.HTTPException):
        return None


def _still_open(sock: socket.socket) -> bool:
    """An idle kept-alive connection is usable when its socket has nothing to read: a
    readable idle socket means the server closed it (or sent garbage)."""
    poller = select.poll()  # not select(): it fails on descriptors past 1024
    try:
        poller.register(sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


class _Body(httpx.SyncByteStream):
    """The answer's body as it arrives; closing it returns the connection to the pool when
    the body was read to its end and the server keeps the connection open."""

    def __init__(self, response: http.client.HTTPResponse, sock: socket.socket,
                 transport: StdlibTransport, key: tuple[str, int], request: httpx.Request):
        self._response = response
        self._sock = sock
        self._transport = transport
        self._key = key
        self._request = request
        self._done = False
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        try:
            while True:
                chunk = response.read1(READ_CHUNK)
                if not chunk:
                    if response.length:  # the server hung up before the declared length
                        raise httpx.RemoteProtocolError(
                            f"The answer ended {response.length} bytes short of its length",
                            request=self._request)
                    self._done = True
                    return
                yield chunk
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"The answer stalled: {exc}", request=self._request) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=self._request) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        reusable = self._done and not self._response.will_close
        self._response.close()
        if reusable:
            self._transport._give_back(self._key, self._sock)
        else:
            self._sock.close()
