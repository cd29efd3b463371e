"""Request guard of `kbsql serve`: keep web pages the user visits from driving the server.

Why: the server listens on loopback with no credentials, so any page open in the user's
browser could POST to it (CSRF) or, via DNS rebinding, read from it. Three checks, before
any route runs, each answering problem+json:

- a body must be `application/json` (415): a browser cannot send that cross-site without a
  CORS preflight, which this server never answers. `PUT /api/files/{name}` also takes table
  files (Parquet, CSV, octet-stream, no type, or multipart/form-data as mindsdb_sdk sends);
  PUT is never a "simple" request, so a browser preflights it whatever its content type
  (so is mindsdb_sdk's BYOM upload, a multipart PUT whose route refuses the feature);
- an `Origin` header, when present, must be a loopback origin or one allowed with
  `kbsql serve --allow-origin URL` (403); clients outside a browser send none;
- when bound to a loopback address, the `Host` header must name loopback or the bound host
  (403): a rebound DNS name resolving to 127.0.0.1 carries its own name in `Host`.

And MindsDB's tenant header, `company-id`, other than its default (empty, 0, the zero UUID)
is refused (400): one server serves one company, so a client keeping two companies apart
would see each other's data (MindsDB's tests/integration/flows/test_company_independent.py).

A plain ASGI middleware (not BaseHTTPMiddleware) so streamed answers and client
disconnects pass through untouched.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from kbsql.interface.errors import clipped

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
JSON_TYPES = {"application/json"}
FILE_TYPES = {"text/csv", "application/octet-stream",
              "application/vnd.apache.parquet", "application/x-parquet", "application/parquet", "",
              "multipart/form-data", "application/json"}  # JSON: MindsDB's URL form (refused)
FILES_PREFIX = "/api/files/"
BYOM_PREFIX = "/api/handlers/byom/"  # mindsdb_sdk's create_byom: a multipart PUT, refused by its route


def is_loopback_host(host: str) -> bool:
    """`localhost`, `*.localhost`, or a loopback IP literal (brackets allowed)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_origin(origin: str) -> str:
    """`scheme://host[:port]` lower-cased, without a path or trailing slash."""
    parts = urlsplit(origin.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}" if parts.scheme else origin.strip()


def _host_of(authority: str) -> str:
    """The host part of a `Host` header or an origin's netloc (`[::1]:80` -> `::1`)."""
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


class RequestGuard:
    """ASGI middleware applying the three checks above to every HTTP request."""

    def __init__(self, app: App, *, bind_host: str | None = None,
                 allowed_origins: Iterable[str] = ()):
        self.app = app
        self.allowed_origins = {normalize_origin(o) for o in allowed_origins if o}
        self.bind_host = (bind_host or "").strip("[]").lower()
        # only a loopback bind is protected against rebinding; a server bound to a public
        # address is reached under names we cannot know
        self.check_host = bool(self.bind_host) and is_loopback_host(self.bind_host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                await send_problem(send, *refusal)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """(status, title, detail) when the request must be refused, else None."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        host = headers.get("host")
        if self.check_host and host is not None:
            name = _host_of(host).lower()
            if not (is_loopback_host(name) or name == self.bind_host):
                return (403, "Forbidden host",
                        f"Host {host!r} is not this server's loopback address: connect through "
                        "127.0.0.1 or localhost (or bind the server to another address)")
        company = headers.get("company-id", "").strip()
        if company.replace("-", "").strip("0"):  # MindsDB's tenant header, not its default
            # (empty, 0 or the zero UUID, MindsDB's DEFAULT_COMPANY_ID): honoured nowhere here
            return (400, "Not supported",
                    f"company-id {clipped(company, 40)!r}: this server serves one company (every "
                    "request sees the same projects and data), so MindsDB's company-id header is not "
                    "supported; run one kbsql serve per company")
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin):
            return (403, "Forbidden origin",
                    f"Requests from origin {origin!r} are not allowed; start the server with "
                    "--allow-origin to allow it")
        if _has_body(headers):
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            files = scope.get("method") == "PUT" and scope.get("path", "").startswith(FILES_PREFIX)
            byom = scope.get("method") == "PUT" and scope.get("path", "").startswith(BYOM_PREFIX)
            allowed = FILE_TYPES if files else {"multipart/form-data"} if byom else JSON_TYPES
            if media not in allowed:
                shown = media or "none"
                wanted = ("a Parquet file (application/octet-stream or a parquet type) or "
                          "text/csv") if files else "application/json"
                return (415, "Unsupported media type",
                        f"Content-Type {shown!r} is not accepted here: send {wanted}")
        return None

    def origin_allowed(self, origin: str) -> bool:
        normalized = normalize_origin(origin)
        if normalized in self.allowed_origins or "*" in self.allowed_origins:
            return True
        parts = urlsplit(normalized)
        return parts.scheme in ("http", "https") and is_loopback_host(_host_of(parts.netloc))


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length", "").strip()
    if length:
        return length != "0"
    return "transfer-encoding" in headers


async def send_problem(send: Send, status: int, title: str, detail: str,
                       extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A problem+json answer straight from a middleware (no route ran); auth.py and
    limits.py answer the same way."""
    body = json.dumps({"title": title, "detail": detail}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/problem+json"),
                            (b"content-length", str(len(body)).encode("ascii")),
                            *(extra_headers or [])]})
    await send({"type": "http.response.body", "body": body})
