"""`/api/projects/{project}/knowledge_bases[/{name}]`: create, list, get, delete, and the
reference's PUT (docs/rest/knowledge_bases/insert.mdx and alter.mdx).

One PUT body may alter the knowledge base (`embedding_model` api_key rotation,
`reranking_model`, columns, `id_column`, `preprocessing`), insert `rows`, and insert the
result of a `query` (mindsdb_sdk's `kb.insert(query)` sends that), in this order. The body's
shape is the HTTP API's business and is checked here; the changes are service operations:
rows through `ServiceApi.insert_knowledge_base_rows`, altering and the query through the
`KnowledgeBaseEditing` capability (the engine runs each as the SQL statement it stands for,
so REST and SQL cannot disagree). A PUT of `rows` alone is the client's insert batch and
answers without reading the knowledge base again.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import KnowledgeBaseEditing, ServiceApi
from kbsql.interface.control import Control
from kbsql.interface.errors import BadRequest, InvalidParameter, MissingParameter, SqlError
from kbsql.interface.models import KnowledgeBase, lifted_params
from kbsql.server.lanes import controlled, owner_key
from kbsql.server.routes.common import (
    api_of,
    disconnected,
    endpoint,
    json_response,
    lanes_of,
    not_supported,
    path,
    read_body,
)

ALTER_FIELDS = KnowledgeBase.PARAMS_FIELDS
HOSTED_ONLY = ("files", "urls", "limit", "crawl_depth", "filters")
INSERT_OPTIONS = ("batch_size", "threads", "track_column", "error", "kb_no_upsert", "kb_skip_existing")
"""The insert options a PUT's `params` may carry (engine/sql/kb/kb_insert.OPTIONS, which the
engine checks for a `query`)."""
QUERY_ONLY_OPTIONS = {"track_column": None, "error": "raise", "kb_no_upsert": False,
                      "kb_skip_existing": False}
"""Options that change which rows are stored, with the value that changes nothing: applied to a
`query`'s insert; `rows` are stored as sent (batch_size and threads only pace the work)."""


async def collection(request: Request) -> Response:
    """GET lists the project's knowledge bases, POST creates one."""
    api, project = api_of(request), path(request, "project")
    if request.method == "POST":
        body = await read_body(request, "knowledge_base")  # checks its models: the model lane
        kb = await lanes_of(request).model.run(api.create_knowledge_base, project, body,
                                               owner=owner_key(request.scope))
        return json_response(kb.to_json(), 201)
    kbs = await lanes_of(request).catalog.run(api.list_knowledge_bases, project)
    return json_response([k.to_json() for k in kbs])


async def item(request: Request) -> Response:
    """GET answers the knowledge base, PUT changes it (`put`), DELETE drops it."""
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    if request.method == "PUT":
        return await put(request)
    if request.method == "DELETE":
        await lanes_of(request).catalog.run(api.delete_knowledge_base, project, name)
        return Response(status_code=200)
    kb = await lanes_of(request).catalog.run(api.get_knowledge_base, project, name)
    return json_response(kb.to_json())


async def put(request: Request) -> Response:
    """PUT: insert rows, alter, insert a query's result (see the module docstring)."""
    api, project, name = api_of(request), path(request, "project"), path(request, "name")
    body = await read_body(request, "knowledge_base")
    lane = lanes_of(request).model  # inserting embeds the rows
    # a client that leaves stops the insert between batches, as the statement deadline does
    # (nothing is stored: knowledge/batch_insert.py)
    if set(body) == {"rows"}:  # one insert batch of a client
        return json_response(await controlled(lambda: disconnected(request), Control(),
                                              api.insert_knowledge_base_rows, project, name, body["rows"],
                                              lane=lane, owner=owner_key(request.scope)))
    return json_response(await controlled(lambda: disconnected(request), Control(),
                                          put_knowledge_base, api, project, name, body, lane=lane,
                                          owner=owner_key(request.scope)))


def check_put(body: dict[str, Any]) -> None:
    """A PUT body the reference accepts and the local service can do, or a 400 saying why."""
    unknown = set(body) - {"rows", "query", "params", *ALTER_FIELDS, *HOSTED_ONLY}
    if unknown:
        raise InvalidParameter(f"Unknown field(s) {sorted(unknown)} in 'knowledge_base': use rows, query, "
                               f"params or {', '.join(ALTER_FIELDS)}")
    hosted = [k for k in HOSTED_ONLY if body.get(k) not in (None, [], {})]
    if hosted:
        raise BadRequest(f"not supported by the local engine: inserting {', '.join(hosted)} (the "
                         "reference crawls and parses them; insert their text as rows)",
                         title="Not supported")
    if not any(k in body for k in ALTER_FIELDS) and body.get("rows") is None and body.get("query") is None:
        raise MissingParameter("The 'knowledge_base' object must have 'rows', 'query' or a field to alter "
                               f"({', '.join(ALTER_FIELDS)})")
    query = body.get("query")
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise InvalidParameter("'query' must be a SELECT statement")
    params = body.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidParameter("'params' must be an object of insert options")
    if body.get("rows") is not None and params:
        _check_row_options(params)


def _check_row_options(params: dict[str, Any]) -> None:
    """`rows` with insert options (mindsdb_sdk's `kb.insert(df, params={...})`): one that would
    change which rows are stored is refused rather than ignored (MindsDB ignores every one of
    them with rows: `kb_skip_existing` then replaced the stored rows), and so is a name no
    insert knows (a typo would be ignored too)."""
    unknown = sorted(set(params) - set(INSERT_OPTIONS))
    if unknown:
        raise InvalidParameter(f"Unknown insert option(s) {unknown} in 'params': use {list(INSERT_OPTIONS)}")
    unapplied = [k for k, neutral in QUERY_ONLY_OPTIONS.items()
                 if params.get(k, neutral) not in (None, neutral)]
    if unapplied:
        raise InvalidParameter(f"not supported by the local engine: {', '.join(unapplied)} with 'rows' (it "
                               "applies to the insert of a 'query' here: INSERT INTO kb SELECT ... USING "
                               f"{unapplied[0]} = ..., or kb.insert(query, params=...))")


def put_knowledge_base(api: ServiceApi, project: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """Alter, insert rows, insert a query's result; answers the knowledge base (get view)
    with `inserted_rows`, the rows stored by both inserts. The fields to alter may come inside
    `params`, as MindsDB's PUT reads them (its knowledge_bases_test.py rotates
    `params.embedding_model.api_key`); the rest of `params` are the query's insert options."""
    body = lifted_params(body, KnowledgeBase.PARAMS_FIELDS)
    check_put(body)
    alter = {k: body[k] for k in ALTER_FIELDS if k in body}
    rows, query = body.get("rows"), body.get("query")
    editing = api if isinstance(api, KnowledgeBaseEditing) else None
    if editing is None and (alter or query is not None):
        raise not_supported("altering a knowledge base or inserting a query's result")
    api.get_knowledge_base(project, name)  # 404 before anything changes
    inserted = 0
    try:
        if alter and editing is not None:
            editing.alter_knowledge_base(project, name, alter)
        if rows is not None:
            inserted += int(api.insert_knowledge_base_rows(project, name, rows)["inserted_rows"])
        if query is not None and editing is not None:
            inserted += editing.insert_query_into_knowledge_base(project, name, query, body.get("params"))
    except SqlError as exc:
        raise InvalidParameter(exc.message) from exc
    return {**api.get_knowledge_base(project, name).to_json(), "inserted_rows": inserted}


ROUTES = [
    Route("/api/projects/{project}/knowledge_bases", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/projects/{project}/knowledge_bases/{name}", endpoint(item), methods=["GET", "PUT", "DELETE"]),
]
