"""Where model calls may go, how many at once, how long each may take, and how a failure
reads: the one check every outbound model call passes (embeddings, reranking, evaluation
and agents alike leave through the engine's `ModelHttp`, engine/models/model_http.py).

Why: a knowledge base's or an agent's `base_url` is chosen by whoever creates it. On a
shared server that made the server a port scanner of its own network: any internal address
was called, open and closed ports answered differently, and up to 300 characters of the
target's answer came back. So:

- `check_url` (always): http(s) only, no query or fragment (`?`/`#` would neutralise the path
  kbsql appends, sending the request to a path the user chose).
- `Policy.allowed` (a server with a token or a public bind): the hosts the operator allows
  (`kbsql serve --allow-model-host HOST[:PORT]`); `*` means any host whose addresses are all
  public. Loopback, private, link-local and reserved addresses are reached only when named.
  Hosts in the operator's own default models (config.json, environment) count as named.
- A failure to connect reads the same for a closed port, a timeout or an unreachable host
  (`unreachable`); on a confined server an error status is named in kbsql's words and the
  answer's body is never shown (`refused`).
- `Lanes.lane(url)`: at most `concurrency` calls in flight per model host; a call that finds its
  lane full waits up to `queue_wait` seconds, then fails with `Busy` (503 + Retry-After).
- `timeout`: the longest one model call may take (`kbsql serve --model-timeout`; applied by
  `ModelHttp`).
- `transport(policy)`: the same host rule again when the connection is made, on the address
  connected to. A name checked as public could resolve to 127.0.0.1 a moment later (DNS
  rebinding); the connection is made to an address checked at that moment.
- Its connections belong to the work in progress (`interface.control.CURRENT`: a statement,
  a request; `_CutStream`): no read or write waits past the work's deadline, and stopping the
  work (its client left, its deadline passed) shuts the socket at once, so a call blocked
  before the first byte of its answer stops then, not at the model timeout (issue 39).

The policy is per engine, never per process: each engine's one model client (`ModelHttp`,
engine/models/model_http.py) holds its `Policy` and its `Lanes`, and every check here takes the
policy it applies. Two engines in one process (a test server and a notebook's engine, two
servers with different bounds) used to share one module-global policy, the last one
configured silently applying to both. The functions here hold no state; `OPEN` (anything
goes: an embedded engine) is the immutable default.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from kbsql.engine.settings_table import BY_NAME
from kbsql.interface.control import Control, owner_share
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import Busy, InvalidParameter, ProviderError

ANY_PUBLIC = "*"
DEFAULT_CONCURRENCY = 16
DEFAULT_QUEUE_WAIT_S = 5.0


@dataclass(frozen=True)
class Policy:
    allowed: tuple[str, ...] | None = None
    """HOST or HOST:PORT entries (lower case), `*` for any public host; None: anywhere."""
    confined: bool = False
    """A server others use: error bodies are not shown, failures read alike."""
    timeout: float | None = None
    answer_mb: int = 8
    """Most one model answer may send, in MB (engine/models/answer_bound.py)."""
    concurrency: int = DEFAULT_CONCURRENCY
    queue_wait: float = DEFAULT_QUEUE_WAIT_S
    served: bool = True  # set by `kbsql serve`'s flags, else by an embedded engine's config

    @property
    def flag_note(self) -> str:
        """Where the operator allows hosts, as a refusal names it."""
        if self.served:
            return f"kbsql serve {BY_NAME['allowed_model_hosts'].flag}"
        return "the allowed_model_hosts setting (config.json or kbsql.connect(settings=...))"

    @property
    def answer_note(self) -> str:
        """Where the operator raises the bound on a model answer, as a refusal names it."""
        setting = BY_NAME["model_answer_mb"]
        return f"kbsql serve {setting.flag}" if self.served else f"{setting.name} in config.json"

    @property
    def place(self) -> str:
        """Where the bounds hold, as messages say it."""
        return "on this server" if self.served else "in this engine"


OPEN = Policy()
"""Anything goes: an embedded engine's policy unless its config bounds model calls."""


def origin(url: str) -> str:
    """`scheme://host:port` of a URL: what a message may show (no path, no credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    shown = f"[{host}]" if ":" in host else host
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{shown}:{port}"


def check_url(url: str, what: str = "base_url") -> None:
    """A model URL must be http(s) with a host, and carry no query or fragment."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise InvalidParameter(f"{what} {url!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParameter(f"{what} must be an http:// or https:// URL with a host")
    try:  # the HTTP client's own reading: a host it cannot encode (IDNA) is refused here, not a 500
        httpx.URL(url).host  # noqa: B018
    except (httpx.InvalidURL, UnicodeError):
        raise InvalidParameter(f"{what} {url!r} is not a valid URL (its host is not a valid "
                               "name)") from None
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise InvalidParameter(f"{what} must not have a query (?...) or a fragment (#...): kbsql "
                               "appends the API path to it")


def check(current: Policy, url: str, who: str) -> None:
    """Refuse a call to `url` that `current` does not allow (a `ProviderError` saying so)."""
    try:
        check_url(url)
    except InvalidParameter as exc:
        raise ProviderError(f"{who}: {exc.detail}") from None
    if current.allowed is None:
        return
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if _named(current, host, port) or (ANY_PUBLIC in current.allowed and _all_public(host, port)):
        return
    raise ProviderError(f"{who}: model calls to {_shown(host)}:{port} are not allowed {current.place} "
                        f"(the operator allows hosts with {current.flag_note})")


def _named(current: Policy, host: str, port: int) -> bool:
    allowed = current.allowed or ()
    return host in allowed or f"{_shown(host)}:{port}" in allowed


def allowed_address(allowed: tuple[str, ...], host: str, port: int) -> str | None:
    """Where a connection to `host:port` may go under `allowed` (HOST[:PORT] entries, `*` any
    public host): `host` itself when named, else one of its addresses checked public (connect
    to that address, not to the name again: it could resolve elsewhere a moment later);
    None: not allowed. Data sources' connections pass this rule (postgres_source.py)."""
    name = host.lower().strip("[]")
    if _named(Policy(allowed=allowed), name, port):
        return host
    return _public_address(name, port) if ANY_PUBLIC in allowed else None


def host_port(url: str) -> str | None:
    """`HOST:PORT` of a URL as an allowed-host entry (the scheme's port when none is given);
    None for a URL without a host or with a port that is not a number."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return f"{_shown(host)}:{port}" if host else None


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _all_public(host: str, port: int) -> bool:
    """Whether every address `host` resolves to is a public one (an unresolvable name: no)."""
    return _public_address(host, port) is not None


def _public_address(host: str, port: int) -> str | None:
    """One address of `host` when every address it resolves to is public, else None."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses or not all(_public(a) for a in addresses):
        return None
    return addresses[0]


def _public(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def normalize_entry(entry: str) -> str:
    """An --allow-model-host value as matched: lower case, an IPv6 host in brackets with a port."""
    text = entry.strip().lower()
    if not text:
        raise ValueError("an empty host")
    if text == ANY_PUBLIC:
        return text
    if "://" in text:
        raise ValueError(f"{entry!r}: give HOST or HOST:PORT, not a URL")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return f"[{host}]{rest}" if rest else host
    if text.count(":") > 1:  # a bare IPv6 address
        return text
    host, sep, port = text.partition(":")
    if sep and not port.isdigit():
        raise ValueError(f"{entry!r}: the port must be a number")
    return text


def unreachable(who: str, url: str) -> ProviderError:
    """The one line for a call that got no answer: the same for a closed port, a timeout and
    an unreachable host (telling them apart would map the network for whoever asks)."""
    return ProviderError(f"{who} at {origin(url)} could not be reached (no answer: the address may "
                         "be wrong, the service down, or the call timed out): check the URL and "
                         "that the service is running")


def refused(who: str, url: str, status: int, detail: str, *, confined: bool) -> ProviderError:
    """An error status: on a confined server (`Policy.confined`) in kbsql's words only;
    otherwise with the provider's own sentence (`detail`, already masked), which tells its
    user what to fix."""
    if not confined:
        return ProviderError(f"{who} at {origin(url)} answered HTTP {status}: {detail}")
    meaning = ("refused the API key" if status in (401, 403) else
               "does not know this model or path" if status == 404 else
               "is rate limiting" if status == 429 else
               "rejected the request" if status < 500 else "failed")
    return ProviderError(f"{who} at {origin(url)} answered HTTP {status}: it {meaning}")


class Lanes:
    """One engine's lanes: per model host, a slot among the calls in flight (see the module
    docstring). Kept with the engine's client, so another engine's calls never take its slots.

    One owner (`Control.owner` of the work making the call: a token, the login user) holds
    at most half a host's slots (`owner_share`), the rule of the server's lanes: one token's
    16 slow completions (its share of 32 model workers) took all 16 slots of a host every
    user's agents call, and another user's completion waited 5 s for a 503."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self._hosts: dict[str, _Host] = {}
        self._lock = threading.Lock()

    @contextmanager
    def lane(self, url: str, who: str) -> Iterator[None]:
        current = self.policy
        key = origin(url)
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                host = self._hosts[key] = _Host(current.concurrency)
        work = current_control()
        owner = work.owner if work is not None else None
        if not host.take(owner, current.queue_wait):
            retry = max(1, round(current.queue_wait))
            if owner is not None and host.held.get(owner, 0) >= host.share:
                raise Busy(f"{who}: these credentials already have {host.share} calls to {key} running, "
                           f"half of the {current.concurrency} {current.place} (a fair share); try again "
                           "shortly", retry_after=retry)
            raise Busy(f"{who}: {current.concurrency} calls to {key} are already running "
                       f"{current.place}; try again shortly", retry_after=retry)
        try:
            yield
        finally:
            host.give_back(owner)


class _Host:
    """The slots of one model host: `size` calls in flight, one owner at most `share`."""

    def __init__(self, size: int):
        self.size, self.share, self.busy = size, owner_share(size), 0
        self.held: dict[str, int] = {}
        self._free = threading.Condition()

    def _may_take(self, owner: str | None) -> bool:
        return self.busy < self.size and (owner is None or self.held.get(owner, 0) < self.share)

    def take(self, owner: str | None, wait: float) -> bool:
        with self._free:
            if not self._free.wait_for(lambda: self._may_take(owner), timeout=wait):
                return False
            self.busy += 1
            if owner is not None:
                self.held[owner] = self.held.get(owner, 0) + 1
            return True

    def give_back(self, owner: str | None) -> None:
        with self._free:
            self.busy -= 1
            if owner is not None:
                self.held[owner] -= 1
                if not self.held[owner]:
                    del self.held[owner]
            self._free.notify_all()


class _CheckedBackend(httpcore.SyncBackend):
    """httpcore's socket backend, connecting only where `policy` allows at that moment:
    a host not named by the operator is resolved here, every address must be public, and
    the connection goes to the address just checked (TLS still verifies the name)."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        current = self.policy
        name = host.lower().strip("[]")
        if current.allowed is not None and not _named(current, name, port):
            address = _public_address(name, port) if ANY_PUBLIC in current.allowed else None
            if address is None:
                raise httpcore.ConnectError(f"{_shown(name)}:{port} is not an allowed model host")
            host = address
        work = current_control()
        if work is not None:  # no connecting past the work's deadline either
            timeout = _within(work, timeout)
        return _CutStream(super().connect_tcp(host, port, timeout, local_address, socket_options))


class _CutStream(httpcore.NetworkStream):
    """A model connection whose reads and writes belong to the work that makes them (the
    context's `Control`, read at each one): each waits at most the work's time left, and
    stopping the work shuts the socket, which wakes the thread blocked on it (before the
    answer's first byte too: httpx offers no way to cut such a call). A cut connection is
    closed by httpcore, never reused. Without work (an embedded call, an insert's
    embeddings: `batch_insert`) it is the plain connection."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._controlled(lambda wait: self._stream.read(max_bytes, wait), timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._controlled(lambda wait: self._stream.write(buffer, wait), timeout)

    def _controlled(self, step: Any, timeout: float | None) -> Any:
        work = current_control()
        if work is None:
            return step(timeout)
        try:
            with work.stoppable(self._cut):
                done = step(_within(work, timeout))
        except (httpcore.TimeoutException, httpcore.NetworkError):
            work.check()  # its deadline or its stop: the work's own line, not "no answer"
            raise
        work.check()  # a read the cut ended early (an empty read is not the answer's end)
        return done

    def _cut(self) -> None:
        sock = self._stream.get_extra_info("socket")
        if sock is not None:  # the plain socket's shutdown (an SSLSocket's drops its state)
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:  # closed already
                pass

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _CutStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _within(work: Control, timeout: float | None) -> float | None:
    """`timeout` cut to the time `work` has left; past its deadline (or stopped): `Stopped`."""
    work.check()
    left = work.remaining()
    if left is None:
        return timeout
    return left if timeout is None else min(timeout, left)


def transport(policy: Policy, **kwargs: Any) -> httpx.HTTPTransport:
    """An httpx transport whose connections pass `policy` when they are made (see
    `_CheckedBackend`); `kwargs` as for `httpx.HTTPTransport` (limits, ...)."""
    made = httpx.HTTPTransport(**kwargs)
    made._pool._network_backend = _CheckedBackend(policy)  # httpx takes no backend argument
    return made
