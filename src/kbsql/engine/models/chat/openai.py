"""OpenAI chat completions with native tool calling, streamed (text deltas passed on as they come).

Any OpenAI-compatible server works through `base_url` (vLLM, LM Studio, llama.cpp server,
Ollama's `/v1`): only `/models` and `/chat/completions` are used. Tool calls arrive as
deltas keyed by `index`; their argument strings are concatenated until the stream ends.
"""

from __future__ import annotations

import json
from typing import Any

from kbsql.engine.models.chat import base
from kbsql.engine.models.chat.base import Message, ToolCall, Turn


class OpenAIProvider(base.HttpProvider):
    provider = "openai"
    api_key_env = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def check(self) -> None:
        response = self.checked("GET", "/models", what="model list")
        try:
            ids = [m.get("id") for m in response.json().get("data") or []]
        except (ValueError, AttributeError) as exc:
            raise self.fail("the server did not answer an OpenAI model list") from exc
        # single-model servers (llama.cpp) answer to any name; otherwise the name must exist
        if len(ids) > 1 and self.model_name not in ids:
            raise self.fail(f"no such model (the server offers {', '.join(map(str, ids[:10]))})")

    def chat(self, system: str, messages: list[Message], tools: list[base.ToolSpec],
             control: base.RunControl) -> Turn:
        return base.drain(self.chat_stream(system, messages, tools, control))

    def chat_stream(self, system: str, messages: list[Message], tools: list[base.ToolSpec],
                    control: base.RunControl) -> base.TurnStream:
        """The turn's text deltas as the server sends them, then the whole turn."""
        body = base.function_tools_body(self.model_name, system, map(wire_message, messages), tools)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        for event in self.events("/chat/completions", body, control):
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                    yield delta["content"]
                for part in delta.get("tool_calls") or []:
                    slot = calls.setdefault(part.get("index", len(calls)),
                                            {"id": "", "name": "", "arguments": ""})
                    slot["id"] = part.get("id") or slot["id"]
                    fn = part.get("function") or {}
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
        return Turn("".join(text), [ToolCall(c["id"] or f"call_{i}", c["name"],
                                             base.parse_arguments(c["arguments"]))
                                    for i, c in sorted(calls.items())])


def wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": json.dumps(c.arguments)}} for c in message.tool_calls]
    return out
