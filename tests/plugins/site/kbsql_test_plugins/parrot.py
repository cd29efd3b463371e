"""Chat provider `parrot`: a scripted model that asks the first knowledge base it is given
for the question, then answers with what came back, prefixed so a test sees who spoke."""

from __future__ import annotations

import json
from typing import Any

from kbsql.spi import Message, RunControl, ToolCall, ToolSpec, Turn


class ParrotProvider:
    provider = "parrot"

    def __init__(self, descriptor: dict[str, Any], context: Any):
        self.model_name = str(descriptor.get("model_name") or "polly")

    def check(self) -> None:
        pass

    def chat(self, system: str, messages: list[Message], tools: list[ToolSpec],
             control: RunControl) -> Turn:
        control.check()
        question = next(m.content for m in reversed(messages) if m.role == "user")
        results = [m.content for m in messages if m.role == "tool"]
        names = {t.name for t in tools}
        if not results and "kb_list_tool" in names:
            return Turn("", [ToolCall("call_1", "kb_list_tool", {})])
        if len(results) == 1 and "kb_query_tool" in names:
            kb = json.loads(results[0])[0]
            sql = f"SELECT chunk_content FROM {kb} WHERE content = '{question}' LIMIT 1"
            return Turn("", [ToolCall("call_2", "kb_query_tool", {"query": sql})])
        return Turn(f"parrot {self.model_name} heard: {results[-1] if results else question}")
