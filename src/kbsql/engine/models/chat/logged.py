"""A chat provider whose every turn is a row of `log.llm_log` (engine/models/llm_log.py).

`ModelProviders.chat_provider` hands the agents this wrapper around the provider it built
(a built-in's or a plugin's), so each model turn of an agent run is recorded once,
wherever it is asked from, streamed or not: the input (system prompt, conversation, the
names of the tools offered), the output (text, and the tool calls asked for), start and end,
and whether it succeeded. A stream the consumer stops early is recorded as not successful.
"""

from __future__ import annotations

from typing import Any

from kbsql.engine.models.chat.base import Message, Provider, RunControl, ToolSpec, Turn, TurnStream
from kbsql.engine.models.llm_log import LlmLog


def _request(system: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    conversation: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
        conversation.append(item)
    return {"system": system, "messages": conversation, "tools": [t.name for t in tools]}


def _output(turn: Turn) -> Any:
    if not turn.tool_calls:
        return turn.text
    return {"text": turn.text, "tool_calls": [{"name": c.name, "arguments": c.arguments}
                                              for c in turn.tool_calls]}


class LoggedProvider:
    """`inner`, with each `chat` / `chat_stream` turn recorded in `log`."""

    def __init__(self, inner: Provider, log: LlmLog):
        self.inner = inner
        self.log = log
        self.provider = inner.provider
        self.model_name = inner.model_name

    def __getattr__(self, name: str) -> Any:  # anything else a provider offers (api_key, ...)
        return getattr(self.inner, name)

    def check(self) -> None:
        self.inner.check()

    def _start(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Any:
        secret = getattr(self.inner, "api_key", None)
        return self.log.start(f"{self.provider}/{self.model_name}", _request(system, messages, tools),
                              secret if isinstance(secret, str) else None)

    def chat(self, system: str, messages: list[Message], tools: list[ToolSpec],
             control: RunControl) -> Turn:
        recording = self._start(system, messages, tools)
        try:
            turn = self.inner.chat(system, messages, tools, control)
        except BaseException:
            recording.finish(None, None, False)
            raise
        recording.finish(_output(turn), None, True)
        return turn

    def chat_stream(self, system: str, messages: list[Message], tools: list[ToolSpec],
                    control: RunControl) -> TurnStream:
        """The inner provider's stream (or its whole turn, when it cannot stream), recorded
        when it ends."""
        streaming = getattr(self.inner, "chat_stream", None)
        if streaming is None:
            return self.chat(system, messages, tools, control)
        recording = self._start(system, messages, tools)
        turn: Turn | None = None
        try:
            turn = yield from streaming(system, messages, tools, control)
        finally:
            recording.finish(_output(turn) if turn is not None else None, None, turn is not None)
        return turn
