"""Helpers for agent tests: read the raw SSE stream of `kbsql serve` and check each chunk's
keys and the order of chunks against the contract."""

from __future__ import annotations

import json
from typing import Any

import httpx

KEYS = {
    "start": {"type", "prompt", "trace_id"},
    "actions": {"actions", "messages", "trace_id"},
    "steps": {"steps", "messages", "trace_id"},
    "output": {"output", "messages", "trace_id"},
    "error": {"type", "content", "trace_id"},
    "end": {"type"},
}


def kind(chunk: dict[str, Any]) -> str:
    if chunk.get("type") in ("start", "error", "end"):
        return chunk["type"]
    for key in ("actions", "steps", "output"):
        if key in chunk:
            return key
    raise AssertionError(f"unknown chunk {chunk}")


def raw_stream(url: str, body: dict[str, Any], timeout: float = 60) -> list[dict[str, Any]]:
    """POST and split the raw bytes into events: each must be exactly one `data: <json>` line."""
    with httpx.stream("POST", url, json=body, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(response.iter_raw()).decode()
    assert raw.endswith("\n\n")
    events = raw[:-2].split("\n\n")
    chunks = []
    for event in events:
        assert event.startswith("data: ") and "\n" not in event, repr(event)
        chunks.append(json.loads(event[len("data: "):]))
    return chunks


def check_shape(chunks: list[dict[str, Any]], question: str) -> list[str]:
    """Assert every chunk's keys and the contract's order; return the kinds in order."""
    kinds = [kind(c) for c in chunks]
    for chunk, k in zip(chunks, kinds, strict=True):
        assert set(chunk) == KEYS[k], (k, chunk)
        if k == "actions":
            assert chunk["actions"] and all(set(a) == {"tool", "tool_input", "log"}
                                            for a in chunk["actions"])
            assert all(set(m) == {"content"} for m in chunk["messages"])
        if k == "steps":
            step = chunk["steps"][0]
            assert set(step) == {"action", "observation"}
            assert set(step["action"]) == {"tool", "tool_input", "log"}
            assert isinstance(step["observation"], str)
        if k == "output":
            assert isinstance(chunk["output"], str)
            assert chunk["messages"] == [{"content": chunk["output"]}]
    assert kinds[0] == "start" and chunks[0]["prompt"] == question
    assert kinds[-1] == "end" and kinds.count("end") == 1
    assert kinds[-2] in ("output", "error")
    body = kinds[1:-1]
    i = 0
    while i < len(body):  # (output* actions, steps for each action)* output* [error]
        said = ""
        while i < len(body) and body[i] == "output":  # tokens, partial output chunks
            said += chunks[1 + i]["output"]
            i += 1
        if i == len(body) or body[i] == "error":
            assert i >= len(body) - 1, kinds
            break
        assert body[i] == "actions", kinds
        if said:  # words streamed before a tool call: the action's log repeats them
            assert chunks[1 + i]["actions"][0]["log"].strip() == said.strip(), (said, chunks[1 + i])
        n = len(chunks[1 + i]["actions"])
        assert body[i + 1:i + 1 + n] == ["steps"] * n, kinds
        for j in range(n):
            assert chunks[2 + i + j]["steps"][0]["action"] == chunks[1 + i]["actions"][j]
        i += 1 + n
    traces = {c["trace_id"] for c in chunks if "trace_id" in c}
    assert len(traces) == 1 and next(iter(traces))
    return kinds


def collapse(kinds: list[str]) -> list[str]:
    """The kinds with each run of partial `output` chunks (a streamed answer) as one."""
    return [k for i, k in enumerate(kinds) if k != "output" or i == 0 or kinds[i - 1] != "output"]


def answer_of(chunks: list[dict[str, Any]]) -> str:
    """The answer: the output chunks after the last actions chunk, concatenated."""
    text = ""
    for chunk in chunks:
        if "actions" in chunk:
            text = ""
        elif "output" in chunk:
            text += chunk["output"]
    return text


def agent_url(base: str, agent: str, project: str = "mindsdb", stream: bool = True) -> str:
    suffix = "/stream" if stream else ""
    return f"{base}/api/projects/{project}/agents/{agent}/completions{suffix}"


def create_agent(base: str, body: dict[str, Any], project: str = "mindsdb") -> httpx.Response:
    return httpx.post(f"{base}/api/projects/{project}/agents", json={"agent": body}, timeout=30)


def sql(base: str, query: str) -> dict[str, Any]:
    return httpx.post(f"{base}/api/sql/query", json={"query": query}, timeout=120).json()
