"""The engine's one outbound HTTP client for model providers: embeddings, rerankers, chat.

One pooled `httpx.Client` per engine (created on the first model call, closed with the
engine), shared by every provider: keep-alive connections are reused across calls and
threads (httpx's client is thread-safe), where the agents used to open a client per call
and the embedders kept a module-global one. Per-call headers (keys) and timeouts travel
with each request, never on the shared client.

Every request leaves through `ModelHttp.send`: the one place to check a request's URL or
apply a per-host policy before anything is sent.

Failures become a `ProviderError` naming the provider and model (`what`) and the URL,
never the key (`scrub_secret`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from kbsql.interface.errors import ProviderError
from kbsql.interface.secrets import scrub_secret

TIMEOUT = httpx.Timeout(60.0, connect=5.0)
LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=16)
"""Enough for `INSERT ... USING threads = 64` against one provider; idle ones are few."""


class ModelHttp:
    """The pooled client; `send` is its only way out."""

    def __init__(self, timeout: httpx.Timeout = TIMEOUT, limits: httpx.Limits = LIMITS):
        self.timeout = timeout
        self.limits = limits
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _pool(self) -> httpx.Client:
        with self._lock:
            if self._closed:
                raise ProviderError("The engine is closed: no model call can be made")
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout, limits=self.limits)
            return self._client

    def request(self, method: str, url: str, *, json: Any = None, headers: dict[str, str] | None = None,
                timeout: httpx.Timeout | float | None = None) -> httpx.Request:
        """A request for `send` (per-call headers and timeout; the pool's default timeout)."""
        return self._pool().build_request(method, url, json=json, headers=headers,
                                          timeout=timeout if timeout is not None else self.timeout)

    def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """Send one model request over the pool: the single place every model call leaves
        the engine (a streamed response must be closed by the caller: `stream()` does)."""
        return self._pool().send(request, stream=stream)

    @contextmanager
    def stream(self, request: httpx.Request) -> Iterator[httpx.Response]:
        """`send` with the body read as it arrives; the response is closed on exit."""
        response = self.send(request, stream=True)
        try:
            yield response
        finally:
            response.close()

    def post_json(self, url: str, body: dict[str, Any], api_key: Any, what: str) -> Any:
        """POST a JSON body (Bearer `api_key` when given) and return the JSON answer; any
        failure is a `ProviderError` saying `what` failed at `url`."""
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        try:
            response = self.send(self.request("POST", url, json=body, headers=headers))
        except httpx.HTTPError as exc:
            raise ProviderError(f"{what} could not be reached at {url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            text = scrub_secret(response.text[:300], str(api_key) if api_key else None)
            raise ProviderError(f"{what} answered HTTP {response.status_code} at {url}: {text}")
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError(f"{what} answered something that is not JSON at {url}") from exc

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.close()
