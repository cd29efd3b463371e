"""Scripted fake LLM servers on loopback that speak the OpenAI, Anthropic and Ollama wire
formats (streamed), so provider code is exercised over real HTTP without a network.

A script is a list of turns, served one per chat request: `text("...")`, `tools(("name",
{args}), ...)`, or `error_mid_stream("...")` (some text, then the provider's error event).
Once the script is used up, every further request gets `text("done")`. `chat_calls` and
`requests` record what the agent sent. `delay` paces the events (a model writing token by
token); `first_text_at` is when the first event carrying text left (`time.perf_counter()`),
the model's own first token, which a streaming consumer's first token is measured against.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT_MARK = re.compile(r'"(content|text)": "[^"]')
"""An event that carries some of the answer's text (any of the three wires)."""


def text(content: str) -> dict[str, Any]:
    return {"text": content}


def tools(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tools": list(calls)}


def error_mid_stream(message: str) -> dict[str, Any]:
    return {"error": message}


def flood(size: int) -> dict[str, Any]:
    """A model server that never ends its answer: text deltas of `size` characters for ever
    (OpenAI wire); `line(size)`: one delta of `size` characters, on one line."""
    return {"flood": size}


def line(size: int) -> dict[str, Any]:
    return {"line": size}


def pieces(value: str, size: int = 7) -> list[str]:
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


class FakeLLM:
    """One fake server; `wire` is openai, anthropic or ollama."""

    def __init__(self, wire: str, script: list[dict[str, Any]], models: tuple[str, ...] = ("m1", "m2"),
                 delay: float = 0.0):
        self.wire, self.script, self.models, self.delay = wire, list(script), models, delay
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.chat_calls = 0
        self.events_sent = 0
        self.finished_streams = 0
        self.first_text_at: float | None = None
        self.embedding_size = 8
        """Numbers in each vector `/v1/embeddings` answers (OpenAI wire)."""
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return {"openai": f"http://{host}:{port}/v1"}.get(self.wire, f"http://{host}:{port}")

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_turn(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            self.chat_calls += 1
            self.requests.append(body)
            self.headers.append(headers)
            return self.script.pop(0) if self.script else text("done")

    def sent(self, event: str) -> None:
        """Count an event that left; note when the first one with text did."""
        with self._lock:
            self.events_sent += 1
            if self.first_text_at is None and TEXT_MARK.search(event):
                self.first_text_at = time.perf_counter()

    # wire formats ---------------------------------------------------------------------
    def openai_events(self, turn: dict[str, Any]) -> Iterable[str]:
        def data(delta: dict[str, Any], finish: str | None = None) -> str:
            return "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"
        if "flood" in turn:
            return itertools.repeat(data({"content": "y" * turn["flood"]}))
        if "line" in turn:
            return [data({"content": "x" * turn["line"]}), "data: [DONE]\n\n"]
        out = [data({"role": "assistant", "content": ""})]
        if "error" in turn:
            out.append(data({"content": "Let me"}))
            out.append("data: " + json.dumps({"error": {"message": turn["error"],
                                                        "type": "server_error"}}) + "\n\n")
            return out
        for part in pieces(turn.get("text", "")):
            out.append(data({"content": part}))
        for i, (name, args) in enumerate(turn.get("tools", [])):
            out.append(data({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
            out += [data({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                    for p in pieces(json.dumps(args))]
        out.append(data({}, "tool_calls" if turn.get("tools") else "stop"))
        out.append("data: [DONE]\n\n")
        return out

    def anthropic_events(self, turn: dict[str, Any]) -> list[str]:
        def ev(kind: str, body: dict[str, Any]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n"
        out = [ev("message_start", {"message": {"id": "msg_1", "role": "assistant", "content": []}})]
        if "error" in turn:
            out.append(ev("content_block_start", {"index": 0, "content_block": {"type": "text",
                                                                                "text": ""}}))
            out.append(ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                        "text": "Let me"}}))
            out.append(ev("error", {"error": {"type": "overloaded_error", "message": turn["error"]}}))
            return out
        index = 0
        if turn.get("text"):
            out.append(ev("content_block_start", {"index": 0, "content_block": {"type": "text",
                                                                                "text": ""}}))
            out += [ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
                    for p in pieces(turn["text"])]
            out.append(ev("content_block_stop", {"index": 0}))
            index = 1
        for i, (name, args) in enumerate(turn.get("tools", []), start=index):
            out.append(ev("content_block_start", {"index": i, "content_block": {
                "type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}}))
            out += [ev("content_block_delta", {"index": i, "delta": {"type": "input_json_delta",
                                                                     "partial_json": p}})
                    for p in pieces(json.dumps(args))]
            out.append(ev("content_block_stop", {"index": i}))
        stop = "tool_use" if turn.get("tools") else "end_turn"
        out.append(ev("message_delta", {"delta": {"stop_reason": stop}}))
        out.append(ev("message_stop", {}))
        return out

    def ollama_events(self, turn: dict[str, Any]) -> list[str]:
        def line(message: dict[str, Any], done: bool = False) -> str:
            return json.dumps({"model": "m1", "message": {"role": "assistant", **message},
                               "done": done}) + "\n"
        if "error" in turn:
            return [line({"content": "Let me"}), json.dumps({"error": turn["error"]}) + "\n"]
        out = [line({"content": p}) for p in pieces(turn.get("text", ""))]
        if turn.get("tools"):
            out.append(line({"content": "", "tool_calls": [
                {"function": {"name": n, "arguments": a}} for n, a in turn["tools"]]}))
        out.append(json.dumps({"model": "m1", "message": {"role": "assistant", "content": ""},
                               "done": True, "done_reason": "stop"}) + "\n")
        return out

    def embeddings(self, out: Any, count: int) -> None:
        """`count` vectors of `embedding_size` numbers (a hostile server: millions), to `out`."""
        row = b"[" + b"0.1," * (self.embedding_size - 1) + b"0.1]"
        try:
            out.write(b'{"data": [')
            for i in range(count):
                out.write(b'%s{"index": %d, "embedding": %s}' % (b"," if i else b"", i, row))
            out.write(b"]}")
        except OSError:  # the client stopped reading: that is allowed
            pass

    def _handler(self) -> type[BaseHTTPRequestHandler]:  # noqa: C901 (one route per wire, flat)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def send_json(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if fake.wire == "openai" and self.path == "/v1/models":
                    return self.send_json(200, {"object": "list", "data": [
                        {"id": m, "object": "model"} for m in fake.models]})
                if fake.wire == "anthropic" and self.path.startswith("/v1/models/"):
                    name = self.path.rsplit("/", 1)[1]
                    if name in fake.models:
                        return self.send_json(200, {"id": name, "type": "model"})
                    return self.send_json(404, {"type": "error", "error": {
                        "type": "not_found_error", "message": f"model: {name}"}})
                return self.send_json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if fake.wire == "ollama" and self.path == "/api/show":
                    if body.get("model") in fake.models:
                        return self.send_json(200, {"details": {}})
                    return self.send_json(404, {"error": f"model '{body.get('model')}' not found"})
                if self.path == "/v1/embeddings":  # one vector per input (OpenAI wire)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    return fake.embeddings(self.wfile, len(body.get("input") or [1]))
                chat_path = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
                             "ollama": "/api/chat"}[fake.wire]
                if self.path != chat_path:
                    return self.send_json(404, {"error": "not found"})
                turn = fake.next_turn(body, dict(self.headers))
                if turn.get("status"):
                    return self.send_json(turn["status"], {"error": {"message": turn["message"]}})
                events = getattr(fake, f"{fake.wire}_events")(turn)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson" if fake.wire == "ollama"
                                 else "text/event-stream")
                self.end_headers()
                try:
                    for event in events:
                        self.wfile.write(event.encode())
                        self.wfile.flush()
                        fake.sent(event)
                        if fake.delay:
                            time.sleep(fake.delay)
                except OSError:  # the agent closed the stream: that is allowed
                    return
                with fake._lock:
                    fake.finished_streams += 1

        return Handler
