"""Anthropic Messages API with tools, streamed as server-sent events.

Events: `content_block_start` opens a text or `tool_use` block, `content_block_delta`
carries `text_delta` or `input_json_delta` (partial JSON of the tool input), `error` is an
error mid-stream. Tool results go back as `tool_result` blocks of a user message.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

from kbsql.engine.models.chat.base import HttpProvider, Message, ToolCall, Turn, TurnStream, drain
from kbsql.engine.models.chat.base import RunControl as Control
from kbsql.engine.models.chat.base import ToolSpec as Tool
from kbsql.engine.models.chat.base import parse_arguments as arguments_of

API_VERSION = "2023-06-01"
MAX_TOKENS = 2048


class AnthropicProvider(HttpProvider):
    provider = "anthropic"
    api_key_env = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com"

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    def check(self) -> None:
        self.checked("GET", f"/v1/models/{self.model_name}", missing="no such model")

    def chat(self, system: str, messages: list[Message], tools: list[Tool], control: Control) -> Turn:
        return drain(self.chat_stream(system, messages, tools, control))

    def chat_stream(self, system: str, messages: list[Message], tools: list[Tool],
                    control: Control) -> TurnStream:
        """The turn's `text_delta`s as they come, then the whole turn."""
        body: dict[str, Any] = {"model": self.model_name, "system": system, "stream": True,
                                "max_tokens": MAX_TOKENS, "messages": wire_messages(messages)}
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description,
                              "input_schema": t.parameters} for t in tools]
        text: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}
        with closing(self.events("/v1/messages", body, control)) as events:
            for event in events:
                kind = event.get("type")
                if kind == "content_block_start":
                    block = event.get("content_block") or {}
                    if block.get("type") == "tool_use":
                        blocks[event.get("index", len(blocks))] = {
                            "id": block.get("id", ""), "name": block.get("name", ""), "json": ""}
                    elif block.get("text"):
                        text.append(block["text"])
                        yield block["text"]
                elif kind == "content_block_delta":
                    delta = event.get("delta") or {}
                    if delta.get("type") == "text_delta" and delta.get("text"):
                        text.append(delta["text"])
                        yield delta["text"]
                    elif delta.get("type") == "input_json_delta" and event.get("index") in blocks:
                        blocks[event["index"]]["json"] += delta.get("partial_json", "")
                elif kind == "message_stop":
                    break
        return Turn("".join(text), [ToolCall(b["id"] or f"toolu_{i}", b["name"],
                                             arguments_of(b["json"]))
                                    for i, b in sorted(blocks.items())])


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages -> Anthropic's: consecutive tool results merge into one user message."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant" and m.tool_calls:
            content: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                        for c in m.tool_calls]
            out.append({"role": "assistant", "content": content})
        else:
            out.append({"role": m.role, "content": m.content})
    return out
