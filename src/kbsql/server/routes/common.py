"""What every route shares: the service of the app, the worker-thread hop, JSON and
problem+json answers, the JSON body reader and the error wrapper of a route.

Error shapes follow reference-behaviour.md: problem+json for REST errors (the class's
problem type in a header, `interface.errors`), 500 only for real faults (still with
title and detail).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from kbsql.interface.api import ServiceApi
from kbsql.interface.control import CLIENT_GONE, CURRENT, Control, Stopped
from kbsql.interface.errors import (
    PROBLEM_TYPE_HEADER,
    BadRequest,
    InsufficientStorage,
    MissingParameter,
    ServiceError,
)
from kbsql.interface.jsonable import dumps
from kbsql.server.lanes import Lane, Lanes
from kbsql.server.limits import parse_json

log = logging.getLogger("kbsql.server")

PROBLEM = "application/problem+json"
WATCH_AFTER_S = 0.2
"""A call still running after this long gets its client watched: one that goes away stops
it (`controlled`). Later than 0 so a fast statement (the keep-alive `SELECT 1`) starts no
task; a disconnect is then noticed within this plus the time the socket takes to close."""

Handler = Callable[[Request], Awaitable[Response]]
_default_lanes = Lanes.sized()  # an app built without lanes (tests of routes) shares these


def api_of(request: Request) -> ServiceApi:
    """The service this app serves (`build_app` puts it in the app's state)."""
    api: ServiceApi = request.app.state.api
    return api


def path(request: Request, key: str) -> str:
    return request.path_params[key]


def lanes_of(request: Request) -> Lanes:
    return getattr(request.app.state, "lanes", None) or _default_lanes


def default_lanes() -> Lanes:
    return _default_lanes


async def in_thread(fn: Callable[..., Any], *args: Any, lane: Lane | None = None) -> Any:
    """Run a service call in a worker thread of `lane` (default: the catalog lane; see
    `server/lanes.py`): it may embed text, call a model or scan a table, never on the event
    loop. The caller's context variables go along (the request's `Control`)."""
    return await (lane or _default_lanes.catalog).run(fn, *args)


async def controlled(request: Request, control: Control, fn: Callable[..., Any], *args: Any,
                     lane: Lane) -> Any:
    """`in_thread` under `control` (the service reads it as `interface.control.CURRENT`):
    when the client goes away while the call runs, the control is stopped, which interrupts
    the statement or the model call within the watcher's tick."""
    loop = asyncio.get_running_loop()
    watcher: list[asyncio.Task[None]] = []
    timer = loop.call_later(WATCH_AFTER_S, lambda: watcher.append(
        loop.create_task(_stop_on_disconnect(request, control))))
    token = CURRENT.set(control)
    try:
        return await in_thread(fn, *args, lane=lane)
    finally:
        CURRENT.reset(token)
        timer.cancel()
        for task in watcher:
            task.cancel()


async def _stop_on_disconnect(request: Request, control: Control) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    control.stop(CLIENT_GONE)


def json_response(body: Any, status: int = 200, media_type: str = "application/json") -> Response:
    return Response(dumps(body), status_code=status, media_type=media_type)


def problem(error: ServiceError) -> Response:
    """The problem+json answer; the class's problem type rides in a header so the body stays
    the reference's `{"title", "detail"}` (see `interface.errors`); an error with a
    `retry_after` (a full lane, a database away) says when to come back (Retry-After)."""
    response = json_response(error.to_problem(), error.status, PROBLEM)
    response.headers[PROBLEM_TYPE_HEADER] = error.problem_type
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def endpoint(handler: Handler) -> Handler:
    """A route whose service errors answer problem+json and whose faults answer 500; a full
    disk is a 507, a call stopped because its client left answers nobody (no log)."""
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except ServiceError as exc:
            return problem(exc)
        except Stopped as exc:
            return problem(ServiceError(f"The request was stopped: {exc.reason}", "Stopped", 499))
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                return _fault(request, exc)
            return problem(InsufficientStorage("The disk is full: nothing was stored by this "
                                               "request. Free some space and send it again"))
        except Exception as exc:
            return _fault(request, exc)
    return wrapped


def _fault(request: Request, exc: Exception) -> Response:
    """A real fault: logged, and a 500 with the documented keys."""
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return json_response({"title": "Internal server error", "detail": f"{type(exc).__name__}: {exc}"},
                         500, PROBLEM)


async def read_body(request: Request, wrapper: str | None = None) -> dict[str, Any]:
    """The JSON body (or its `wrapper` object). Malformed JSON (also not UTF-8, or with
    NaN, see limits.parse_json) is a 400, never a 500."""
    raw = await request.body()
    try:
        body = parse_json(raw, getattr(request.app.state, "limits", None))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"The request body is not valid JSON: {exc}", title="Invalid JSON") from exc
    except RecursionError as exc:  # `[[[[...` nested past the parser's stack: still bad JSON
        raise BadRequest("The request body is not valid JSON: nested too deeply",
                         title="Invalid JSON") from exc
    if not isinstance(body, dict):
        raise MissingParameter("The request body must be a JSON object")
    if wrapper is None:
        return body
    inner = body.get(wrapper)
    if not isinstance(inner, dict):
        raise MissingParameter(f"The request body must have a '{wrapper}' object")
    return inner


def not_supported(what: str) -> BadRequest:
    """A route whose optional capability this service does not declare."""
    return BadRequest(f"not supported by this service: {what}", title="Not supported")


def capability(request: Request, kind: Any, what: str) -> Any:
    """The service as the optional capability `kind` (a runtime-checkable protocol of
    interface/api.py; typed by the caller), or the route's one-line refusal naming `what`
    when the service does not declare it."""
    api = api_of(request)
    if not isinstance(api, kind):
        raise not_supported(what)
    return api
