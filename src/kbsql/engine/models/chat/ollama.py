"""Ollama's native `/api/chat` with tools, streamed as JSON lines.

Tool calls arrive whole (arguments already an object) in a line's `message.tool_calls`;
an `{"error": ...}` line is an error mid-stream. Ollama's OpenAI endpoint (`/v1`) is served by
the openai provider instead.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

from kbsql.engine.models.chat import base
from kbsql.engine.models.chat.base import HttpProvider, Message, RunControl, ToolCall, ToolSpec, Turn
from kbsql.engine.models.model_context import ProviderContext


class OllamaProvider(HttpProvider):
    provider = "ollama"
    default_base_url = "http://localhost:11434"

    def __init__(self, model: dict[str, Any], context: ProviderContext):
        super().__init__(model, context)
        if self.base_url.endswith("/api"):
            self.base_url = self.base_url[:-4]

    def check(self) -> None:
        self.checked("POST", "/api/show", json={"model": self.model_name},
                     missing="no such model (pull it with `ollama pull`)")

    def chat(self, system: str, messages: list[Message], tools: list[ToolSpec],
             control: RunControl) -> Turn:
        return base.drain(self.chat_stream(system, messages, tools, control))

    def chat_stream(self, system: str, messages: list[Message], tools: list[ToolSpec],
                    control: RunControl) -> base.TurnStream:
        """The turn's text deltas line by line, then the whole turn."""
        body = base.function_tools_body(self.model_name, system, map(wire_message, messages), tools)
        text: list[str] = []
        calls: list[ToolCall] = []
        with closing(self.events("/api/chat", body, control, sse=False)) as events:
            for event in events:
                message = event.get("message") or {}
                if message.get("content"):
                    text.append(message["content"])
                    yield message["content"]
                for call in message.get("tool_calls") or []:
                    fn = call.get("function") or {}
                    calls.append(ToolCall(call.get("id") or f"call_{len(calls)}", fn.get("name", ""),
                                          base.parse_arguments(fn.get("arguments"))))
                if event.get("done"):
                    break
        return Turn("".join(text), calls)


def wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "content": message.content, "tool_name": message.name}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
    return out
