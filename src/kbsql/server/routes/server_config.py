"""`GET /api/config` and `PUT /api/config`, MindsDB's `namespaces/config.py`, as mindsdb_sdk's
`server.config` reads and writes them (`get_default_llm()`, `set_default_embedding_model(...)`).

GET answers `auth.http_auth_enabled` and the service's `default_llm` and
`default_embedding_model` (the `DefaultModels` capability; a key masked, where MindsDB shows
it); there is no default reranking model, so that key is absent, as MindsDB leaves out one
not set. MindsDB's `knowledge_bases` and `api` sections are not sent (nothing here reads them).
PUT is refused in one line: the defaults are the server's settings, read when it starts, and
changing them for every user over HTTP is left to whoever runs the server.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import DefaultModels
from kbsql.server.routes.common import capability, endpoint, json_response, lanes_of, not_supported

SETTINGS = ("default_model and default_embedding_model in the data directory's config.json, or "
            "$KBSQL_DEFAULT_MODEL_PROVIDER, _NAME, _API_KEY and _BASE_URL, read when the server starts")


async def get_config(request: Request) -> Response:
    api = capability(request, DefaultModels, "MindsDB's /api/config")
    models = await lanes_of(request).catalog.run(api.default_models)
    return json_response({"auth": {"http_auth_enabled": request.app.state.auth.enabled}, **models})


async def put_config(request: Request) -> Response:
    raise not_supported(f"changing the server's configuration over HTTP (its default models are {SETTINGS})")


ROUTES = [
    Route("/api/config", endpoint(get_config), methods=["GET"]),
    Route("/api/config", endpoint(put_config), methods=["PUT"]),
]
