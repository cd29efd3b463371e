"""Knowledge-base statements in SQL that name no rows: CREATE / DROP / ALTER / EVALUATE
KNOWLEDGE_BASE, SHOW KNOWLEDGE_BASES, DESCRIBE [KNOWLEDGE_BASE] kb and SHOW COLUMNS FROM kb.

Each handler takes the router's `(session, statement, ctx, routed)` and is listed in the one
statement table (`sql/statements.py`); the rows of a knowledge base (SELECT / INSERT /
DELETE) are in `kb_rows`. Names resolve in the current project (`ctx["db"]`) or as
`project.kb`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb import AlterKnowledgeBase, CreateKnowledgeBase, DropKnowledgeBase
from mindsdb_sql_parser.ast.mindsdb.knowledge_base import EvaluateKnowledgeBase

from kbsql.engine import validate
from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.search import SearchRequest
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.databases import mysql_schema
from kbsql.engine.sql.databases.database_statements import show_columns_answer
from kbsql.engine.sql.databases.info_schema import knowledge_bases_table
from kbsql.engine.sql.kb import kb_evaluate
from kbsql.engine.sql.kb.kb_rows import run_over
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.session import missing_ok
from kbsql.engine.sql.tables.select import run_select, select_frame
from kbsql.interface.errors import SqlError
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed

_ALTERABLE = {"reranking_model", "metadata_columns", "content_columns", "id_column", "preprocessing",
              "embedding_model"}


# names -----------------------------------------------------------------------------------
def kb_name(identifier: ast.Identifier, ctx: dict[str, Any]) -> tuple[str, str]:
    """(project, knowledge base) of a name written `kb` or `project.kb`."""
    parts = [str(p) for p in identifier.parts]
    if len(parts) == 1:
        return ctx["db"], parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise SqlError(f"Invalid knowledge base name {identifier.to_string()}")


def record_of(session: SqlSession, identifier: ast.Identifier, ctx: dict[str, Any]) -> KbRecord:
    """The knowledge base a statement names (`kb` in the current project, or `project.kb`)."""
    project, name = kb_name(identifier, ctx)
    return session.catalog.knowledge_base(project, name)


# DDL -------------------------------------------------------------------------------------
def create(session: SqlSession, statement: CreateKnowledgeBase, ctx: dict[str, Any],
           routed: Routed) -> SqlResult:
    project, name = kb_name(statement.name, ctx)
    if statement.from_query is not None:
        raise SqlError("CREATE KNOWLEDGE_BASE ... FROM (query) is not supported: create it, then "
                       "INSERT INTO kb SELECT ...")
    # USING is MindsDB's params: the fields are read from it (lifted_params), any other key
    # is checked as the REST body's `params` are (validate.kb_create_params)
    using = {k.lower(): v for k, v in (statement.params or {}).items()}
    body: dict[str, Any] = {"name": name, "params": using}
    if statement.storage is not None:
        parts = [str(p) for p in statement.storage.parts]
        if len(parts) != 2:
            raise SqlError("storage must be written database.table")
        body["storage"] = {"database": parts[0], "table": parts[1]}
    session.kbs.create(project, body, bool(statement.if_not_exists))
    return OkResult(None, context=ctx)


def drop(session: SqlSession, statement: DropKnowledgeBase, ctx: dict[str, Any],
         routed: Routed) -> SqlResult:
    project, name = kb_name(statement.name, ctx)
    with missing_ok(statement.if_exists):
        session.kbs.delete(project, name)
    return OkResult(None, context=ctx)


def _embedding_update(current: dict[str, Any] | None, value: Any) -> dict[str, Any] | None:
    """alter.mdx: only the API key of the embedding model may change (`embedding_model =
    {'api_key': '...'}`); the provider and model stay, the stored vectors depend on them."""
    if not isinstance(value, dict):
        raise SqlError("embedding_model can only be altered as {'api_key': '...'}")
    changed = {k for k, v in value.items() if k != "api_key" and (current or {}).get(k) != v}
    if changed:
        raise SqlError(f"the embedding model's {sorted(changed)} cannot change (only its api_key): "
                       "the stored vectors were made by it; create a new knowledge base")
    if current is None:
        raise SqlError("this knowledge base embeds with the local default model, which takes no api_key")
    return validate.model({**current, **value}, "embedding_model")


def _reranking_update(current: dict[str, Any] | None, value: Any) -> dict[str, Any] | None:
    """As MindsDB's KnowledgeBaseController.update: `false` turns reranking off, a new
    provider replaces the model, anything else (`{'api_key': '...'}`) updates the current one."""
    if isinstance(value, dict) and current and value.get("provider") in (None, current.get("provider")):
        value = {**current, **value}
    return validate.model(value, "reranking_model")


def alter(session: SqlSession, statement: AlterKnowledgeBase, ctx: dict[str, Any],
          routed: Routed) -> SqlResult:
    record = record_of(session, statement.name, ctx)
    params = {k.lower(): v for k, v in (statement.params or {}).items()}
    if "storage" in params:
        raise SqlError("the storage of a knowledge base cannot be altered (alter.mdx)")
    unknown = set(params) - _ALTERABLE
    if unknown:
        raise SqlError(f"ALTER KNOWLEDGE_BASE cannot change {sorted(unknown)}")
    spec = dict(record.spec)
    for key, value in params.items():
        if key == "embedding_model":
            spec[key] = _embedding_update(record.spec.get(key), value)
        elif key == "reranking_model":
            spec[key] = _reranking_update(record.spec.get(key), value)
        elif key in ("metadata_columns", "content_columns"):
            spec[key] = validate.string_list(value, key)
        elif key == "id_column":
            spec[key] = validate.optional_string(value, key)
        else:
            spec[key] = validate.preprocessing(value)
    session.kbs.service.check_models(spec)
    session.kbs.service.spec_changed(session.catalog.update_knowledge_base(record, spec))
    return OkResult(None, context=ctx)


def evaluate(session: SqlSession, statement: EvaluateKnowledgeBase, ctx: dict[str, Any],
             routed: Routed) -> SqlResult:
    import pandas as pd
    record = record_of(session, statement.name, ctx)
    service = session.kbs.service

    def rows_of(sql: str | None) -> list[dict[str, Any]]:
        if sql is None:  # the knowledge base's own chunks, every one
            return [{"content": r[2], "id": r[0]} for r in service.search(record, SearchRequest())]
        frame = select_frame(session, parsing.parse(sql), ctx)
        return frame.to_dict("records")

    def sample_of(sql: str, count: int) -> list[dict[str, Any]]:
        """The rows of `sql` questions are written from: only those become dicts."""
        table = run_select(session, parsing.parse(sql), ctx)
        return table.take(kb_evaluate.sampled(table.num_rows, count)).to_pandas().to_dict("records")

    def save(name: str, rows: list[dict[str, Any]]) -> None:
        session.frames.register(name, pd.DataFrame(rows))

    ports = kb_evaluate.EvaluatePorts(
        kb_name=f"{record.project_name}.{record.name}",
        search=lambda request: service.search(record, request),
        reranking_model=record.spec.get("reranking_model") or None,
        rows_of=rows_of,
        sample_of=sample_of,
        save=save,
        reranker=service.models.reranker,
        http=service.models.context.http,
        progress=routed.progress)
    names, rows = kb_evaluate.run(statement.params, ports)
    return ArrowTableResult.from_rows(names, rows, ctx)


# listing ---------------------------------------------------------------------------------
def show(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    project = str(statement.from_table.parts[-1]) if statement.from_table is not None else ctx["db"]
    table = knowledge_bases_table(session, session.catalog.knowledge_bases(project))
    if statement.where is None and statement.like is None:
        return ArrowTableResult(table, ctx)
    where = statement.where
    if statement.like is not None:
        like = ast.BinaryOperation("like", args=[ast.Identifier("NAME"), ast.Constant(statement.like)])
        where = like if where is None else ast.BinaryOperation("and", args=[where, like])
    return run_over(session, table, ast.Select(targets=[ast.Star()], where=where), ctx)


def describe(session: SqlSession, statement: ast.Describe, ctx: dict[str, Any],
             routed: Routed) -> SqlResult:
    """DESCRIBE KNOWLEDGE_BASE kb, or DESCRIBE kb (a table the router resolved to a knowledge
    base)."""
    record = routed.record or record_of(session, statement.value, ctx)
    return ArrowTableResult(knowledge_bases_table(session, [record]), ctx)


def columns(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """SHOW [FULL] COLUMNS FROM kb: the columns a SELECT on it can name, metadata columns
    included (declared or seen in its rows), in MindsDB's shape as for a table."""
    record = routed.record
    assert record is not None  # the router sends only a knowledge base here
    return show_columns_answer(session, mysql_schema.kb_columns(session, record), statement, ctx)
