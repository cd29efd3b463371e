"""The HTTP client against a server that is not kbsql but speaks the interface the way the
reference does: trailing-slash 308 redirects, other 2xx codes, problem+json errors, an
error mid-stream. The fake runs on loopback with uvicorn in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

import kbsql
from kbsql.interface import BadRequest, NotFound, SqlError, TransportError

KB = {"id": 7, "name": "docs", "project_id": 1, "project_name": "mindsdb",
      "vector_database": "docs_chromadb", "vector_database_table": "default_collection",
      "created_at": "2025-01-01 00:00:00.000000", "updated_at": "2025-01-01 00:00:00.000000",
      "query_id": None, "embedding_model": {"provider": "openai", "model_name": "e", "api_key": "******"},
      "reranking_model": None, "metadata_columns": ["product"], "content_columns": ["content"],
      "id_column": "id", "params": {"created_embedding_model": "kb_embedding_docs"},
      "a_field_kbsql_does_not_know": {"x": 1}}


def reference_like_app(seen: list[str]) -> Starlette:
    async def kb_list_slash(request: Request) -> Response:  # the reference wants the slash
        return RedirectResponse(str(request.url).rstrip("/") + "/", status_code=308)

    async def kb_list(request: Request) -> Response:
        seen.append(f"{request.method} {request.url.path}")
        if request.method == "POST":
            body = await request.json()
            return JSONResponse({**KB, "name": body["knowledge_base"]["name"]}, status_code=202)
        return JSONResponse([KB])

    async def kb_item(request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "DELETE":
            return Response(status_code=204)
        if name != "docs":
            return JSONResponse({"title": "Knowledge Base not found",
                                 "detail": f"Knowledge Base with name {name} does not exist"},
                                status_code=404, media_type="application/problem+json")
        return JSONResponse(KB)

    async def bad_agent(request: Request) -> Response:
        return JSONResponse({"title": "Missing parameter", "detail": "Please provide a model"},
                            status_code=400, media_type="application/problem+json")

    async def sql(request: Request) -> Response:
        body = await request.json()
        if body["query"].startswith("BAD"):
            return JSONResponse({"type": "error", "error_code": 0, "error_message": "Syntax error",
                                 "context": body.get("context") or {}})
        return JSONResponse({"type": "table", "column_names": ["a"], "data": [[1]],
                             "context": {"show_secrets": False, "db": "proj2"}})

    async def stream(request: Request) -> Response:
        async def events():
            yield 'data: {"type": "start", "prompt": "q", "trace_id": "t1"}\n\n'
            yield ": keep-alive comment\n\n"
            yield 'data: {"type": "error", "content": "model exploded", "trace_id": "t1"}\n\n'
            yield 'data: {"type": "end"}\n\n'
        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[
        Route("/api/projects/{p}/knowledge_bases", kb_list_slash, methods=["GET", "POST"]),
        Route("/api/projects/{p}/knowledge_bases/", kb_list, methods=["GET", "POST"]),
        Route("/api/projects/{p}/knowledge_bases/{name}", kb_item, methods=["GET", "DELETE"]),
        Route("/api/projects/{p}/agents", bad_agent, methods=["POST"]),
        Route("/api/projects/{p}/agents/{a}/completions/stream", stream, methods=["POST"]),
        Route("/api/sql/query", sql, methods=["POST"]),
    ])


@pytest.fixture(scope="module")
def reference_url():
    seen: list[str] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(reference_like_app(seen), log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(5)


def test_follows_308_and_accepts_any_2xx(reference_url):
    client = kbsql.connect(reference_url)
    kbs = client.knowledge_bases.list()
    assert [k.name for k in kbs] == ["docs"]
    # unknown fields survive: the object keeps the exact JSON it came from
    assert kbs[0].to_json()["a_field_kbsql_does_not_know"] == {"x": 1}
    created = client.knowledge_bases.create("new_kb", content_columns=["content"])
    assert created.name == "new_kb"  # a 202 after a 308 on POST (method and body kept)
    assert client.knowledge_bases.delete("docs") is None  # 204 is fine too


def test_problem_json_becomes_the_same_exceptions(reference_url):
    client = kbsql.connect(reference_url)
    with pytest.raises(NotFound) as exc:
        client.knowledge_bases.get("kb9")
    assert exc.value.title == "Knowledge Base not found"
    assert "kb9" in str(exc.value)
    with pytest.raises(BadRequest) as exc:
        client.agents.create("a")
    assert exc.value.detail == "Please provide a model"


def test_sql_context_and_errors(reference_url):
    client = kbsql.connect(reference_url)
    assert client.sql("SELECT a").to_pandas()["a"].tolist() == [1]
    assert client.project == "proj2"  # the answer's context is kept for the next query
    with pytest.raises(SqlError, match="Syntax error"):
        client.sql("BAD")


def test_stream_reads_events_and_error_chunks(reference_url):
    client = kbsql.connect(reference_url)
    chunks = list(client.agents.stream("any", "q"))
    assert [c["type"] for c in chunks] == ["start", "error", "end"]
    assert json.dumps(chunks[1]) and chunks[1]["content"] == "model exploded"


def test_unreachable_server_is_a_transport_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    client = kbsql.connect(f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError, match=str(port)):
        client.knowledge_bases.list()
