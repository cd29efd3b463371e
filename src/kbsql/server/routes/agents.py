"""`/api/projects/{project}/agents[/{name}]` and the agent's completions, whole or streamed
as server-sent events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kbsql.interface.control import CURRENT, Control
from kbsql.interface.stream import close_stream, end_chunk, error_chunk, sse_lines
from kbsql.server.lanes import Lane, controlled, owner_key
from kbsql.server.routes.common import (
    api_of,
    disconnected,
    endpoint,
    json_response,
    lanes_of,
    log,
    path,
    read_body,
)


async def collection(request: Request) -> Response:
    """GET lists the project's agents, POST creates one."""
    api, project = api_of(request), path(request, "project")
    if request.method == "POST":
        body = await read_body(request, "agent")  # checks the model: the model lane
        agent = await lanes_of(request).model.run(api.create_agent, project, body,
                                                  owner=owner_key(request.scope))
        return json_response(agent.to_json(), 201)
    return json_response([a.to_json() for a in await lanes_of(request).catalog.run(api.list_agents, project)])


async def item(request: Request) -> Response:
    """GET answers the agent, PUT updates it, DELETE drops it."""
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    if request.method == "DELETE":  # 204, as MindsDB's AgentResource.delete
        await lanes_of(request).catalog.run(api.delete_agent, project, name)
        return Response(status_code=204)
    if request.method == "PUT":
        body = await read_body(request, "agent")
        agent = await lanes_of(request).model.run(api.update_agent, project, name, body,
                                                  owner=owner_key(request.scope))
        return json_response(agent.to_json())
    return json_response((await lanes_of(request).catalog.run(api.get_agent, project, name)).to_json())


async def messages_of(request: Request) -> Any:
    """The `messages` as sent: the service validates them (`validate.messages`), the same
    way for both completion routes and for embedded callers."""
    return (await read_body(request)).get("messages")


async def completions(request: Request) -> Response:
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    messages = await messages_of(request)
    answer = await controlled(lambda: disconnected(request), Control(), api.complete, project, name, messages,
                              lane=lanes_of(request).model,  # a client that leaves stops the run
                              owner=owner_key(request.scope))
    return json_response(answer)


async def completions_stream(request: Request) -> Response:
    """The run as server-sent events, on the model lane (a full lane is a real 503 here)."""
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    messages = await messages_of(request)
    lane = lanes_of(request).model
    owner = owner_key(request.scope)
    chunks = await lane.run(api.stream, project, name, messages, owner=owner)  # 404 before streaming
    return StreamingResponse(stream_events(chunks, request, lane, owner),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _close_on_disconnect(chunks: Iterator[dict[str, Any]], request: Request | None) -> None:
    """Close the chunk iterator as soon as the client goes away. Starlette (ASGI 2.4) only
    notices a disconnect when it next writes, which may be a whole model call later."""
    if request is None:
        return
    await disconnected(request)
    close_stream(chunks)


def _next_line(work: Control, lines: Iterator[str], sentinel: Any) -> Any:
    """The stream's next line, made as `work` (the context's Control while it runs)."""
    token = CURRENT.set(work)
    try:
        return next(lines, sentinel)
    finally:
        CURRENT.reset(token)


async def stream_events(chunks: Iterator[dict[str, Any]], request: Request | None,
                        lane: Lane, owner: str | None = None) -> AsyncIterator[str]:
    """Send each chunk as soon as the service yields it. A failure mid-way becomes an error
    chunk then `end`; a client that goes away closes the generator, which stops the run.
    The stream holds one slot of its `lane` throughout: admitted once, never refused
    half-way."""
    lines = sse_lines(chunks)
    sentinel: Any = object()
    work = Control()
    work.owner = owner  # its model calls take the owner's share of the model host's slots
    trace_id = ""
    held = False
    watcher = asyncio.ensure_future(_close_on_disconnect(chunks, request))
    try:
        await lane.acquire(owner)  # within the owner's fair share of the lane
        held = True
        while True:
            line = await lane.call(_next_line, work, lines, sentinel)
            if line is sentinel:
                return
            if not trace_id and '"trace_id":"' in line:
                trace_id = line.split('"trace_id":"', 1)[1].split('"', 1)[0]
            yield line
    except Exception as exc:  # the service failed after the first chunk left
        log.warning("agent stream failed: %s", exc)
        for tail in sse_lines([error_chunk(str(exc), trace_id), end_chunk()]):
            yield tail
    finally:
        if held:
            lane.release(owner)
        watcher.cancel()
        close_stream(chunks)


ROUTES = [
    Route("/api/projects/{project}/agents", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/projects/{project}/agents/{name}", endpoint(item), methods=["GET", "PUT", "DELETE"]),
    Route("/api/projects/{project}/agents/{name}/completions", endpoint(completions), methods=["POST"]),
    Route("/api/projects/{project}/agents/{name}/completions/stream", endpoint(completions_stream),
          methods=["POST"]),
]
