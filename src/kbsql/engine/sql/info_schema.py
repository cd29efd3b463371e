"""`information_schema` tables, built from the catalog on each query (they are small).

`databases` is how the reference's Python SDK lists projects and data sources:
`SELECT NAME FROM information_schema.databases WHERE TYPE = 'project'`. Connection
parameters are shown with secrets masked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kbsql.engine.datasources.base import mask_secrets
from kbsql.engine.datasources.frames import FRAMES_SOURCE
from kbsql.engine.sql.kb_statements import knowledge_bases_frame
from kbsql.engine.sql.names import INFORMATION_SCHEMA, not_found

if TYPE_CHECKING:
    from kbsql.engine.sql.executor import SqlExecutor

TABLES = ("databases", "tables", "knowledge_bases", "agents")


def databases(executor: SqlExecutor) -> pa.Table:
    catalog = executor.engine.catalog
    rows: list[tuple[str, str, Any, Any]] = [(INFORMATION_SCHEMA, "system", None, None)]
    rows += [(p.name, "project", None, None) for p in catalog.projects()]
    rows.append((FRAMES_SOURCE, "data", "dataframe", "{}"))
    rows += [(d.name, "data", d.engine, json.dumps(mask_secrets(d.parameters)))
             for d in catalog.datasources()]
    names = ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]
    return pa.table({n: pa.array([r[i] for r in rows], pa.string()) for i, n in enumerate(names)})


def tables(executor: SqlExecutor) -> pa.Table:
    """Tables of every database. A data source that cannot be listed is skipped."""
    catalog = executor.engine.catalog
    rows: list[tuple[str, str, str]] = [(INFORMATION_SCHEMA, t.upper(), "SYSTEM VIEW") for t in TABLES]
    rows += [(kb.project_name, kb.name, "KNOWLEDGE BASE") for kb in catalog.knowledge_bases()]
    for project in catalog.projects():
        rows += [(project.name, a.name, "AGENT") for a in catalog.agents(project.name)]
    for name in [FRAMES_SOURCE] + [d.name for d in catalog.datasources()]:
        try:
            source = executor.duck.source(name)
            listed = source.tables(executor.duck.con) if source is not None else []
        except Exception:  # an unreachable server must not hide the other tables
            continue
        rows += [(name, t, "BASE TABLE") for t in listed]
    return pa.table({"TABLE_SCHEMA": [r[0] for r in rows], "TABLE_NAME": [r[1] for r in rows],
                     "TABLE_TYPE": [r[2] for r in rows]})


def agents(executor: SqlExecutor) -> pa.Table:
    catalog = executor.engine.catalog
    records = [a for p in catalog.projects() for a in catalog.agents(p.name)]
    return pa.table({
        "NAME": pa.array([a.name for a in records], pa.string()),
        "PROJECT": pa.array([a.project_name for a in records], pa.string()),
        "MODEL": pa.array([json.dumps(mask_secrets(a.model)) for a in records], pa.string()),
        "DATA": pa.array([json.dumps(a.data) for a in records], pa.string()),
        "PROMPT_TEMPLATE": pa.array([a.prompt_template for a in records], pa.string()),
    })


def knowledge_bases(executor: SqlExecutor, ctx: dict[str, Any]) -> Any:
    """The same rows as SHOW KNOWLEDGE_BASES (built by the knowledge-base statements), for
    joins and subqueries over `information_schema.knowledge_bases`."""
    return knowledge_bases_frame(executor.engine.catalog.knowledge_bases())


def frame(executor: SqlExecutor, name: str, ctx: dict[str, Any]) -> Any:
    if name == "databases":
        return databases(executor)
    if name == "tables":
        return tables(executor)
    if name == "agents":
        return agents(executor)
    if name == "knowledge_bases":
        return knowledge_bases(executor, ctx)
    raise not_found(name, INFORMATION_SCHEMA, f" (known: {', '.join(TABLES)})")
