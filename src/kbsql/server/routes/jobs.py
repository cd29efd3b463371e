"""`/api/projects/{project}/jobs[/{name}[/history]]`, as MindsDB's `namespaces/jobs.py`
answers them (its tests/unit/api/http/jobs_test.py). Each is the SQL statement of the same
job (`CREATE JOB`, `DROP JOB`, `information_schema.jobs`, `log.jobs_history`) run through
`ServiceApi.query` on the SQL lane with the caller's share, so SQL and REST see the same jobs
and a job made here runs as its creator's, as one made in SQL.

Codes, MindsDB's: POST `{"job": {name, query, if_query, start_at, end_at, schedule_str}}`
answers 200 and the job; GET a list or one (`{name, project, start_at, end_at, next_run_at,
schedule_str, query, if_query, variables}`); DELETE 204; history the job's runs; no `job`
400 "Missing parameter"; a missing job 404 "Job not found"; a missing project 404. Where
kbsql differs: no `id` (jobs are named), and a `query` or `if_query` that would not stay
the job's own statements inside CREATE JOB's parentheses is a 400, nothing stored.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import ServiceApi
from kbsql.interface.control import Control
from kbsql.interface.errors import BadRequest, Conflict, MissingParameter, NotFound, ServiceError
from kbsql.interface.literals import quote_identifier, quote_literal
from kbsql.interface.results import ErrorResult, TableResult
from kbsql.interface.secrets import mask_sql_text
from kbsql.server.lanes import controlled, owner_key
from kbsql.server.limits import Limits, check_sql_size
from kbsql.server.routes.common import (
    api_of,
    disconnected,
    endpoint,
    json_response,
    lanes_of,
    path,
    read_body,
)

FIELDS = ("name", "project", "start_at", "end_at", "next_run_at", "schedule_str", "query", "if_query",
          "variables")
EVERY = re.compile(r"^\s*(?:every\s+)?(\d+\s+)?([a-z]+)\s*$", re.IGNORECASE)
"""MindsDB's schedule_str, 'every <number> <period>' or 'every <period>' (its CREATE JOB
prepends 'every ' to EVERY's text)."""


def _answer(api: ServiceApi, sql: str, project: str) -> list[dict[str, Any]]:
    """The statement's rows as dicts (lower-case keys); an SQL error as the route's error."""
    result = api.query(sql, {"db": project})
    if isinstance(result, ErrorResult):
        kind = result.kind.rsplit(":", 1)[-1]
        error = {"unknown-database": NotFound, "unknown-table": NotFound, "conflict": Conflict}.get(
            kind, BadRequest)
        raise error(result.error_message, title="Error")
    if not isinstance(result, TableResult):
        return []
    names = [n.lower() for n in result.column_names]
    return [dict(zip(names, row, strict=True)) for row in result.data]


def _project(api: ServiceApi, project: str) -> None:
    """A missing project: the engine's 404 "Project not found" (SHOW JOBS checks it). A name
    with a backtick is none (the parser reads no doubled backtick: it answered a syntax
    error quoting this route's own statement)."""
    if "`" in project:
        raise NotFound(f"Project not found: {project} (SHOW DATABASES lists them)", title="Error")
    _answer(api, f"SHOW JOBS FROM {quote_identifier(project)} LIKE ''", project)


def _jobs(api: ServiceApi, project: str, name: str | None = None) -> list[dict[str, Any]]:
    """The project's jobs (or the one named), names matched in any case, as SQL matches them
    (DROP JOB MINDSDB.myjob drops mindsdb.MyJob): matched exactly, a POST to
    /api/projects/MindsDB/jobs made the job, then answered 404 'Job not found'."""
    _project(api, project)
    if name is not None and "\x00" in name:  # no job is named so (stored_names), and the literal
        return []                             # would end at the NUL: "unterminated quoted string"
    where = f"lower(PROJECT) = {quote_literal(project.lower())}"
    if name is not None:
        where += f" AND lower(NAME) = {quote_literal(name.lower())}"
    rows = _answer(api, f"SELECT * FROM information_schema.jobs WHERE {where} ORDER BY NAME", project)
    return [{k: row.get(k) for k in FIELDS} for row in rows]


def _job(api: ServiceApi, project: str, name: str) -> dict[str, Any]:
    found = _jobs(api, project, name)
    if not found:
        raise NotFound(f"Job with name {name} does not exist", title="Job not found")
    return found[0]


def _text(job: dict[str, Any], key: str, limits: Limits) -> str | None:
    value = job.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"'{key}' must be SQL text", title="Wrong argument")
    too_big = check_sql_size(value, limits)
    if too_big is not None:
        raise BadRequest(too_big, title="Wrong argument")
    return value


def create_statement(project: str, job: dict[str, Any], limits: Limits) -> tuple[str, str, str | None]:
    """CREATE JOB for MindsDB's body; (the statement, its query, its if_query)."""
    name, query = job.get("name"), _text(job, "query", limits)
    if not isinstance(name, str) or not name or query is None:
        raise MissingParameter('The job needs "name" and "query"')
    if "`" in name:  # CREATE JOB names it between backticks; as in SQL, no name holds one
        raise BadRequest("A job's name cannot hold a backtick (`)", title="Wrong argument")
    if_query = _text(job, "if_query", limits)
    sql = f"CREATE JOB {quote_identifier(project)}.{quote_identifier(name)} ({query})"
    for key, word in (("start_at", "START"), ("end_at", "END")):
        if job.get(key) is not None:
            sql += f" {word} {quote_literal(str(job[key]))}"
    schedule = job.get("schedule_str")
    if schedule is not None:
        every = EVERY.match(str(schedule))
        if every is None:
            raise BadRequest(f"Wrong schedule_str: {schedule!r} (every [<number>] <period>)",
                             title="Wrong argument")
        sql += f" EVERY {(every.group(1) or '').strip()} {every.group(2)}".replace("  ", " ")
    if if_query is not None:
        sql += f" IF ({if_query})"
    too_big = check_sql_size(sql, limits)  # the statement, as /api/sql/query's: a name or a date is
    if too_big is not None:  # no way around --max-sql-kb (a 16 MB name took 10 s to parse and stayed)
        raise BadRequest(too_big, title="Wrong argument")
    return sql, query, if_query


def _same(stored: Any, sent: str | None) -> bool:
    def bare(text: Any) -> str:
        return "" if text is None else str(text).strip().rstrip(";").strip()
    return bare(stored) == bare(sent)


UNBALANCED = ("The job's query and if_query must each be whole statements (their parentheses "
              "balanced); nothing was stored")


def _whole(sql: str, query: str, if_query: str | None) -> None:
    """A `query` closing CREATE JOB's parentheses early (`select 1) EVERY minute IF (...`)
    would store, and run, another job than the one sent: the statement is parsed first and
    must hold both texts as sent. One that does not parse is left to the engine's words."""
    from mindsdb_sql_parser import parse_sql  # the SQL lane's work: an idle server loads no parser

    try:
        parsed = parse_sql(sql)
    except Exception:
        return
    if not (_same(getattr(parsed, "query_str", None), query)
            and _same(getattr(parsed, "if_query_str", None), if_query)):
        raise BadRequest(UNBALANCED, title="Wrong argument")


def create(api: ServiceApi, project: str, job: dict[str, Any], limits: Limits) -> dict[str, Any]:
    _project(api, project)
    sql, query, if_query = create_statement(project, job, limits)
    _whole(sql, query, if_query)
    _answer(api, sql, project)
    made = _job(api, project, str(job["name"]))
    shown = (mask_sql_text(query), None if if_query is None else mask_sql_text(if_query))
    if not (_same(made["query"], shown[0]) and _same(made["if_query"], shown[1])):  # the engine's reading
        _answer(api, f"DROP JOB {quote_identifier(project)}.{quote_identifier(str(job['name']))}", project)
        raise BadRequest(UNBALANCED, title="Wrong argument")
    return made


def delete(api: ServiceApi, project: str, name: str) -> None:
    _job(api, project, name)
    _answer(api, f"DROP JOB {quote_identifier(project)}.{quote_identifier(name)}", project)


def history(api: ServiceApi, project: str, name: str) -> list[dict[str, Any]]:
    job = _job(api, project, name)  # the names as stored
    return _answer(api, f"SELECT * FROM log.jobs_history WHERE project = {quote_literal(job['project'])} "
                        f"AND name = {quote_literal(job['name'])} ORDER BY run_start", project)


async def _run(request: Request, fn: Any, *args: Any) -> Any:
    """`fn(api, *args)` on the SQL lane with the caller's share, stopped if the client leaves."""
    return await controlled(lambda: disconnected(request), Control.after(None), fn, api_of(request), *args,
                            lane=lanes_of(request).sql, owner=owner_key(request.scope))


async def collection(request: Request) -> Response:
    project = path(request, "project")
    if request.method == "GET":
        return json_response(await _run(request, _jobs, project))
    body = await read_body(request)
    job = body.get("job")
    if not isinstance(job, dict):
        raise ServiceError('Must provide "job" parameter in POST body', title="Missing parameter", status=400)
    return json_response(await _run(request, create, project, job, request.app.state.limits))


async def item(request: Request) -> Response:
    project, name = path(request, "project"), path(request, "name")
    if request.method == "DELETE":
        await _run(request, delete, project, name)
        return Response(status_code=204)
    return json_response(await _run(request, _job, project, name))


async def runs(request: Request) -> Response:
    return json_response(await _run(request, history, path(request, "project"), path(request, "name")))


ROUTES = [
    Route("/api/projects/{project}/jobs", endpoint(collection), methods=["GET", "POST"]),
    Route("/api/projects/{project}/jobs/{name}", endpoint(item), methods=["GET", "DELETE"]),
    Route("/api/projects/{project}/jobs/{name}/history", endpoint(runs), methods=["GET"]),
]
