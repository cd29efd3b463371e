"""The engine's one outbound HTTP client for model providers: embeddings, rerankers, chat.

One pooled `httpx.Client` per engine (created on the first model call, closed with the
engine), shared by every provider: keep-alive connections are reused across calls and
threads (httpx's client is thread-safe), where the agents used to open a client per call
and the embedders kept a module-global one. Per-call headers (keys) and timeouts travel
with each request, never on the shared client.

Every request leaves through `ModelHttp.send` (or `stream`), which applies the outbound
policy (`engine/outbound.py`, issue 22) before anything is sent: allowed hosts, no query or
fragment, a slot in the model host's lane (held for a whole stream), the model timeout, and
connections made only to addresses checked when they are made (the pool's transport).

The policy and its lanes belong to this client, so to its engine: two engines in one
process (a test server beside a notebook's engine, two servers with different bounds) each
apply their own, where one process-wide policy let the last engine built set both.

Failures become a `ProviderError` in one line naming the provider and model (`what`) and
the URL's origin, never the key (`scrub_secret`); a call that got no answer reads the same
whatever the reason, and on a shared server an error answer's body is not shown.

Every call belongs to the work that makes it (`interface.control.CURRENT`: an SQL statement,
a request; or the `work` given, an agent run's): it is not sent once that work must stop,
waits no longer than its time left, and is cut when it is stopped (`outbound._CutStream`),
raising `Stopped` in the work's words. EVALUATE and `SELECT answer FROM agent` ran 40 s
past a 6 s deadline before (issue 39). An insert's embeddings belong to no work
(`batch_insert`): an insert is stored whole, whether or not its client still waits.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import httpx

from kbsql.engine import outbound
from kbsql.engine.models import answer_bound
from kbsql.interface.control import Control, bound, checkpoint
from kbsql.interface.errors import InvalidParameter, ProviderError
from kbsql.interface.secrets import scrub_secret

TIMEOUT = httpx.Timeout(60.0, connect=5.0)
LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=16)
"""Enough for `INSERT ... USING threads = 64` against one provider; idle ones are few."""


class ModelHttp:
    """The pooled client; `send` is its only way out."""

    def __init__(self, timeout: httpx.Timeout = TIMEOUT, limits: httpx.Limits = LIMITS, *,
                 policy: outbound.Policy = outbound.OPEN):
        self.timeout = timeout
        self.limits = limits
        self.policy = policy
        self._lanes = outbound.Lanes(policy)
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _pool(self) -> httpx.Client:
        with self._lock:
            if self._closed:
                raise ProviderError("The engine is closed: no model call can be made")
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout,
                                            transport=outbound.transport(self.policy, limits=self.limits))
            return self._client

    def request(self, method: str, url: str, *, json: Any = None, headers: dict[str, str] | None = None,
                timeout: httpx.Timeout | float | None = None) -> httpx.Request:
        """A request for `send` (per-call headers and timeout; the pool's default timeout),
        no longer than the server's model timeout (`kbsql serve --model-timeout`)."""
        chosen = timeout if timeout is not None else self.timeout
        limit = self.policy.timeout
        if limit:
            chosen = _at_most(chosen, limit)
        try:
            return self._pool().build_request(method, url, json=json, headers=headers, timeout=chosen)
        except (httpx.InvalidURL, UnicodeError):  # a host the client cannot encode: the caller's, a 400
            raise InvalidParameter(f"The model URL {url!r} is not a valid URL (its host is not a "
                                   "valid name)") from None

    def send(self, request: httpx.Request, *, who: str = "model provider",
             work: Control | None = None) -> httpx.Response:
        """Send one model request over the pool: the single place every model call leaves
        the engine, after the outbound policy (`who` names the provider in its errors), as
        part of `work` (default: the context's, see the module docstring)."""
        url = str(request.url)
        outbound.check(self.policy, url, who)
        with self._lanes.lane(url, who), bound(work) if work is not None else nullcontext():
            checkpoint()
            return self._pool().send(request)

    @contextmanager
    def stream(self, request: httpx.Request, *, who: str = "model provider",
               work: Control | None = None) -> Iterator[httpx.Response]:
        """`send` with the body read as it arrives, holding the host's lane slot until the
        response is closed (on exit). `work` holds until the answer's head has come; the
        body's reads belong to the context's work (the caller closes the response to stop)."""
        url = str(request.url)
        outbound.check(self.policy, url, who)
        with self._lanes.lane(url, who):
            with bound(work) if work is not None else nullcontext():
                checkpoint()
                response = self._pool().send(request, stream=True)
            try:
                yield response
            finally:
                response.close()

    def post_json(self, url: str, body: dict[str, Any], api_key: Any, what: str,
                  most: int | None = None) -> Any:
        """POST a JSON body (Bearer `api_key` when given) and return the JSON answer; any
        failure is a `ProviderError` saying `what` failed at `url`. The answer is read up to
        `most` bytes (default `model_answer_mb`): an embedding server's 100 MB answer cost
        +1,243 MB and stalled other clients 4.5 s while parsed whole (doors13)."""
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        most = max(most or 0, self.policy.answer_mb << 20)
        try:
            with self.stream(self.request("POST", url, json=body, headers=headers), who=what) as response:
                if response.status_code >= 400:
                    text = scrub_secret(answer_bound.head(response, 300), str(api_key) if api_key else None)
                    raise self.refused(what, url, response.status_code, text)
                raw = answer_bound.whole(response, most)
        except answer_bound.TooLong:
            raise ProviderError(f"{what} at {outbound.origin(url)}: "
                                f"{answer_bound.too_long(most, self.policy.answer_note)}") from None
        except httpx.HTTPError as exc:
            raise outbound.unreachable(what, url) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ProviderError(f"{what} answered something that is not JSON at "
                                f"{outbound.origin(url)}") from exc

    def refused(self, who: str, url: str, status: int, detail: str) -> ProviderError:
        """An error status from `url` as this engine shows it (`outbound.refused`: on a
        confined server in kbsql's words, the provider's `detail` never shown)."""
        return outbound.refused(who, url, status, detail, confined=self.policy.confined)

    def call_timeout(self, default: float) -> float:
        """The longest one model call may take: the engine's model timeout, else `default`."""
        return self.policy.timeout or default

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _at_most(timeout: httpx.Timeout | float, limit: float) -> httpx.Timeout:
    """`timeout` with each of its parts cut to `limit` seconds."""
    given = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
    def cut(value: float | None) -> float:
        return limit if value is None else min(value, limit)
    return httpx.Timeout(connect=cut(given.connect), read=cut(given.read), write=cut(given.write),
                         pool=cut(given.pool))
