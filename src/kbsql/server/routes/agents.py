"""`/api/projects/{project}/agents[/{name}]` and the agent's completions, whole or streamed
as server-sent events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kbsql.interface.stream import close_stream, end_chunk, error_chunk, sse_lines
from kbsql.server.routes.common import api_of, endpoint, in_thread, json_response, log, path, read_body


async def collection(request: Request) -> Response:
    """GET lists the project's agents, POST creates one."""
    api, project = api_of(request), path(request, "project")
    if request.method == "POST":
        body = await read_body(request, "agent")
        return json_response((await in_thread(api.create_agent, project, body)).to_json(), 201)
    return json_response([a.to_json() for a in await in_thread(api.list_agents, project)])


async def item(request: Request) -> Response:
    """GET answers the agent, PUT updates it, DELETE drops it."""
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    if request.method == "DELETE":  # 204, as MindsDB's AgentResource.delete
        await in_thread(api.delete_agent, project, name)
        return Response(status_code=204)
    if request.method == "PUT":
        body = await read_body(request, "agent")
        return json_response((await in_thread(api.update_agent, project, name, body)).to_json())
    return json_response((await in_thread(api.get_agent, project, name)).to_json())


async def messages_of(request: Request) -> Any:
    """The `messages` as sent: the service validates them (`validate.messages`), the same
    way for both completion routes and for embedded callers."""
    return (await read_body(request)).get("messages")


async def completions(request: Request) -> Response:
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    messages = await messages_of(request)
    return json_response(await in_thread(api.complete, project, name, messages))


async def completions_stream(request: Request) -> Response:
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    messages = await messages_of(request)
    chunks = await in_thread(api.stream, project, name, messages)  # 404 before streaming
    return StreamingResponse(stream_events(chunks, request), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _close_on_disconnect(chunks: Iterator[dict[str, Any]], request: Request | None) -> None:
    """Close the chunk iterator as soon as the client goes away. Starlette (ASGI 2.4) only
    notices a disconnect when it next writes, which may be a whole model call later."""
    if request is None:
        return
    while (await request.receive())["type"] != "http.disconnect":
        pass
    close_stream(chunks)


async def stream_events(chunks: Iterator[dict[str, Any]],
                        request: Request | None = None) -> AsyncIterator[str]:
    """Send each chunk as soon as the service yields it. A failure mid-way becomes an error
    chunk then `end`; a client that goes away closes the generator, which stops the run."""
    lines = sse_lines(chunks)
    sentinel: Any = object()
    trace_id = ""
    watcher = asyncio.ensure_future(_close_on_disconnect(chunks, request))
    try:
        while True:
            try:
                line = await in_thread(next, lines, sentinel)
            except Exception as exc:  # the service failed after the first chunk left
                log.warning("agent stream failed: %s", exc)
                for tail in sse_lines([error_chunk(str(exc), trace_id), end_chunk()]):
                    yield tail
                return
            if line is sentinel:
                return
            if not trace_id and '"trace_id":"' in line:
                trace_id = line.split('"trace_id":"', 1)[1].split('"', 1)[0]
            yield line
    finally:
        watcher.cancel()
        close_stream(chunks)


ROUTES = [
    Route("/api/projects/{project}/agents", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/projects/{project}/agents/{name}", endpoint(item), methods=["GET", "PUT", "DELETE"]),
    Route("/api/projects/{project}/agents/{name}/completions", endpoint(completions), methods=["POST"]),
    Route("/api/projects/{project}/agents/{name}/completions/stream", endpoint(completions_stream),
          methods=["POST"]),
]
