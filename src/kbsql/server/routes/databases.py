"""`/api/databases[/{name}[/tables[/{table}]]]` and `/api/databases/status`, as MindsDB's
`namespaces/databases.py` answers them (rest/databases/*.mdx), over the `Databases`
capability (the same catalog CREATE DATABASE writes, so SQL and REST see the same data
sources).

Codes: GET 200; POST 201 (a name in use 409 "Name conflict", a missing `database`, `name`
or `engine` 400 "Wrong argument"; `check_connection` that fails answers 200
`{"status": "connection_error", "detail"}`, as MindsDB's POST does); PUT 201 when it
creates, 200 when it updates (an `engine` other than the source's 400), 400 "Connection
error" when `check_connection` fails; DELETE 204 (a system database 400 "Error", an unknown
one 404). Tables: GET 200, POST `{"table": {name, select, replace}}` 201 in `files` or `df`
(a project 400, a name or select that is not a non-empty string 400, a name in use 409),
DELETE 204.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import Databases
from kbsql.interface.errors import BadRequest, ConnectionFailed, NotFound
from kbsql.server.lanes import owner_key
from kbsql.server.routes.common import (
    capability,
    endpoint,
    json_response,
    lanes_of,
    path,
    read_body,
    text_field,
)


def _databases(request: Request) -> Databases:
    return capability(request, Databases, "MindsDB's /api/databases")


def _wrong(detail: str) -> BadRequest:
    return BadRequest(detail, title="Wrong argument")


async def _wrapped(request: Request, key: str, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the whole body, its `key` object): a missing object is MindsDB's 400."""
    body = await read_body(request)
    inner = body.get(key)
    if not isinstance(inner, dict):
        raise _wrong(f'Must provide "{key}" parameter in {what} body')
    return body, inner


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("1", "true"))


async def collection(request: Request) -> Response:
    """GET lists the databases; POST creates a data source. (Every call but the list may
    reach a data source, a network away: the SQL lane, never the catalog's.)"""
    api, owner = _databases(request), owner_key(request.scope)
    if request.method == "GET":
        return json_response(await lanes_of(request).catalog.run(api.list_databases))
    body, database = await _wrapped(request, "database", "POST")
    if "name" not in database:
        raise _wrong('Missing "name" field for database')
    if "engine" not in database:
        raise _wrong('Missing "engine" field for database. If you want to create a project instead, use '
                     "the /api/projects endpoint.")
    check = _flag(body.get("check_connection"))
    try:
        created = await lanes_of(request).sql.run(api.create_database, database["name"], database["engine"],
                                                  database.get("parameters") or {}, check, owner=owner)
    except ConnectionFailed as exc:  # MindsDB's POST answers a failed check with 200
        return json_response({"status": "connection_error", "detail": exc.detail})
    return json_response(created, 201)


async def status(request: Request) -> Response:
    """`POST /api/databases/status`: can a source with these parameters be reached?"""
    body = await read_body(request)
    if "engine" not in body:
        raise _wrong('Missing "engine" field for database')
    parameters = {k: v for k, v in body.items() if k != "engine"}
    error = await lanes_of(request).sql.run(_databases(request).check_database, body["engine"], parameters,
                                            owner=owner_key(request.scope))
    if error is not None:
        return json_response({"status": "connection_error", "detail": error})
    return json_response({"status": "success"})


async def item(request: Request) -> Response:
    """GET answers a database, PUT creates or updates one, DELETE drops it."""
    api, name, owner = _databases(request), path(request, "name"), owner_key(request.scope)
    if request.method == "GET":
        check = _flag(request.query_params.get("check_connection", "false"))
        return json_response(await lanes_of(request).sql.run(api.get_database, name, check, owner=owner))
    if request.method == "DELETE":
        await lanes_of(request).sql.run(api.delete_database, name, owner=owner)
        return Response(status_code=204)
    body, database = await _wrapped(request, "database", "POST")
    check = _flag(body.get("check_connection"))
    parameters = database.get("parameters") or {}
    try:
        await lanes_of(request).sql.run(api.get_database, name, owner=owner)
    except NotFound:
        if "engine" not in database:
            raise _wrong('Missing "engine" field for new database. If you want to create a project '
                         "instead, use the POST /api/projects endpoint.") from None
        return json_response(await lanes_of(request).sql.run(api.create_database, name, database["engine"],
                                                             parameters, check, owner=owner), 201)
    return json_response(await lanes_of(request).sql.run(api.update_database, name, parameters, check,
                                                         database.get("engine"), owner=owner))


async def tables(request: Request) -> Response:
    """GET lists a database's tables; POST creates one from a SELECT."""
    api, database, owner = _databases(request), path(request, "name"), owner_key(request.scope)
    if request.method == "GET":
        return json_response(await lanes_of(request).sql.run(api.list_tables, database, owner=owner))
    _, table = await _wrapped(request, "table", "POST")
    if "name" not in table:
        raise _wrong('Missing "name" field for table')
    if "select" not in table:
        raise _wrong('Missing "select" field for table')
    name, select = text_field(table, "name"), text_field(table, "select")  # str(None) wrote a table 'None'
    created = await lanes_of(request).sql.run(api.create_table, database, name, select,
                                              _flag(table.get("replace", False)), owner=owner)
    return json_response(created, 201)


async def table(request: Request) -> Response:
    """GET answers a table, DELETE drops it."""
    api, database, name = _databases(request), path(request, "name"), path(request, "table")
    owner = owner_key(request.scope)
    if request.method == "GET":
        return json_response(await lanes_of(request).sql.run(api.get_table, database, name, owner=owner))
    await lanes_of(request).sql.run(api.drop_table, database, name, owner=owner)
    return Response(status_code=204)


ROUTES = [
    Route("/api/databases", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/databases/", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/databases/status", endpoint(status), methods=["POST"]),
    Route("/api/databases/{name}", endpoint(item), methods=["GET", "PUT", "DELETE"]),
    Route("/api/databases/{name}/tables", endpoint(tables), methods=["GET", "POST"]),
    Route("/api/databases/{name}/tables/{table}", endpoint(table), methods=["GET", "DELETE"]),
]
