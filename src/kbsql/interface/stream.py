"""Agent completion stream chunks (contract: endpoint 8) and the completion answer.

Chunks stay plain dicts on the wire; these helpers build them in one place (so every
producer emits the same keys) and classify them (so every consumer reads them the same way).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

CHUNK_KINDS = ("start", "actions", "steps", "output", "error", "end")
"""The contract's chunk kinds (service-interface.md, endpoint 8)."""

NOTE_KINDS = ("context", "status", "sql")
"""Progress notes a MindsDB 26.1 stream carries besides the contract's kinds (`context`, its
route's rename of `status`, and `sql`): `{"type": ..., "content": text}`. Kind `context`."""


def start_chunk(prompt: str, trace_id: str) -> dict[str, Any]:
    return {"type": "start", "prompt": prompt, "trace_id": trace_id}


def action(tool: str, tool_input: str, log: str = "") -> dict[str, Any]:
    return {"tool": tool, "tool_input": tool_input, "log": log}


def actions_chunk(actions: list[dict[str, Any]], trace_id: str) -> dict[str, Any]:
    return {"actions": actions, "messages": [{"content": a.get("log", "")} for a in actions],
            "trace_id": trace_id}


def steps_chunk(act: dict[str, Any], observation: str, trace_id: str) -> dict[str, Any]:
    return {"steps": [{"action": act, "observation": observation}],
            "messages": [{"content": observation}], "trace_id": trace_id}


def output_chunk(output: str, trace_id: str) -> dict[str, Any]:
    """The answer, or a part of it: a streaming model's tokens leave as partial output chunks
    and the answer is the concatenation of the output chunks after the last `actions` chunk
    (text before a tool call was the model thinking aloud: the action's `log` repeats it)."""
    return {"output": output, "messages": [{"content": output}], "trace_id": trace_id}


def error_chunk(message: str, trace_id: str) -> dict[str, Any]:
    return {"type": "error", "content": message, "trace_id": trace_id}


def end_chunk() -> dict[str, Any]:
    return {"type": "end"}


def chunk_kind(chunk: dict[str, Any]) -> str:
    """Which of start/actions/steps/output/error/end a chunk is (by `type` or by its keys);
    `context` for a server's progress note (NOTE_KINDS), `unknown` for anything else.
    A chunk from a server is read through `normalize_chunk` first."""
    kind = chunk.get("type")
    if kind in CHUNK_KINDS:
        return kind
    if kind in NOTE_KINDS:
        return "context"
    for key in ("actions", "steps", "output"):
        if key in chunk:
            return key
    return "unknown"


def normalize_chunk(chunk: Any) -> dict[str, Any]:
    """A chunk received from a server, in the contract's shapes; kbsql's own pass unchanged.

    MindsDB 26.1 (`api/http/namespaces/agents.py` `_completion_event_generator` over
    `PydanticAIAgent._get_completion_stream`) sends, with no `start`/`actions`/`steps`:

    - `{"type": "context", "content": note}`: status lines ("Generating Data Catalog...",
      "Executing final SQL query: ...") and the model's short description; kept, kind `context`;
    - `{"type": "data", "text": answer, "trace_id": t}`: the answer in words, or
      `{"type": "data", "content": table, "trace_id": t}`: the final SQL query's result as a
      Markdown table. MindsDB's own non-stream answer is the last `data` chunk; here it becomes
      an `output` chunk (MindsDB sends one);
    - `{"type": "error", "content": message, "trace_id": t}` (the contract's shape), or
      `{"error": message}` when its route itself fails; the latter becomes the former;
    - `{"type": "end", "trace_id": t}` and then `{"type": "end"}` (the first ends the stream).
    """
    if not isinstance(chunk, dict):
        return output_chunk(str(chunk), "")
    trace_id = str(chunk.get("trace_id") or "")
    kind = chunk.get("type")
    if kind == "data":
        answer = chunk["text"] if "text" in chunk else chunk.get("content")
        if not isinstance(answer, str):
            answer = "" if answer is None else json.dumps(answer, default=str)
        return output_chunk(answer, trace_id)
    if kind is None and "error" in chunk and chunk_kind(chunk) == "unknown":
        return error_chunk(str(chunk["error"] or "the agent failed"), trace_id)
    return chunk


def completion_answer(content: str, trace_id: str) -> dict[str, Any]:
    """Body of the non-stream `/completions` answer."""
    return {"message": {"content": content, "role": "assistant", "trace_id": trace_id}}


def normalize_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Accept `{question, answer}` items or `{role, content}` items; return question/answer pairs."""
    pairs: list[dict[str, str]] = []
    for item in messages:
        if "question" in item or "answer" in item:
            pairs.append({"question": str(item.get("question") or ""),
                          "answer": str(item.get("answer") or "")})
        elif item.get("role") == "user":
            pairs.append({"question": str(item.get("content") or ""), "answer": ""})
        elif item.get("role") == "assistant" and pairs:
            pairs[-1]["answer"] = str(item.get("content") or "")
    return pairs


def sse_lines(chunks: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Render chunks as server-sent events: `data: <json>` and a blank line."""
    for chunk in chunks:
        yield f"data: {json.dumps(chunk, separators=(',', ':'), default=str)}\n\n"


def parse_sse_line(line: str) -> dict[str, Any] | None:
    """The chunk carried by one `data: <json>` line, or None for blank/comment lines."""
    line = line.strip()
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return None
    return json.loads(payload)


def close_stream(chunks: Any) -> None:
    """Stop the run behind a stream of chunks (a client left, Stop was pressed). Synchronous on
    purpose: a cancelled scope never runs an await, and the agent stream's close() is
    thread-safe and quick. A plain generator still executing in another thread refuses
    ("generator already executing"): it stops after its current chunk."""
    close = getattr(chunks, "close", None)
    if close is None:
        return
    try:
        close()
    except ValueError:
        pass
