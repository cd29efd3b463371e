"""Against a MindsDB 26.1-like server whose non-stream `/completions` answers 500 (a known
bug of that version): the client asks the stream endpoint and assembles the answer, so
`client.agents.completion` works there too (issue 12). The fake runs with uvicorn on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import kbsql
from kbsql.interface import NotFound
from kbsql.interface.errors import ServiceError


def mindsdb_26_1(calls: list[str]) -> Starlette:
    async def completions(request: Request) -> Response:
        calls.append(f"completions {request.path_params['a']}")
        if request.path_params["a"] == "missing":
            return JSONResponse({"title": "Agent not found", "detail": "Agent missing does not exist"},
                                status_code=404, media_type="application/problem+json")
        return JSONResponse({"title": "Internal Server Error", "detail": "'NoneType' object is not iterable"},
                            status_code=500, media_type="application/problem+json")

    async def stream(request: Request) -> Response:
        calls.append(f"stream {request.path_params['a']}")
        failing = request.path_params["a"] == "broken"

        async def events() -> Iterator[str]:
            yield 'data: {"type": "start", "prompt": "q", "trace_id": "t9"}\n\n'
            yield ('data: {"actions": [{"tool": "kb_query_tool", "tool_input": "SELECT 1", "log": ""}], '
                   '"messages": [{"content": "x"}], "trace_id": "t9"}\n\n')
            if failing:
                yield 'data: {"type": "error", "content": "model unreachable", "trace_id": "t9"}\n\n'
            else:
                yield ('data: {"output": "Refunds take 5 days.", "messages": [{"content": "Refunds take '
                       '5 days."}], "trace_id": "t9"}\n\n')
            yield 'data: {"type": "end"}\n\n'
        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[
        Route("/api/projects/{p}/agents/{a}/completions", completions, methods=["POST"]),
        Route("/api/projects/{p}/agents/{a}/completions/stream", stream, methods=["POST"]),
    ])


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[str]]]:
    calls: list[str] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(mindsdb_26_1(calls), log_level="error"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", calls
    srv.should_exit = True
    thread.join(5)


def test_completion_falls_back_to_the_stream(server: tuple[str, list[str]]) -> None:
    url, calls = server
    client = kbsql.connect(url)
    answer = client.agents.completion("helper", "How long do refunds take?")
    assert answer == "Refunds take 5 days."
    assert calls[-2:] == ["completions helper", "stream helper"]


def test_stream_error_and_other_statuses_are_not_hidden(server: tuple[str, list[str]]) -> None:
    url, calls = server
    client = kbsql.connect(url)
    with pytest.raises(ServiceError) as exc:
        client.agents.completion("broken", "hi")
    assert "model unreachable" in str(exc.value)
    calls.clear()
    with pytest.raises(NotFound):
        client.agents.completion("missing", "hi")
    assert calls == ["completions missing"]  # a 404 is an answer, not the known bug
