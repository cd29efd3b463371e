"""`information_schema` tables, built from the catalog on each query (they are small).

`databases` is how the reference's Python SDK lists projects and data sources:
`SELECT NAME FROM information_schema.databases WHERE TYPE = 'project'`. Connection
parameters are shown with secrets masked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import expressions as exp

from kbsql.engine.datasources.frame_store import FRAMES_SOURCE
from kbsql.engine.datasources.upload_store import UPLOADS_SOURCE
from kbsql.engine.models import llm_log as llm_log_columns
from kbsql.engine.sql import query_log
from kbsql.engine.sql.databases import job_tables, mysql_schema
from kbsql.engine.sql.refusals import unsupported_table
from kbsql.engine.sql.tables.names import INFORMATION_SCHEMA, LOG_DATABASE, LOG_TABLES, not_found
from kbsql.engine.view_store import views
from kbsql.engine.views import knowledge_base_json
from kbsql.interface.secrets import mask_secrets

if TYPE_CHECKING:
    from kbsql.engine.catalog import KbRecord
    from kbsql.engine.sql.query_log import QueryRecord
    from kbsql.engine.sql.session import SqlSession

TABLES = ("databases", "tables", "knowledge_bases", "agents", "queries", "jobs", "views",
          *mysql_schema.COLUMNS)
"""kbsql's and MindsDB's own tables, then MySQL's (mysql_schema.py), as MindsDB lists them."""
LLM_LOG_COLUMNS = llm_log_columns.COLUMNS
QUERY_COLUMNS = query_log.COLUMNS
INFO_COLUMNS = ["NAME", "PROJECT", "EMBEDDING_MODEL", "RERANKING_MODEL", "STORAGE", "METADATA_COLUMNS",
                "CONTENT_COLUMNS", "ID_COLUMN", "PARAMS", "INSERT_STARTED_AT", "INSERT_FINISHED_AT",
                "PROCESSED_ROWS", "ERROR", "QUERY_ID"]


def databases(session: SqlSession) -> pa.Table:
    catalog = session.catalog
    rows: list[tuple[str, str, Any, Any]] = [(INFORMATION_SCHEMA, "system", None, None),
                                             (LOG_DATABASE, "system", None, None)]  # MindsDB's: llm_log
    rows += [(p.name, "project", None, None) for p in catalog.projects()]
    rows.append((UPLOADS_SOURCE, "data", "files", "{}"))
    rows.append((FRAMES_SOURCE, "data", "dataframe", "{}"))
    rows += [(d.name, "data", d.engine, json.dumps(mask_secrets(d.parameters)))
             for d in catalog.datasources()]
    names = ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]
    return pa.table({n: pa.array([r[i] for r in rows], pa.string()) for i, n in enumerate(names)})


def tables(session: SqlSession) -> pa.Table:
    """Tables of every database, in MySQL's columns (mysql_schema.TABLE_COLUMNS). A data
    source that cannot be listed is skipped."""
    catalog = session.catalog
    rows: list[tuple[str, str, str]] = [(INFORMATION_SCHEMA, t.upper(), "SYSTEM VIEW") for t in TABLES]
    rows += [(LOG_DATABASE, t, "SYSTEM VIEW") for t in LOG_TABLES]
    rows += [(kb.project_name, kb.name, "KNOWLEDGE BASE") for kb in catalog.knowledge_bases()]
    for project in catalog.projects():
        rows += [(project.name, a.name, "AGENT") for a in catalog.agents(project.name)]
    rows += [(v.project_name, v.name, "VIEW") for v in views(catalog)]
    for name in [UPLOADS_SOURCE, FRAMES_SOURCE] + [d.name for d in catalog.datasources()]:
        try:
            source = session.duck.source(name)
            with session.duck.cursor() as con:
                listed = source.tables(con) if source is not None else []
        except Exception:  # an unreachable server must not hide the other tables
            continue
        rows += [(name, t, "BASE TABLE") for t in listed]
    return mysql_schema.arrow(mysql_schema.TABLE_COLUMNS, [mysql_schema.table_row(*r) for r in rows])


def views_table(session: SqlSession, project: str | None) -> pa.Table:
    """The views of `project` (None: every project's) in MindsDB's columns NAME, PROJECT,
    QUERY: its information_schema.VIEWS (ViewsTable), which SHOW VIEWS and DESCRIBE VIEW
    read too; MySQL's VIEWS columns answered no row for the views there are."""
    found = views(session.catalog, project)
    columns = {"NAME": [v.name for v in found], "PROJECT": [v.project_name for v in found],
               "QUERY": [v.query for v in found]}
    return pa.table({k: pa.array(v, pa.string()) for k, v in columns.items()})


def agents(session: SqlSession) -> pa.Table:
    catalog = session.catalog
    records = [a for p in catalog.projects() for a in catalog.agents(p.name)]
    return pa.table({
        "NAME": pa.array([a.name for a in records], pa.string()),
        "PROJECT": pa.array([a.project_name for a in records], pa.string()),
        "MODEL": pa.array([json.dumps(mask_secrets(a.model)) for a in records], pa.string()),
        "DATA": pa.array([json.dumps(a.data) for a in records], pa.string()),
        "PROMPT_TEMPLATE": pa.array([a.prompt_template for a in records], pa.string()),
        "PARAMS": pa.array([json.dumps(_agent_params(a)) for a in records], pa.string()),
    })


def _agent_params(record: Any) -> dict[str, Any]:
    """MindsDB's PARAMS: what the agent was given besides its model (timeout, mode, and its
    prompt_template and data when set), as its executor test test_agent_with_default_llm_params
    reads prompt_template there; DATA and PROMPT_TEMPLATE have their own columns here too."""
    data = record.data or {}
    return {**({"prompt_template": record.prompt_template} if record.prompt_template else {}),
            **({"data": data} if any(data.values()) else {}), **(record.params or {})}


def knowledge_bases(session: SqlSession, ctx: dict[str, Any]) -> Any:
    """The same rows as SHOW KNOWLEDGE_BASES (built by the knowledge-base statements), for
    joins and subqueries over `information_schema.knowledge_bases`."""
    return knowledge_bases_table(session, session.catalog.knowledge_bases())


def frame(session: SqlSession, name: str, ctx: dict[str, Any], node: exp.Table,
          describe: mysql_schema.Describe) -> Any:
    """One information_schema table; `node`, the table in the statement, scopes COLUMNS to
    the tables its conditions name; `describe` reads their columns (select.describe_sql)."""
    if name in mysql_schema.COLUMNS:
        if name == "schemata":
            return mysql_schema.schemata(databases(session))
        if name == "columns":
            return mysql_schema.columns(session, tables(session), node, ctx, describe)
        return mysql_schema.constant(name)
    if name == "databases":
        return databases(session)
    if name == "tables":
        return tables(session)
    if name == "agents":
        return agents(session)
    if name == "knowledge_bases":
        return knowledge_bases(session, ctx)
    if name == "jobs":
        return job_tables.jobs(session, None)
    if name == "views":
        return views_table(session, None)
    if name == "queries":  # insert_data.mdx: the INSERTs into knowledge bases
        rows = session.queries.rows()
        return pa.table({c: pa.array([r[i] for r in rows], pa.int64() if c in ("ID", "PROCESSED_ROWS")
                                     else pa.string()) for i, c in enumerate(QUERY_COLUMNS)})
    raise unsupported_table(INFORMATION_SCHEMA, name) or \
        not_found(name, INFORMATION_SCHEMA, f" (known: {', '.join(TABLES)})")


def llm_log(session: SqlSession) -> pa.Table:
    """`log.llm_log` in MindsDB's columns: this engine's newest model calls (models/llm_log.py)."""
    rows = session.kbs.service.models.context.llm_log.rows()
    types = {"START_TIME": pa.timestamp("us"), "END_TIME": pa.timestamp("us"), "SUCCESS": pa.bool_(),
             "PROMPT_TOKENS": pa.int64(), "COMPLETION_TOKENS": pa.int64(), "TOTAL_TOKENS": pa.int64()}
    return pa.table({c: pa.array([r[i] for r in rows], types.get(c, pa.string()))
                     for i, c in enumerate(LLM_LOG_COLUMNS)})


def _info_row(record: KbRecord, last: QueryRecord | None) -> list[Any]:
    view = knowledge_base_json(record, "get")
    spec = record.spec

    def text(value: Any) -> str | None:
        return None if value is None else json.dumps(value)

    query_id = spec.get("query_id")
    insert = [None, None, None, None, None if query_id is None else int(query_id)] if last is None else \
        [last.started_at, last.finished_at, last.processed_rows, last.error, last.id]
    return [record.name, record.project_name, text(view["embedding_model"]), text(view["reranking_model"]),
            f"{spec.get('vector_database')}.{spec.get('vector_database_table')}",
            text(spec.get("metadata_columns")), text(spec.get("content_columns")), spec.get("id_column"),
            text(view["params"]), *insert]


INFO_INTEGERS = ("PROCESSED_ROWS", "QUERY_ID")


def knowledge_bases_table(session: SqlSession, records: list[KbRecord]) -> pa.Table:
    """SHOW KNOWLEDGE_BASES / DESCRIBE rows; INSERT_STARTED_AT ... QUERY_ID describe each
    knowledge base's last `INSERT ... SELECT` (information_schema.queries), as MindsDB's.
    Typed per column, not from the values: a DataFrame's all-NULL column went to a MySQL client
    as the NULL type (SHOW) or INT (information_schema), the same column as text once set."""
    latest = session.queries.latest_by_kb() if records else {}
    rows = [_info_row(r, latest.get(r.id)) for r in records]
    return pa.table({c: pa.array([r[i] for r in rows], pa.int64() if c in INFO_INTEGERS else pa.string())
                     for i, c in enumerate(INFO_COLUMNS)})
