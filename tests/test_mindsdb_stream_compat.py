"""The HTTP client against a scripted MindsDB 26.1: its non-stream `/completions` answers 500
(`KeyError: 'trace_id'`, a bug of that version), its `/completions/stream` sends no
start/actions/steps/output chunks but `context` notes, a `data` chunk with the answer and two
`end` chunks. The bodies and event sequences below are byte for byte what a real MindsDB
26.1.0 sent (`mindsdb[kb,agents]==26.1.0`, `--api http`, an agent on a scripted
OpenAI-compatible model), except AGENT_ERROR, written from its source (`PydanticAIAgent.
_get_completion_stream`'s `except`, then the route's `finally`). The fake is stdlib
`http.server` speaking HTTP/1.1 with chunked event streams, as MindsDB's uvicorn does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import kbsql
from kbsql.interface import ServiceError
from kbsql.interface import stream as s
from kbsql.notebook.widgets import StreamState, render_html, render_text
from tests.widgets.streams import scripted_chunks

ANSWER = "Refunds take five days. They are paid to the card used for the purchase."
TABLE = "| a | b |\n| - | - |\n| 1 | x |"
KEY_ERROR = {"title": "KeyError", "detail": "'trace_id'", "message": "'trace_id'"}
ANSWER_KEY_ERROR = {"title": "KeyError", "detail": "'answer'", "message": "'answer'"}
MODEL_ERROR = {"title": "ModelAPIError", "detail": "Connection error.", "message": "Connection error."}

PLANNING = [
    {"type": "context", "content": "Generating Data Catalog..."},
    {"type": "context", "content": "Creating execution plan..."},
]
TEXT_ANSWER = [  # a final_text answer
    *PLANNING,
    {"type": "context", "content": f"Proposed Execution Plan:\n{ANSWER}\n\nEstimated steps: 1\n\n"},
    {"type": "context", "content": "Generating agent response..."},
    {"type": "context", "content": ANSWER},
    {"type": "context", "content": "Returning text response"},
    {"type": "data", "text": ANSWER, "trace_id": ""},
    {"type": "end", "trace_id": ""},
    {"type": "end"},
]
TABLE_ANSWER = [  # a final_query answer: the query's result as a Markdown table
    *PLANNING,
    {"type": "context", "content": f"Proposed Execution Plan:\n{ANSWER}\n\nEstimated steps: 1\n\n"},
    {"type": "context", "content": "Generating agent response..."},
    {"type": "context", "content": ANSWER},
    {"type": "context", "content": "Executing final SQL query: SELECT 1 AS a, 'x' AS b"},
    {"type": "data", "content": TABLE, "trace_id": ""},
    {"type": "end", "trace_id": ""},
    {"type": "end"},
]
ROUTE_ERROR = [  # the model unreachable while planning: the route's own error chunk
    *PLANNING,
    {"error": "Error in completion event generator"},
    {"type": "end"},
]
AGENT_ERROR = [  # the model failing while answering: the agent's error chunk
    *PLANNING,
    {"type": "context", "content": "Generating agent response..."},
    {"type": "error", "content": "Agent streaming failed: Connection error.", "trace_id": ""},
    {"type": "end"},
]

AGENTS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "text_agent": (KEY_ERROR, TEXT_ANSWER),
    "table_agent": (ANSWER_KEY_ERROR, TABLE_ANSWER),
    "route_error_agent": (MODEL_ERROR, ROUTE_ERROR),
    "agent_error_agent": (MODEL_ERROR, AGENT_ERROR),
}
PREFIX = "/api/projects/mindsdb/agents/"


class MindsDB261(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.seen.append((self.path, body))
        name, _, rest = self.path.removeprefix(PREFIX).partition("/")
        if name not in AGENTS or rest not in ("completions", "completions/stream"):
            self.answer(404, {"title": "Agent not found",
                              "detail": f"Agent with name {name} does not exist"})
            return
        error, events = AGENTS[name]
        if rest == "completions":
            self.answer(500, error)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:  # one HTTP chunk per event, as MindsDB flushes them
            data = f"data: {json.dumps(event)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` on a loopback port, in a thread; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def mindsdb_url() -> Iterator[str]:
    with serving(MindsDB261) as url:
        yield url


def test_completion_falls_back_to_the_stream_and_answers_the_data_text(mindsdb_url):
    MindsDB261.seen.clear()
    client = kbsql.connect(mindsdb_url)
    history = [{"question": "Hi", "answer": "Hello"}]
    assert client.agents.completion("text_agent", "How long do refunds take?", history=history) == ANSWER
    messages = [*history, {"question": "How long do refunds take?", "answer": ""}]
    assert MindsDB261.seen == [(f"{PREFIX}text_agent/completions", {"messages": messages}),
                               (f"{PREFIX}text_agent/completions/stream", {"messages": messages})]
    client.close()


def test_completion_of_a_final_query_answer_is_its_markdown_table(mindsdb_url):
    client = kbsql.connect(mindsdb_url)
    assert client.agents.completion("table_agent", "one row please") == TABLE
    client.close()


def test_stream_yields_contract_chunks_the_widgets_render(mindsdb_url):
    client = kbsql.connect(mindsdb_url)
    chunks = list(client.agents.stream("text_agent", "How long do refunds take?"))
    assert [s.chunk_kind(c) for c in chunks] == ["context"] * 6 + ["output", "end"]  # first end ends it
    assert chunks[6] == s.output_chunk(ANSWER, "")
    assert chunks[0] == {"type": "context", "content": "Generating Data Catalog..."}

    state = StreamState(question="How long do refunds take?", agent="text_agent")
    for chunk in chunks:
        state.feed(chunk)
    assert state.status == "done" and state.answer == ANSWER and state.steps == []
    assert "Refunds take five days." in render_html(state)
    assert f"A: {ANSWER}" in render_text(state)
    # MindsDB's planning notes show while it plans, in order, before the answer
    assert state.notes[:2] == ["Generating Data Catalog...", "Creating execution plan..."]
    html, text = render_html(state), render_text(state)
    assert html.index("Generating Data Catalog...") < html.index("Creating execution plan...") \
        < html.index("kbsql-answer")
    assert text.split("\n")[1] == "  · Generating Data Catalog..."
    assert text.index("Returning text response") < text.index("A: ")
    client.close()


def test_the_live_panel_shows_the_notes_as_they_arrive(mindsdb_url):
    from kbsql.notebook.widgets.panel import AgentStreamPanel

    client = kbsql.connect(mindsdb_url)
    panel = AgentStreamPanel(question="How long do refunds take?", agent="text_agent", min_interval=0)
    chunks = client.agents.stream("text_agent", "How long do refunds take?")
    panel.feed(next(chunks))
    assert "Generating Data Catalog..." in panel.notes.value and panel.answer.value == ""
    panel.consume(chunks)
    assert "Returning text response" in panel.notes.value and ANSWER in panel.answer.value
    client.close()


@pytest.mark.parametrize(("agent", "words"), [
    ("agent_error_agent", ["Agent streaming failed: Connection error."]),
    ("route_error_agent", ["Error in completion event generator", "ModelAPIError: Connection error."]),
])
def test_an_error_chunk_is_a_clear_error(mindsdb_url, agent, words):
    client = kbsql.connect(mindsdb_url)
    with pytest.raises(ServiceError) as caught:
        client.agents.completion(agent, "How long do refunds take?")
    assert f"the agent {agent} failed" in str(caught.value)
    for word in words:
        assert word in str(caught.value)

    chunks = list(client.agents.stream(agent, "How long do refunds take?"))
    assert s.chunk_kind(chunks[-2]) == "error" and s.chunk_kind(chunks[-1]) == "end"
    state = StreamState()
    for chunk in chunks:
        state.feed(chunk)
    assert state.status == "failed" and state.error and state.error in words[0]
    assert state.error in render_text(state)
    client.close()


def test_kbsql_chunks_pass_normalize_unchanged():
    chunks = scripted_chunks() + scripted_chunks(error="model exploded")
    assert [s.normalize_chunk(c) for c in chunks] == chunks
    assert s.normalize_chunk({"type": "data", "text": "a", "trace_id": None}) == s.output_chunk("a", "")
    assert s.normalize_chunk({"error": "boom"}) == s.error_chunk("boom", "")
    assert s.chunk_kind({"type": "status", "content": "..."}) == "context"
