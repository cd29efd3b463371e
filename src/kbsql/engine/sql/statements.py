"""The one table of SQL statements: statement kind -> handler.

A statement's kind is its parser class, the part of it the class does not say (a SHOW's
category, `DESCRIBE KNOWLEDGE_BASE`), and what its own table names (`on`: "kb", "agent",
or "" for a data-source table, several tables or none). The router (`executor.run`)
resolves that table once, then asks `handler_for`; a kind with no entry is refused in one
line (`refusals.fallback`). Every handler takes `(session, statement, ctx, routed)` and
returns the answer, so adding a statement is one handler and one entry below.

Lookup: the entry for the exact `on` first, then the one for "" (a SELECT of a data
source's table and of `information_schema.tables` are the same kind; a DESCRIBE of an
agent is answered like a DESCRIBE of a table, as before this table existed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.drop import DropView
from mindsdb_sql_parser.ast.mindsdb import (
    AlterDatabase,
    AlterKnowledgeBase,
    AlterView,
    CreateJob,
    CreateKnowledgeBase,
    CreateKnowledgeBaseIndex,
    CreateView,
    DropJob,
    DropKnowledgeBase,
    DropKnowledgeBaseIndex,
)
from mindsdb_sql_parser.ast.mindsdb.agents import CreateAgent, DropAgent, UpdateAgent
from mindsdb_sql_parser.ast.mindsdb.create_database import CreateDatabase
from mindsdb_sql_parser.ast.mindsdb.knowledge_base import EvaluateKnowledgeBase

from kbsql.engine.sql.agent import agent_statements
from kbsql.engine.sql.databases import (
    builtin_tables,
    database_ops,
    database_statements,
    describe_objects,
    job_statements,
    view_statements,
)
from kbsql.engine.sql.kb import kb_index, kb_rows, kb_statements
from kbsql.engine.sql.tables.select import select_tables

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed
    from kbsql.interface.results import SqlResult

Handler = Callable[["SqlSession", Any, dict[str, Any], "Routed"], "SqlResult"]
Kind = tuple[type, str, str]
"""(parser class, category: a SHOW's or a DESCRIBE's object type or "", on)."""

INFO_KNOWLEDGE_BASES = "information_schema.knowledge_bases"


def kind(cls: type, category: str = "", on: str = "") -> Kind:
    """A table key: the parser class, a SHOW/DESCRIBE category, what the own table names."""
    return cls, category, on


HANDLERS: dict[Kind, Handler] = {
    # knowledge bases (sql/kb/)
    kind(CreateKnowledgeBase): kb_statements.create,
    kind(DropKnowledgeBase): kb_statements.drop,
    kind(AlterKnowledgeBase): kb_statements.alter,
    kind(EvaluateKnowledgeBase): kb_statements.evaluate,
    kind(CreateKnowledgeBaseIndex): kb_index.create_index,
    kind(DropKnowledgeBaseIndex): kb_index.drop_index,
    kind(ast.Show, "KNOWLEDGE_BASES"): kb_statements.show,
    kind(ast.Describe, "KNOWLEDGE_BASE"): kb_statements.describe,
    kind(ast.Describe, on="kb"): kb_statements.describe,
    kind(ast.Show, "COLUMNS", on="kb"): kb_statements.columns,
    kind(ast.Show, "FIELDS", on="kb"): kb_statements.columns,
    kind(ast.Select, on="kb"): kb_rows.select,
    kind(ast.Select, on=INFO_KNOWLEDGE_BASES): kb_rows.select_info_schema,
    kind(ast.Insert, on="kb"): kb_rows.insert,
    kind(ast.Update, on="kb"): kb_rows.update,
    kind(ast.Delete, on="kb"): kb_rows.delete,
    # agents (sql/agent/)
    kind(CreateAgent): agent_statements.create_agent,
    kind(DropAgent): agent_statements.drop_agent,
    kind(UpdateAgent): agent_statements.update_agent,
    kind(ast.Show, "AGENTS"): agent_statements.show_agents,
    kind(ast.Select, on="agent"): agent_statements.ask,
    # projects and data sources (sql/databases/)
    kind(CreateDatabase): database_statements.create_database,
    kind(AlterDatabase): database_ops.alter_database,
    kind(ast.CreateTable): builtin_tables.create_table,
    kind(ast.DropTables): builtin_tables.drop_table,
    kind(ast.DropDatabase): database_statements.drop_database,
    kind(ast.Use): database_statements.use,
    kind(ast.Show, "DATABASES"): database_statements.show_databases,
    kind(ast.Show, "SCHEMAS"): database_statements.show_databases,
    kind(ast.Show, "TABLES"): database_statements.show_tables,
    kind(ast.Show, "COLUMNS"): database_statements.show_columns,
    kind(ast.Show, "VARIABLES"): database_statements.show_variables,
    kind(ast.Show, "SESSION_VARIABLES"): database_statements.show_variables,
    kind(ast.Show, "GLOBAL_VARIABLES"): database_statements.show_variables,
    kind(ast.Show, "FIELDS"): database_statements.show_columns,
    kind(ast.Describe): database_statements.describe,
    kind(ast.Describe, "OBJECT"): describe_objects.describe,
    kind(ast.Show, "PROJECTS"): describe_objects.show_projects,
    kind(ast.Insert): builtin_tables.insert_or_refuse,  # files.x appends; others refused
    kind(ast.Update): builtin_tables.change_or_refuse,  # data sources and files.x; others refused
    kind(ast.Delete): builtin_tables.change_or_refuse,
    kind(CreateView): view_statements.create_view,
    kind(AlterView): view_statements.alter_view,
    kind(DropView): view_statements.drop_view,
    kind(ast.Show, "VIEWS"): view_statements.show_views,
    # jobs (sql/databases/job_statements.py; run by engine/jobs/)
    kind(CreateJob): job_statements.create_job,
    kind(DropJob): job_statements.drop_job,
    kind(ast.Show, "JOBS"): job_statements.show_jobs,
    # SELECT over tables (sql/tables/)
    kind(ast.Select): select_tables,
    kind(ast.Union): select_tables,
    kind(ast.Intersect): select_tables,
    kind(ast.Except): select_tables,
}


def category_of(statement: ast.ASTNode) -> str:
    """A SHOW's category (`SHOW KNOWLEDGE BASES` -> KNOWLEDGE_BASES), DESCRIBE KNOWLEDGE_BASE's
    object type; OBJECT for a DESCRIBE of another type (DESCRIBE VIEW v: describe_objects.py)
    but TABLE (DESCRIBE TABLE t lists t's columns, as DESCRIBE t); "" for every other statement."""
    if isinstance(statement, ast.Show):
        return str(statement.category or "").upper().replace(" ", "_")
    if isinstance(statement, ast.Describe):
        kind = str(getattr(statement, "type", None) or "").upper().replace(" ", "_")
        kind = "KNOWLEDGE_BASE" if kind == "KNOWLEDGE_BASES" else kind
        return kind if kind in ("KNOWLEDGE_BASE", "") else "" if kind == "TABLE" else "OBJECT"
    return ""


def on_of(routed: Routed) -> str:
    """What the statement's own table names, as the table keys it."""
    target = routed.target
    if target is None:
        return ""
    if target.kind == "info":
        return INFO_KNOWLEDGE_BASES if kb_rows.is_info_schema_kbs(routed.table) else ""
    return target.kind


def handler_for(statement: ast.ASTNode, routed: Routed) -> Handler | None:
    """The handler of this statement's kind (see the module docstring), or None."""
    category, on = category_of(statement), on_of(routed)
    for cls in type(statement).__mro__:
        handler = HANDLERS.get((cls, category, on)) or HANDLERS.get((cls, category, ""))
        if handler is not None:
            return handler
    return None
