"""`PUT /api/projects/{project}/knowledge_bases/{kb}` as the reference documents it
(docs/rest/knowledge_bases/insert.mdx and alter.mdx): one body may alter the knowledge base
(`embedding_model` api_key rotation, `reranking_model`, columns, `id_column`,
`preprocessing`), insert `rows`, and insert the result of a `query` (mindsdb_sdk's
`kb.insert(query)` sends that), in this order. Each part runs as the SQL statement it stands
for, so REST and SQL cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb import AlterKnowledgeBase

from kbsql.engine.sql.parse.parsing import parse
from kbsql.interface.api import ServiceApi
from kbsql.interface.errors import BadRequest, InvalidParameter, MissingParameter, SqlError
from kbsql.interface.results import OkResult, SqlResult

RunStatement = Callable[[ast.ASTNode, dict[str, Any]], SqlResult]

ALTER_FIELDS = ("embedding_model", "reranking_model", "content_columns", "metadata_columns", "id_column",
                "preprocessing")
HOSTED_ONLY = ("files", "urls", "limit", "crawl_depth", "filters")


def put_knowledge_base(api: ServiceApi, run: RunStatement, project: str, name: str,
                       body: dict[str, Any]) -> dict[str, Any]:
    """`api` answers the REST views and inserts rows; `run` routes a parsed statement (the
    SQL executor's router), so each part runs as the statement it stands for."""
    unknown = set(body) - {"rows", "query", "params", *ALTER_FIELDS, *HOSTED_ONLY}
    if unknown:
        raise InvalidParameter(f"Unknown field(s) {sorted(unknown)} in 'knowledge_base': use rows, query, "
                               f"params or {', '.join(ALTER_FIELDS)}")
    hosted = [k for k in HOSTED_ONLY if body.get(k) not in (None, [], {})]
    if hosted:
        raise BadRequest(f"not supported by the local engine: inserting {', '.join(hosted)} (the "
                         "reference crawls and parses them; insert their text as rows)",
                         title="Not supported")
    alter = {k: body[k] for k in ALTER_FIELDS if k in body}
    rows, query = body.get("rows"), body.get("query")
    if not alter and rows is None and query is None:
        raise MissingParameter("The 'knowledge_base' object must have 'rows', 'query' or a field to alter "
                               f"({', '.join(ALTER_FIELDS)})")
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise InvalidParameter("'query' must be a SELECT statement")
    params = body.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidParameter("'params' must be an object of insert options")
    api.get_knowledge_base(project, name)  # 404 before anything changes
    target = ast.Identifier(parts=[project, name])
    ctx = {"db": project}
    inserted = 0
    try:
        if alter:
            run(AlterKnowledgeBase(name=target, params=dict(alter)), ctx)
        if rows is not None:
            inserted += int(api.insert_knowledge_base_rows(project, name, rows)["inserted_rows"])
        if query is not None:
            select = parse(query)  # bounded: a long text is refused, not parsed for minutes
            if not isinstance(select, ast.Select | ast.Union):
                raise InvalidParameter("'query' must be a SELECT statement")
            if params:
                select.using = {**(getattr(select, "using", None) or {}), **params}
            result = run(ast.Insert(table=target, from_select=select), ctx)
            if isinstance(result, OkResult):
                inserted += int(result.affected_rows or 0)
    except SqlError as exc:
        raise InvalidParameter(exc.message) from exc
    except BadRequest:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("mindsdb_sql_parser"):
            raise InvalidParameter(f"'query' cannot be parsed: {exc}") from exc
        raise
    return {**api.get_knowledge_base(project, name).to_json(), "inserted_rows": inserted}
