"""`GET /api/tree/` and `/api/tree/{db}`, as MindsDB's `namespaces/tree.py` answers them:
mindsdb_sdk's `server.tree()`, `database.tree()` and its `views.list()` / `views.get()` read
them (a view is a leaf of type `view` of its project). Built from the engine's own answers
(`information_schema.databases`, `SHOW FULL TABLES`, `information_schema.jobs`) through
`ServiceApi.query`, so SQL and REST list the same objects.

A project's first leaf is `models` (type `table`), as MindsDB lists it in every project even
though ML models are refused here (`SELECT * FROM models` says so in one line): the SDK's
`views.list()` reads the leaves' `type` column, which an empty project's `[]` lacks, so
without it the call fails on a project holding nothing yet. Where kbsql differs: a data
source's tables are one flat list (`all_schemas` is accepted and changes nothing).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import DEFAULT_PROJECT, Databases
from kbsql.interface.errors import BadRequest
from kbsql.server.lanes import owner_key
from kbsql.server.routes.common import api_of, endpoint, json_response, lanes_of, path

PROJECT_TYPES = {"VIEW": "view", "KNOWLEDGE BASE": "knowledge_base", "AGENT": "agent"}
DATA_TYPES = {"BASE TABLE": "table", "VIEW": "view"}


def _deletable(api: Any) -> set[str]:
    """The data sources and projects a user may drop (MindsDB's `deletable`): the built-in
    ones (`files`, `df`, the default project) are not."""
    if not isinstance(api, Databases):
        return set()
    return {str(d["name"]).lower() for d in api.list_databases() if d.get("deletable")}


def _catalog(api: Any) -> Any:
    """The engine's catalog reader (server/mysql/metadata.py), imported on the first tree read:
    that module loads Arrow and DuckDB, which an idle server does not hold (test_lazy_imports)."""
    from kbsql.server.mysql.metadata import EngineCatalog

    return EngineCatalog(api, DEFAULT_PROJECT)


def root(api: Any) -> list[dict[str, Any]]:
    deletable = _deletable(api)
    return [{"name": name, "class": "db", "type": kind, "engine": engine,
             "deletable": name.lower() in deletable or (kind == "project" and name != DEFAULT_PROJECT),
             "visible": True}
            for name, kind, engine in _catalog(api).databases()]


def leaf(api: Any, db_name: str) -> list[dict[str, Any]]:
    catalog = _catalog(api)
    kinds = {name.lower(): (name, kind) for name, kind, _ in catalog.databases()}
    if db_name.lower() not in kinds:
        raise BadRequest(f"There is no element with name '{db_name}'", title="Error")
    name, kind = kinds[db_name.lower()]
    tables = catalog.tables_of(name)
    if kind == "project":
        return ([{"name": "models", "schema": None, "class": "table", "type": "table", "engine": None,
                  "deletable": False}]
                + [{"name": t, "schema": None, "class": "table",
                    "type": PROJECT_TYPES.get(k.upper(), k.lower()), "engine": None, "deletable": True}
                   for t, k in tables]
                + [{"name": j, "schema": None, "class": "job", "type": "job", "engine": "job",
                    "deletable": True} for j in catalog.jobs_of(name)])
    if kind == "data":
        return [{"name": t, "class": "table", "type": DATA_TYPES.get(k.upper()), "engine": None,
                 "deletable": False} for t, k in tables]
    return [{"name": t, "class": "table", "type": "system view", "engine": None, "deletable": False}
            for t, _ in tables]


def _engine_answer(call: Any, *args: Any) -> Any:
    """`call(*args)`, an SQL error of the engine (a data source that cannot be reached) being
    the route's 400 with its message."""
    from kbsql.server.mysql.metadata import Refused

    try:
        return call(*args)
    except Refused as exc:
        raise BadRequest(exc.result.error_message, title="Error") from None


async def tree_root(request: Request) -> Response:
    answer = await lanes_of(request).sql.run(_engine_answer, root, api_of(request),
                                             owner=owner_key(request.scope))
    return json_response(answer)


async def tree_leaf(request: Request) -> Response:
    """The reads are SQL statements (a data source's tables may be a remote call): the SQL
    lane runs them, with the caller's fair share."""
    answer = await lanes_of(request).sql.run(_engine_answer, leaf, api_of(request), path(request, "db"),
                                             owner=owner_key(request.scope))
    return json_response(answer)


ROUTES = [
    Route("/api/tree/", endpoint(tree_root), methods=["GET"]),
    Route("/api/tree/{db}", endpoint(tree_leaf), methods=["GET"]),
]
