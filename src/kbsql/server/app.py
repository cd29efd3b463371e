"""The HTTP server: a thin Starlette adapter from the interface's routes to a service.

The service is anything that speaks `ServiceApi` (`interface/api.py`), plus the optional
capabilities it declares (files as tables, knowledge-base editing); `cli.py` wires it to
the local engine. Each route (`routes/`, one module per resource) unwraps the body, calls
one service method in a worker thread, and wraps the answer. `build_app` only assembles
the routes, the middleware and the answers for unknown routes and methods.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from kbsql.interface.api import ServiceApi
from kbsql.server.auth import AuthSettings, TokenAuth
from kbsql.server.connection_shares import HttpConnections, HttpConnectionShare
from kbsql.server.guard import RequestGuard
from kbsql.server.lanes import Lanes
from kbsql.server.limits import BodyLimit, Limits
from kbsql.server.routes import (
    agents,
    databases,
    handlers,
    jobs,
    knowledge_bases,
    project_views,
    server_config,
    sql,
    status,
    tree,
    uploads,
)
from kbsql.server.routes.common import PROBLEM, json_response
from kbsql.server.throttle import FailureThrottle

ROUTES = [*status.ROUTES, *knowledge_bases.ROUTES, *agents.ROUTES, *sql.ROUTES, *uploads.ROUTES,
          *databases.ROUTES, *project_views.ROUTES, *tree.ROUTES, *server_config.ROUTES,
          *handlers.ROUTES, *jobs.ROUTES]


def _no_route(request: Request, exc: Any) -> Response:
    return json_response({"title": "Not found", "detail": f"No route {request.url.path}"}, 404, PROBLEM)


def _no_method(request: Request, exc: Any) -> Response:
    return json_response({"title": "Method not allowed", "detail": f"{request.method} {request.url.path}"},
                         405, PROBLEM)


def build_app(api: ServiceApi, *, bind_host: str | None = None,
              allowed_origins: Iterable[str] = (), auth: AuthSettings | None = None,
              limits: Limits | None = None, lanes: Lanes | None = None,
              throttle: FailureThrottle | None = None,
              connections: HttpConnections | None = None) -> Starlette:
    """The ASGI app over one service, behind the request guard (`guard.py`): `bind_host` is
    the address the server listens on (a loopback bind turns on the Host check) and
    `allowed_origins` the browser origins allowed besides loopback ones. Then the token
    check (`auth.py`, off when `auth` has no token nor user; `throttle` counts failed
    credentials, shared with the MySQL door) and the body limits (`limits.py`). `lanes`: the
    worker pools of SQL, model and catalog calls (`lanes.py`); `connections`: the connections
    each credential keeps open (`connection_shares.py`; `serve` makes them)."""
    auth = auth or AuthSettings()
    limits = limits or Limits()
    app = Starlette(routes=ROUTES, middleware=[
        Middleware(RequestGuard, bind_host=bind_host, allowed_origins=tuple(allowed_origins)),
        Middleware(TokenAuth, settings=auth, throttle=throttle),
        Middleware(HttpConnectionShare, connections=connections),
        Middleware(BodyLimit, limits=limits),
    ], exception_handlers={404: _no_route, 405: _no_method})
    app.state.api = api
    app.state.auth = auth
    app.state.limits = limits
    app.state.lanes = lanes or Lanes.sized()
    return app
