"""`/api/projects/{project}/views[/{name}]`, as MindsDB's `namespaces/views.py` answers them,
over the `Views` capability (the views `CREATE VIEW` keeps, so SQL and REST see the same).

Codes: GET 200 (`[{id, name, query}]` or one); POST `{"view": {name, query}}` 201 (no `view`
/ `name` / `query` 400, one that is not a non-empty string 400, a name in use 409); PUT
`{"view": {query}}` 201 when it creates, 200 when it changes; DELETE 204; a missing project
or view 404.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import Views
from kbsql.interface.errors import BadRequest
from kbsql.server.routes.common import (
    capability,
    endpoint,
    json_response,
    lanes_of,
    path,
    read_body,
    text_field,
)


def _views(request: Request) -> Views:
    return capability(request, Views, "MindsDB's /api/projects/{project}/views")


async def _view_body(request: Request, verb: str) -> dict:
    body = await read_body(request)
    view = body.get("view")
    if not isinstance(view, dict):
        raise BadRequest(f'Must provide "view" parameter in {verb} body', title="Wrong argument")
    return view


async def collection(request: Request) -> Response:
    api, project = _views(request), path(request, "project")
    if request.method == "GET":
        return json_response(await lanes_of(request).catalog.run(api.list_views, project))
    view = await _view_body(request, "POST")
    for key in ("name", "query"):
        if key not in view:
            raise BadRequest(f'Missing "{key}" field for view', title="Wrong argument")
    name, query = text_field(view, "name"), text_field(view, "query")
    made = await lanes_of(request).catalog.run(api.create_view, project, name, query)
    return json_response(made, 201)


async def item(request: Request) -> Response:
    api, project, name = _views(request), path(request, "project"), path(request, "name")
    if request.method == "GET":
        return json_response(await lanes_of(request).catalog.run(api.get_view, project, name))
    if request.method == "DELETE":
        await lanes_of(request).catalog.run(api.delete_view, project, name)
        return Response(status_code=204)
    view = await _view_body(request, "PUT")
    query = None if view.get("query") is None else text_field(view, "query")
    answer, created = await lanes_of(request).catalog.run(api.put_view, project, name, query)
    return json_response(answer, 201 if created else 200)


ROUTES = [
    Route("/api/projects/{project}/views", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/projects/{project}/views/{name}", endpoint(item), methods=["GET", "PUT", "DELETE"]),
]
