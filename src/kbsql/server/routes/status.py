"""`GET /api/status`, `/api/projects` and `/api/projects/{project}`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.server.routes.common import api_of, endpoint, json_response, lanes_of, path


async def status(request: Request) -> Response:
    """The service's status; `auth.http_auth_enabled` says whether this server asks for a
    token (the service itself does not know)."""
    answer = await lanes_of(request).catalog.run(api_of(request).status)
    auth = request.app.state.auth
    answer["auth"] = {**answer.get("auth", {}), "http_auth_enabled": auth.enabled}
    return json_response(answer)


async def projects(request: Request) -> Response:
    return json_response(await lanes_of(request).catalog.run(api_of(request).list_projects))


async def project(request: Request) -> Response:
    answer = await lanes_of(request).catalog.run(api_of(request).get_project, path(request, "project"))
    return json_response(answer)


ROUTES = [
    Route("/api/status", endpoint(status), methods=["GET"]),
    Route("/api/projects", endpoint(projects), methods=["GET"]),
    Route("/api/projects/{project}", endpoint(project), methods=["GET"]),
]
