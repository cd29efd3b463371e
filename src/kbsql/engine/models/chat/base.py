"""What every model provider speaks: a neutral conversation in, one model turn out.

The loop never sees a wire format. It keeps the conversation as neutral `Message`s and asks a
`Provider` for the next `Turn` (text, tool calls, or both); each provider translates to its
own API. `RunControl` is shared by the loop and the provider so a client that goes away (or a
wall-time limit) stops a streaming HTTP call between two deltas, or at once by closing it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from kbsql.engine import outbound
from kbsql.engine.models import answer_bound
from kbsql.engine.models.model_context import ProviderContext, base_url_of, hosted_key
from kbsql.engine.models.model_http import ModelHttp
from kbsql.interface.control import Control, Stopped
from kbsql.interface.errors import MissingParameter, ProviderError
from kbsql.interface.secrets import scrub_secret


class RunCancelled(Exception):
    """The consumer stopped listening or the run's wall time is spent: stop quietly."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Message:
    """One item of the neutral conversation: role is user, assistant or tool."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""


@dataclass
class Turn:
    """What the model said this time: some text and/or the tools it wants run."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


class RunControl:
    """Cancellation and deadline shared across threads: `cancel()` may come from the thread
    that closes the stream while the run thread is blocked reading the provider."""

    def __init__(self, wall_time: float, limit: str = "its time limit", deadline: float | None = None):
        self.deadline = time.monotonic() + wall_time if deadline is None else deadline
        self.limit = limit
        self.work = Control(self.deadline, limit)
        """The run as `interface.control` work: its model calls belong to it (`ModelHttp`), so
        `cancel()` cuts one blocked before its answer's first byte, and none outlives the run."""
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._response: httpx.Response | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise RunCancelled when the run must stop (cancelled or past its deadline)."""
        if self._cancelled.is_set():
            raise RunCancelled("the client stopped listening")
        if self.remaining() <= 0:
            raise RunCancelled(f"the run exceeded {self.limit}")

    def cancel(self) -> None:
        self._cancelled.set()
        self.work.stop("the client stopped listening")
        with self._lock:
            response = self._response
        if response is not None:
            try:
                response.close()
            except Exception:  # closing from another thread may race the reader; both stop
                pass

    @contextmanager
    def attach(self, response: httpx.Response) -> Iterator[None]:
        """Register the open provider stream so `cancel()` can close it."""
        with self._lock:
            self._response = response
        try:
            if self._cancelled.is_set():
                raise RunCancelled("the client stopped listening")
            yield
        finally:
            with self._lock:
                self._response = None


class Provider(Protocol):
    """A chat model as the agent loop sees it (a plugin's too: registered in the
    `kbsql.llm_providers` entry-point group as a factory `(descriptor, context) -> Provider`)."""

    provider: str
    model_name: str

    def check(self) -> None:
        """Raise ProviderError when the model cannot be reached."""

    def chat(self, system: str, messages: list[Message], tools: list[ToolSpec],
             control: RunControl) -> Turn:
        """The model's next turn."""


ChatFactory = Callable[[dict[str, Any], ProviderContext], Provider]
"""What `kbsql.llm_providers` registers: `(agent model descriptor, context) -> ChatProvider`."""

TurnStream = Generator[str, None, Turn]
"""A model turn as it arrives: its text deltas, then (as the generator's return value) the
whole `Turn`. A provider that streams offers `chat_stream(...) -> TurnStream` besides `chat`."""


def stream_turn(provider: Provider, system: str, messages: list[Message], tools: list[ToolSpec],
                control: RunControl) -> TurnStream:
    """The provider's next turn, its text delta by delta when it can stream (`chat_stream`);
    a provider with `chat` only (the offline one, a plugin's) gives its whole text at the end."""
    streaming = getattr(provider, "chat_stream", None)
    if streaming is None:
        return provider.chat(system, messages, tools, control)
    return (yield from streaming(system, messages, tools, control))


def drain(turn: TurnStream) -> Turn:
    """The `Turn` at the end of a turn stream, its deltas dropped (`chat` over `chat_stream`)."""
    while True:
        try:
            next(turn)
        except StopIteration as stop:
            return stop.value


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments arrive as a JSON string (OpenAI, Anthropic deltas) or an object (Ollama)."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"input": str(raw)}
    return value if isinstance(value, dict) else {"input": value}


class HttpProvider:
    """Shared plumbing of the HTTP providers: requests over the engine's pooled client
    (`context.http`), timeouts, error messages that name the provider and the model (never
    the key)."""

    provider = "http"
    default_base_url = ""
    api_key_env = ""  # environment fallback when the descriptor has no api_key

    def __init__(self, model: dict[str, Any], context: ProviderContext, connect_timeout: float = 10.0):
        self.model_name = str(model.get("model_name") or "")
        if not self.model_name:
            raise MissingParameter(f"'model.model_name' is required for provider "
                                   f"'{model.get('provider') or self.provider}'")
        self.http: ModelHttp = context.http
        # the one base-URL rule (engine/models/providers.py): an alias such as vllm must name its URL
        # (a descriptor without a provider name means this class's own service)
        own = {**model, "provider": model.get("provider") or self.provider}
        self.base_url = str(base_url_of(own) or self.default_base_url).rstrip("/")
        self.api_key = hosted_key(model.get("api_key"), self.base_url, self.default_base_url,
                                  self.api_key_env, own["provider"])
        self.connect_timeout = connect_timeout

    @property
    def who(self) -> str:
        return f"{self.provider} model '{self.model_name}'"

    def fail(self, what: str) -> ProviderError:
        return ProviderError(f"{self.who} at {outbound.origin(self.base_url)}: "
                             f"{scrub_secret(what, self.api_key)}", title="Model provider error")

    def timeout(self, control: RunControl | None) -> httpx.Timeout:
        budget = max(0.5, control.remaining()) if control is not None else 30.0
        budget = min(budget, self.http.call_timeout(budget))
        return httpx.Timeout(budget, connect=min(self.connect_timeout, budget))

    def headers(self) -> dict[str, str]:
        return {}

    def request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        """A short non-streaming call (model checks)."""
        url = self.base_url + path
        try:
            response = self.http.send(self.http.request(method, url, json=json, headers=self.headers(),
                                                        timeout=10.0), who=self.who)
        except httpx.HTTPError as exc:
            raise outbound.unreachable(self.who, url) from exc
        return response

    def checked(self, method: str, path: str, *, what: str = "model check",
                missing: str | None = None, json: Any = None) -> httpx.Response:
        """`request` for a model check: a 404 means `missing` (when given), any other
        error status fails with the provider's own error text."""
        response = self.request(method, path, json=json)
        if missing is not None and response.status_code == 404:
            raise self.fail(missing)
        if response.status_code >= 400:
            raise self.http.refused(self.who, self.base_url + path, response.status_code,
                                   f"{what} refused: {scrub_secret(error_text(response.text), self.api_key)}")
        return response

    @contextmanager
    def open_stream(self, path: str, body: dict[str, Any],
                    control: RunControl) -> Iterator[httpx.Response]:
        """POST a streaming request; HTTP errors become ProviderError with the server's words."""
        control.check()
        url = self.base_url + path
        request = self.http.request("POST", url, json=body, headers=self.headers(),
                                    timeout=self.timeout(control))
        try:
            with self.http.stream(request, who=self.who, work=control.work) as response:
                if response.status_code >= 400:  # its words only, never more than 64 KB of them
                    said = answer_bound.head(response, 64 << 10)
                    raise self.http.refused(self.who, url, response.status_code,
                                           scrub_secret(error_text(said), self.api_key))
                with control.attach(response):
                    yield response
        except (httpx.HTTPError, httpx.StreamError, Stopped) as exc:
            if control.cancelled:
                raise RunCancelled("the client stopped listening") from exc
            control.check()  # cut at the run's deadline: RunCancelled in the run's words
            if isinstance(exc, Stopped):  # the work around the run (its statement) stopped
                raise RunCancelled(exc.reason) from exc
            raise outbound.unreachable(self.who, url) from exc

    def events(self, path: str, body: dict[str, Any], control: RunControl, *,
               sse: bool = True) -> Generator[dict[str, Any], None, None]:
        """The JSON events of a streamed answer: server-sent `data:` lines up to `[DONE]`
        (OpenAI, Anthropic) or JSON lines (`sse=False`, Ollama). An error event raises;
        `control` is checked between reads. More than `model_answer_mb` fails the call
        (`answer_bound`). Use in `closing()` when stopping early."""
        policy = self.http.policy
        with self.open_stream(path, body, control) as response:
            lines = answer_bound.lines(response, policy.answer_mb << 20, control.check, policy.answer_note)
            for line in _bounded(lines, self.fail):
                if sse and not line.startswith("data:"):
                    continue
                payload = line[5:].strip() if sse else line.strip()
                if payload == "[DONE]":
                    return
                if not payload:
                    continue
                event = json.loads(payload)
                error = stream_error(event)
                if error is not None or event.get("type") == "error":
                    raise self.fail(error or "error event")
                yield event


def _bounded(lines: Iterator[str], fail: Callable[[str], ProviderError]) -> Iterator[str]:
    """`lines`, an answer over its bound failing in the provider's words."""
    try:
        yield from lines
    except answer_bound.TooLong as exc:
        raise fail(str(exc)) from None


def error_text(text: str) -> str:
    """The provider's own error sentence when its body (`text`) has one, else the raw text (short)."""
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300]
    return stream_error(body) or json.dumps(body)[:300]


def stream_error(body: Any) -> str | None:
    """An error carried inside a JSON body or stream event (all three wire formats)."""
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    if isinstance(err, str):
        return err
    return None


def function_tools_body(model_name: str | None, system: str, wire_messages: Iterable[dict[str, Any]],
                        tools: list[ToolSpec]) -> dict[str, Any]:
    """A streamed chat request in the OpenAI shape (system message first, tools as
    `{"type": "function", ...}`), which Ollama's `/api/chat` speaks too."""
    body: dict[str, Any] = {"model": model_name, "stream": True,
                            "messages": [{"role": "system", "content": system}, *wire_messages]}
    if tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]
    return body
