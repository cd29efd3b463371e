"""An httpx transport over the standard library's `http.client`, for plain-HTTP servers.

Why: a keep-alive `SELECT 1` to `kbsql serve` is ~1.2 ms in all on these machines, and
httpx's default transport (httpcore + h11) spends ~0.13 ms more client CPU on it than this
one (0.65 against 0.52 ms a request, blocks of 400 alternating on one server): httpcore
writes a request's head and body in two `send()` calls, polls the socket before every
read and write, and runs h11's state machine in Python. httpx stays the client
(its API, redirects, timeouts, errors, streaming); only the bytes on the wire go through
`http.client`, which sends a small request in one `send()` and parses the answer in C
where it can. HTTPS keeps httpx's own transport (its TLS settings are httpx's).

Connections are kept alive in a small pool shared by threads; one that the server closed
while idle is noticed before reuse (readable with nothing to read) and replaced.
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
ONE_WRITE = 64 * 1024
"""A body up to this size leaves with its head in one write; a larger one is not copied."""
_UNSAFE = re.compile(rb"[\r\n\0]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class StdlibTransport(httpx.BaseTransport):
    """`http://` requests on pooled keep-alive sockets, answers parsed by `http.client`."""

    def __init__(self, *, socket_options: Sequence[SocketOption] = (), pool_size: int = POOL_SIZE):
        self._options = tuple(socket_options)
        self._pool_size = pool_size
        self._idle: dict[tuple[str, int], list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"StdlibTransport serves http:// only, not {url.scheme}://",
                                            request=request)
        key = (url.host, url.port or 80)
        timeouts = request.extensions.get("timeout") or {}
        head, body = _head(request), request.read()
        message = [head + body] if len(body) <= ONE_WRITE else [head, body]
        sock, reused = self._take(key, timeouts.get("connect"), request)
        try:
            response = _exchange(sock, request, message, timeouts)
        except _Stale as stale:
            sock.close()
            # A kept-alive connection the server closed while idle: the request never
            # reached it when the write failed; when the answer is missing it may have,
            # so only a method safe to repeat (RFC 9110 9.2.2) is sent again.
            if not reused or not (stale.unsent or request.method in SAFE_METHODS):
                raise httpx.RemoteProtocolError("The server closed the connection without "
                                                "answering", request=request) from None
            sock, _ = self._take(key, timeouts.get("connect"), request, fresh=True)
            try:
                response = _exchange(sock, request, message, timeouts)
            except _Stale:
                sock.close()
                raise httpx.RemoteProtocolError("The server closed the connection without "
                                                "answering", request=request) from None
        return httpx.Response(
            status_code=response.status,
            headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()],
            stream=_Body(response, sock, self, key, request),
            extensions={"http_version": b"HTTP/1.1",
                        "reason_phrase": (response.reason or "").encode("latin-1")},
        )

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
        for option in self._options:
            sock.setsockopt(*option)
        return sock, False

    def _give_back(self, key: tuple[str, int], sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and len(idle) < self._pool_size:
                idle.append(sock)
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
        for sock in sockets:
            sock.close()


class _Stale(Exception):
    """The server closed the connection before answering; `unsent`: before the request
    was written."""

    def __init__(self, unsent: bool):
        super().__init__()
        self.unsent = unsent


def _head(request: httpx.Request) -> bytes:
    """The request line and headers, as httpx built them (Host, Content-Length...)."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if _UNSAFE.search(name) or _UNSAFE.search(value):
            raise httpx.LocalProtocolError(f"Illegal character in header {name!r}", request=request)
        lines.append(name + b": " + value)
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def _exchange(sock: socket.socket, request: httpx.Request, message: list[bytes],
              timeouts: dict[str, Any]) -> http.client.HTTPResponse:
    """Send the request (a small one in one write) and read the answer's head."""
    try:
        sock.settimeout(timeouts.get("write"))
        for part in message:
            sock.sendall(part)
    except (BrokenPipeError, ConnectionResetError):
        early = _early_answer(sock, request, timeouts)
        if early is not None:  # e.g. a 413 sent before the body was read, then a hang-up
            return early
        raise _Stale(unsent=True) from None
    except TimeoutError as exc:
        sock.close()
        raise httpx.WriteTimeout(f"Sending timed out: {exc}", request=request) from exc
    except OSError as exc:
        sock.close()
        raise httpx.WriteError(f"{type(exc).__name__}: {exc}", request=request) from exc
    try:
        sock.settimeout(timeouts.get("read"))
        response = http.client.HTTPResponse(sock, method=request.method)
        response.begin()
        return response
    except (ConnectionResetError, http.client.RemoteDisconnected):
        raise _Stale(unsent=False) from None
    except TimeoutError as exc:
        sock.close()
        raise httpx.ReadTimeout(f"No answer in time: {exc}", request=request) from exc
    except (OSError, http.client.HTTPException) as exc:
        sock.close()
        raise httpx.RemoteProtocolError(f"{type(exc).__name__}: {exc}", request=request) from exc


def _early_answer(sock: socket.socket, request: httpx.Request,
                  timeouts: dict[str, Any]) -> http.client.HTTPResponse | None:
    """The answer a server sent before it stopped reading our request, if it did."""
    try:
        sock.settimeout(timeouts.get("read"))
        response = http.client.HTTPResponse(sock, method=request.method)
        response.begin()
        return response
    except (OSError, http.client.HTTPException):
        return None


def _still_open(sock: socket.socket) -> bool:
    """An idle kept-alive connection is usable when its socket has nothing to read: a
    readable idle socket means the server closed it (or sent garbage)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


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
        reusable = self._done and not self._response.will_close
        self._response.close()
        if reusable:
            self._transport._give_back(self._key, self._sock)
        else:
            self._sock.close()
