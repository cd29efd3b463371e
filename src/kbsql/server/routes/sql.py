"""`POST /api/sql/query` (rest/sql.mdx): one statement, answered whole or streamed as
server-sent events or JSON lines (`response_format`). SQL errors answer HTTP 200 with
`type: error`, as the reference does. A body may carry `timeout` (seconds) to stop its
statement sooner than the server's --statement-timeout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kbsql.interface.control import Control
from kbsql.interface.errors import InvalidParameter, MissingParameter, ServiceError
from kbsql.interface.jsonable import dumps
from kbsql.interface.parametrize import parametrize_constants
from kbsql.interface.results import ErrorResult, default_context
from kbsql.server.lanes import controlled, owner_key
from kbsql.server.limits import check_sql_size
from kbsql.server.routes.common import (
    api_of,
    disconnected,
    endpoint,
    json_response,
    lanes_of,
    read_body,
)

RESPONSE_FORMATS = (None, "sse", "jsonlines")  # rest/sql.mdx
RESULT_BATCH = 1000  # rows per line of a streamed SQL result


def result_lines(body: dict[str, Any], sse: bool) -> Iterator[str]:
    """A result as the documented stream: a header line, then the rows in batches."""
    def line(value: Any) -> str:
        text = dumps(value)
        return f"data: {text}\n\n" if sse else text + "\n"

    if body.get("type") != "table":
        yield line(body)
        return
    rows = body.pop("data", [])
    yield line(body)
    for start in range(0, len(rows), RESULT_BATCH):
        yield line(rows[start:start + RESULT_BATCH])


def _timeout_of(body: dict[str, Any]) -> float | None:
    """The `timeout` a request may send (seconds, kbsql's extension): it can shorten the
    server's statement deadline, never lengthen it."""
    timeout = body.get("timeout")
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise InvalidParameter(f"'timeout' must be a number of seconds above 0, not {timeout!r}")
    return float(timeout)


def _checked(body: dict[str, Any]) -> tuple[str, Any, Any]:
    """(query, response_format, params) of a well-formed body, or a 400 saying what is wrong."""
    query = body.get("query")
    if not isinstance(query, str):  # an empty text is MindsDB's error result, the engine's
        raise MissingParameter("'query' must be an SQL string")
    response_format = body.get("response_format")
    if response_format not in RESPONSE_FORMATS:
        raise InvalidParameter(f"'response_format' must be null, 'sse' or 'jsonlines', not "
                               f"{response_format!r}")
    params = body.get("params")
    if params is not None and not isinstance(params, dict | list):
        raise InvalidParameter("'params' must be an object of parameter values")
    return query, response_format, params


async def query(request: Request) -> Response:
    body = await read_body(request)
    query = body.get("query")
    if isinstance(query, str) and query.strip():  # a too-long text never reaches the parser,
        too_big = check_sql_size(query, request.app.state.limits)  # whose memory grows ~190x it
        if too_big is not None:
            sent = body.get("context")
            context = {**default_context(), **(sent if isinstance(sent, dict) else {})}
            return json_response(ErrorResult(too_big, context=context).to_json())
    text, response_format, params = _checked(body)
    control = Control.after(_timeout_of(body), "the request's timeout")
    api = api_of(request)

    def run() -> Any:
        """The statement and its answer's JSON, both in the worker thread: a large
        result's rows are built and encoded off the event loop."""
        result = api.query(text, body.get("context"), params or None)  # the service checks it
        return result.to_json() if response_format else dumps(result.to_json()).encode()

    # its own worker lane; the service's deadline, or the request's if sooner; a client
    # that goes away stops it
    answer = await controlled(lambda: disconnected(request), control, run, lane=lanes_of(request).sql,
                              owner=owner_key(request.scope))
    if response_format is None:
        return Response(answer, media_type="application/json")
    media = "text/event-stream" if response_format == "sse" else "application/jsonlines"
    return StreamingResponse(result_lines(answer, response_format == "sse"), media_type=media)


async def parametrize(request: Request) -> Response:
    """MindsDB's `POST /api/sql/query/utils/parametrize_constants` (interface/parametrize.py):
    the statement with its constants as named parameters; nothing is run. A text that does
    not parse is a 400 in one line (MindsDB answers 500)."""
    body = await read_body(request)
    text = body.get("query")
    if not isinstance(text, str) or not text.strip():
        raise MissingParameter("'query' must be an SQL string")
    too_big = check_sql_size(text, request.app.state.limits)
    if too_big is not None:
        raise InvalidParameter(too_big)
    try:
        answer = await lanes_of(request).sql.run(  # parsing is the SQL lane's work, with its fair share
            parametrize_constants, text, owner=owner_key(request.scope))
    except ServiceError:  # the lane's own answer (503 Busy: full, or this owner's share taken)
        raise
    except Exception as exc:  # the parser's own error: the client's text
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InvalidParameter(f"The query does not parse: {first}") from None
    return json_response(answer)


ROUTES = [Route("/api/sql/query", endpoint(query), methods=["POST"]),
          Route("/api/sql/query/utils/parametrize_constants", endpoint(parametrize), methods=["POST"])]
