"""The agent runtime behind `/completions` and `/completions/stream`.

`stream()` validates cheaply and returns an `AgentStream` that does no model work until
iterated: the server calls it before streaming starts (so a 404/400 is still a status), and
the first chunk (start) leaves before any model call. A streaming model's tokens leave as
partial `output` chunks as they arrive (the answer is their concatenation; no whole copy
follows). Closing the stream (client gone)
cancels the run: no further model or tool call, and an open provider stream is closed.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator
from contextlib import nullcontext
from typing import Any

from kbsql.engine.agents import loop, prompt, scope
from kbsql.engine.agents.agent_settings import RunLimits
from kbsql.engine.agents.tools import Toolbox
from kbsql.engine.catalog import AgentRecord, Catalog
from kbsql.engine.config import EngineConfig
from kbsql.engine.models.chat.base import Provider, RunCancelled, RunControl
from kbsql.engine.models.providers import ModelProviders
from kbsql.engine.ports import RunsSql
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import InvalidParameter, MissingParameter, ProviderError, ServiceError
from kbsql.interface.stream import (
    actions_chunk,
    completion_answer,
    end_chunk,
    error_chunk,
    normalize_messages,
    output_chunk,
    start_chunk,
    steps_chunk,
)


class AgentRuntime:
    """Runs agents: reads records from `catalog`, settings from `config`, and runs the
    agent's tools (SQL) through the `sql` port."""

    def __init__(self, catalog: Catalog, config: EngineConfig, sql: RunsSql, models: ModelProviders):
        self.catalog = catalog
        self.config = config
        self.sql = sql
        self.models = models

    @property
    def limits(self) -> RunLimits:
        return RunLimits.of(self.config)

    def check_model(self, model: dict[str, Any]) -> None:
        """Raise ProviderError when the agent's model cannot be reached (BadRequest when the
        provider is unknown)."""
        self.models.chat_provider(model).check()

    def complete(self, record: AgentRecord, messages: list[dict[str, Any]]) -> dict[str, Any]:
        pairs, provider = self._prepare(record, messages)
        trace_id = new_trace_id()
        control = self.control(record)
        output = ""
        request = current_control()  # the server's: a client that goes away stops the run
        try:
            with request.stoppable(control.cancel) if request is not None else nullcontext():
                for event in self._events(record, pairs, provider, control):
                    if isinstance(event, loop.Output):
                        output = event.text
        except RunCancelled as exc:
            if request is not None:  # its statement's deadline or its client: that work's line
                request.check()
            raise ProviderError(f"The agent {record.name} stopped: {exc}",
                                title="Agent run stopped") from exc
        return completion_answer(output, trace_id)

    def stream(self, record: AgentRecord, messages: list[dict[str, Any]]) -> AgentStream:
        pairs, provider = self._prepare(record, messages)
        return AgentStream(self, record, pairs, provider, self.control(record))

    def control(self, record: AgentRecord) -> RunControl:
        """The run's deadline: the agent's `params.timeout` (agent_syntax.mdx: the seconds it
        has to answer) within the engine's own limit (`agent_wall_time_s`), and within what
        is left of the work that asks (`SELECT answer FROM agent` keeps its statement's)."""
        timeout = record.params.get("timeout")
        request = current_control()
        left = request.remaining() if request is not None else None
        if request is not None and request.deadline is not None and left is not None and \
                left < min(self.limits.wall_time_s, float(timeout or "inf")):
            return RunControl(0.0, request.limit_note or "its time limit", deadline=request.deadline)
        if timeout is not None and float(timeout) < self.limits.wall_time_s:
            return RunControl(float(timeout), f"its timeout of {timeout} s (params.timeout)")
        return RunControl(self.limits.wall_time_s)

    def _prepare(self, record: AgentRecord,
                 messages: list[dict[str, Any]]) -> tuple[list[dict[str, str]], Provider]:
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise InvalidParameter("'messages' must be a list of {question, answer} objects")
        pairs = normalize_messages(messages)
        if not pairs or not pairs[-1]["question"].strip():
            raise MissingParameter("The last item of 'messages' must carry a non-empty question")
        return pairs, self.models.chat_provider(record.model or dict(self.config.default_model))

    def _events(self, record: AgentRecord, pairs: list[dict[str, str]], provider: Provider,
                control: RunControl) -> Iterator[loop.Event]:
        reach = scope.resolve(self.catalog, self.sql, record)  # at question time: wildcards see new KBs
        system = prompt.system_prompt(record.prompt_template, reach)
        yield from loop.run(provider, system, prompt.conversation(pairs),
                            Toolbox(self.sql, reach), control, self.limits.max_iterations)


def new_trace_id() -> str:
    return uuid.uuid4().hex


def chunk_of(event: loop.Event, trace_id: str) -> dict[str, Any]:
    if isinstance(event, loop.Actions):
        return actions_chunk(event.actions, trace_id)
    if isinstance(event, loop.Step):
        return steps_chunk(event.action, event.observation, trace_id)
    return output_chunk(event.text, trace_id)  # a Delta is a partial output chunk


def error_message(exc: BaseException) -> str:
    return exc.detail if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"


class AgentStream:
    """An iterator of chunks whose `close()` may come from another thread than the one
    iterating: it cancels the run first (which also closes a provider stream that the run
    thread is blocked on), then closes the generator if it is not executing."""

    def __init__(self, runtime: AgentRuntime, record: AgentRecord, pairs: list[dict[str, str]],
                 provider: Provider, control: RunControl):
        self.trace_id = new_trace_id()
        self.control = control
        self._gen = self._chunks(runtime, record, pairs, provider)

    def __iter__(self) -> AgentStream:
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self._gen)

    def close(self) -> None:
        self.control.cancel()
        try:
            self._gen.close()
        except ValueError:  # "generator already executing": the cancel above stops it
            pass

    def _chunks(self, runtime: AgentRuntime, record: AgentRecord, pairs: list[dict[str, str]],
                provider: Provider) -> Generator[dict[str, Any], None, None]:
        trace_id, control = self.trace_id, self.control
        yield start_chunk(pairs[-1]["question"], trace_id)
        try:
            for event in runtime._events(record, pairs, provider, control):
                if not (isinstance(event, loop.Output) and event.streamed):
                    yield chunk_of(event, trace_id)
        except RunCancelled as exc:
            if control.cancelled:  # nobody is listening any more
                return
            yield error_chunk(f"The agent stopped: {exc}", trace_id)
        except Exception as exc:
            yield error_chunk(error_message(exc), trace_id)
        finally:
            control.cancel()
        yield end_chunk()
