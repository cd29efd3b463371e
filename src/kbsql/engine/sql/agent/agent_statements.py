"""Agents in SQL: CREATE AGENT ... USING ..., DROP AGENT, SHOW AGENTS.

`CREATE AGENT a USING model = {...}, data = {...}, prompt_template = '...'` becomes the same
body as `POST /api/projects/{p}/agents`, so both doors validate alike. The reference also
accepts a flat form, `model = 'gpt-4o', provider = 'openai', api_key = '...'`, folded here
into the model descriptor. Asking an agent (`SELECT answer FROM a WHERE question = ...`) is
a table read, see `kb_tables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb.agents import CreateAgent, DropAgent, UpdateAgent

from kbsql.engine.sql.agent import agent_select
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.databases import info_schema
from kbsql.engine.sql.databases.database_statements import filtered
from kbsql.engine.sql.session import missing_ok
from kbsql.engine.sql.tables.names import Routed, table_parts
from kbsql.interface.errors import NotFound, SqlError
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

MODEL_KEYS = ("provider", "api_key", "base_url", "model_name", "api_base")
RUN_PARAMS = ("timeout", "mode")  # stored as the agent's params


def _target(identifier: ast.Identifier, ctx: dict[str, Any]) -> tuple[str, str]:
    parts = table_parts(identifier)
    if len(parts) > 2:
        raise SqlError(f"An agent name is <project>.<agent> at most, got {'.'.join(parts)}")
    return (parts[0], parts[1]) if len(parts) == 2 else (ctx["db"], parts[0])


def create_agent(session: SqlSession, statement: CreateAgent, ctx: dict[str, Any],
                 routed: Routed) -> SqlResult:
    project, name = _target(statement.name, ctx)
    params = dict(statement.params or {})
    model: Any = statement.model
    if isinstance(model, str):  # flat form: model = 'name', provider = '...', api_key = '...'
        model = {"model_name": model}
        model.update({k: params.pop(k) for k in MODEL_KEYS if k in params and k != "model_name"})
    run_params = {k: params.pop(k) for k in list(params) if str(k).lower() in RUN_PARAMS}
    body: dict[str, Any] = {"name": name, **params}
    if run_params:  # `timeout = 10, mode = 'text'`: the agent's params (agent_syntax.mdx)
        body["params"] = {str(k).lower(): v for k, v in run_params.items()}
    if model is not None:
        body["model"] = model
    if statement.if_not_exists:
        try:
            session.catalog.agent(project, name)
            return OkResult(None, context=ctx)
        except NotFound:
            pass
    session.agents.create_agent(project, body)
    return OkResult(None, context=ctx)


def drop_agent(session: SqlSession, statement: DropAgent, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    project, name = _target(statement.name, ctx)
    with missing_ok(statement.if_exists):
        session.agents.delete_agent(project, name)
    return OkResult(None, context=ctx)


def show_agents(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """Agents of the current project (or `SHOW AGENTS FROM p`)."""
    source = statement.from_table or statement.in_table
    project = table_parts(source)[0] if source is not None else ctx["db"]
    session.catalog.project(project)  # a clear "project not found"
    import pyarrow.compute as pc

    table = info_schema.agents(session)
    mask = pc.equal(pc.utf8_lower(table.column("PROJECT")), project.lower())
    return filtered(session, table.filter(mask), statement, ctx)


ALTERABLE = ("model", "data", "prompt_template", "timeout", "mode")


def update_agent(session: SqlSession, statement: UpdateAgent, ctx: dict[str, Any],
                 routed: Routed) -> SqlResult:
    """`ALTER AGENT a USING model = {...}, data = {...}, prompt_template = '...'`
    (agent_syntax.mdx): a partial update, through the same validation as the REST route."""
    project, name = _target(statement.name, ctx)
    params = {str(k).lower(): v for k, v in (statement.params or {}).items()}
    model: Any = params.pop("model", None)
    if isinstance(model, str):  # flat form, as in CREATE AGENT
        model = {"model_name": model}
        model.update({k: params.pop(k) for k in MODEL_KEYS if k in params and k != "model_name"})
    unknown = set(params) - set(ALTERABLE)
    if unknown:
        raise SqlError(f"ALTER AGENT can change {list(ALTERABLE)}, not {sorted(unknown)}")
    body: dict[str, Any] = {k: params[k] for k in ("data", "prompt_template") if k in params}
    if any(k in params for k in RUN_PARAMS):
        body["params"] = {k: params[k] for k in RUN_PARAMS if k in params}
    if model is not None:
        body["model"] = model
    session.agents.update_agent(project, name, body)
    return OkResult(None, context=ctx)


def ask(session: SqlSession, statement: ast.Select, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """`SELECT ... FROM agent WHERE question = '...' [USING ...]` when the agent is the only
    table (in a join, `kb_tables` asks it); `routed.target` is the agent as the router
    resolved it (`names.target_of`)."""
    target = routed.target
    assert target is not None and target.kind == "agent"  # the router sends only an agent here
    if statement.group_by or statement.order_by or statement.having or statement.distinct:
        raise agent_select.unsupported("GROUP BY / ORDER BY / DISTINCT on an agent's answer")
    names, rows = agent_select.ask(session.agents, target.database, target.name, statement)
    return ArrowTableResult.from_rows(names, rows, ctx)  # Arrow like every other SELECT
