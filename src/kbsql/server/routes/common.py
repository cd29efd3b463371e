"""What every route shares: the service and the lanes of the app, JSON and problem+json
answers, the JSON body reader and the error wrapper of a route. Service calls run in a
worker of one of the app's lanes (`lanes_of(request).catalog.run(...)`, `server/lanes.py`):
it may embed text, call a model or scan a table, never on the event loop.

Error shapes follow reference-behaviour.md: problem+json for REST errors (the class's
problem type in a header, `interface.errors`), 500 only for real faults (still with
title and detail).
"""

from __future__ import annotations

import errno
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from kbsql.interface.api import ServiceApi
from kbsql.interface.control import Stopped
from kbsql.interface.errors import (
    PROBLEM_TYPE_HEADER,
    BadRequest,
    InsufficientStorage,
    MissingParameter,
    ServiceError,
)
from kbsql.interface.jsonable import dumps
from kbsql.server.lanes import Lanes
from kbsql.server.limits import parse_json

log = logging.getLogger("kbsql.server")

PROBLEM = "application/problem+json"

Handler = Callable[[Request], Awaitable[Response]]


def api_of(request: Request) -> ServiceApi:
    """The service this app serves (`build_app` puts it in the app's state)."""
    api: ServiceApi = request.app.state.api
    return api


def path(request: Request, key: str) -> str:
    return request.path_params[key]


def lanes_of(request: Request) -> Lanes:
    """The app's worker lanes (`build_app` puts them in its state; `serve` closes them)."""
    lanes: Lanes = request.app.state.lanes
    return lanes


async def disconnected(request: Request) -> None:
    """Returns when the client has gone away (for `lanes.controlled` and streams)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


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
    if _SURROGATE_ESCAPE.search(raw) is not None:
        _refuse_lone_surrogates(body)
    if not isinstance(body, dict):
        raise MissingParameter("The request body must be a JSON object")
    if wrapper is None:
        return body
    inner = body.get(wrapper)
    if not isinstance(inner, dict):
        raise MissingParameter(f"The request body must have a '{wrapper}' object")
    return inner


def text_field(obj: dict[str, Any], key: str) -> str:
    """`obj[key]` when it is a non-empty string, else a 400 "Wrong argument" in one line.
    MindsDB's openapi.yml types the names and queries of its bodies as strings; `str()` of
    anything else (null, 7, a list) would name a view or a table after Python's spelling
    of it. A missing key is the caller's own 400 (MindsDB's "Missing ... field")."""
    value = obj.get(key)
    if isinstance(value, str) and value.strip():
        return value
    kind = (("an empty string" if not value else "only blanks") if isinstance(value, str)
            else "null" if value is None
            else "a boolean" if isinstance(value, bool) else "a number" if isinstance(value, int | float)
            else "a list" if isinstance(value, list) else "an object")
    raise BadRequest(f"'{key}' must be a non-empty string, not {kind}", title="Wrong argument")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A `\\uD800`-`\\uDFFF` escape: JSON allows one alone, Python's parser keeps it, and no
UTF-8 text holds it (a pair of them, as encoders escape an emoji, is one character)."""


def _refuse_lone_surrogates(body: Any) -> None:
    """A lone surrogate went on to fail wherever the text was encoded: a 500
    UnicodeEncodeError for a view's query or a data source's parameters, a 500 TypeError from
    the tokenizer for a knowledge base's row, a 400 naming the codec for a job, and a
    traceback in the log. Checked only when the body holds such an escape."""
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"The request body is not valid JSON text: it holds a lone surrogate "
                         f"({exc.object[exc.start]!r}), half of a character; send UTF-8 text",
                         title="Invalid JSON") from None


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
