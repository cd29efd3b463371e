"""Knowledge-base statements in SQL, on `mindsdb_sql_parser` ASTs.

`handle` executes a statement about a knowledge base (SELECT / INSERT / DELETE on a KB,
CREATE / DROP / ALTER KNOWLEDGE_BASE, SHOW KNOWLEDGE_BASES, DESCRIBE KNOWLEDGE_BASE,
information_schema.knowledge_bases) and returns None for anything else, so the executor
can route the statement on. Names resolve in the current project (`ctx["db"]`) or as
`project.kb`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb import AlterKnowledgeBase, CreateKnowledgeBase, DropKnowledgeBase
from mindsdb_sql_parser.ast.mindsdb.knowledge_base import EvaluateKnowledgeBase

from kbsql.engine import validate
from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.ingest import INTERNAL_KEYS
from kbsql.engine.knowledge.json_chunking import metadata_keys
from kbsql.engine.knowledge.search import DEFAULT_LIMIT, SearchRequest
from kbsql.engine.sql import (
    kb_background,
    kb_evaluate,
    kb_index,
    kb_insert,
    kb_select,
    kb_update,
    kb_write,
    parsing,
)
from kbsql.engine.sql.info_schema import INFO_COLUMNS, knowledge_bases_frame
from kbsql.engine.sql.kb_write import unquote_identifier  # noqa: F401 (its old home)
from kbsql.engine.sql.refusals import unsupported
from kbsql.engine.sql.results import ArrowTableResult
from kbsql.engine.sql.select import select_frame
from kbsql.interface.errors import NotFound, SqlError
from kbsql.interface.results import OkResult, SqlResult, TableResult

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.names import Resolved
    from kbsql.engine.sql.session import SqlSession

_ALTERABLE = {"reranking_model", "metadata_columns", "content_columns", "id_column", "preprocessing",
              "embedding_model"}


def handle(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
           target: Resolved | None = None) -> SqlResult | None:
    """Execute `statement` if it is about a knowledge base; None when it is not. `target` is
    what the statement's own table names, resolved once by the router (`names.target_of`)."""
    indexed = kb_index.handle(session, statement, ctx, lambda name: _record(session, name, ctx))
    if indexed is not None:  # CREATE / DROP INDEX ON KNOWLEDGE_BASE
        return indexed
    record = target.record if target is not None and target.kind == "kb" else None
    if isinstance(statement, CreateKnowledgeBase):
        return _create(session, statement, ctx)
    if isinstance(statement, DropKnowledgeBase):
        return _drop(session, statement, ctx)
    if isinstance(statement, AlterKnowledgeBase):
        return _alter(session, statement, ctx)
    if isinstance(statement, EvaluateKnowledgeBase):
        return _evaluate(session, statement, ctx)
    if isinstance(statement, ast.Show) and str(statement.category).upper().replace(" ", "_") == \
            "KNOWLEDGE_BASES":
        return _show(session, statement, ctx)
    if isinstance(statement, ast.Describe):
        return _describe(session, statement, ctx, record)
    if isinstance(statement, ast.Show) and str(statement.category).upper() in ("COLUMNS", "FIELDS"):
        return None if record is None else _columns(session, record, statement, ctx)
    if isinstance(statement, ast.Select):
        return _select(session, statement, ctx, record)
    if isinstance(statement, ast.Insert):
        return None if record is None else _insert(session, record, statement, ctx)
    if isinstance(statement, ast.Delete):
        if record is None:
            return None
        filters = kb_update.where_filters(record, statement.where,
                                          lambda select: subquery_values(session, select, ctx), "DELETE")
        return OkResult(session.kbs.delete_rows(record, filters), context=ctx)
    if isinstance(statement, ast.Update):
        if record is None:
            return None
        return kb_update.update(session, record, statement, ctx,
                                lambda select: subquery_values(session, select, ctx))
    return None


# names -----------------------------------------------------------------------------------
def _split(identifier: ast.Identifier, ctx: dict[str, Any]) -> tuple[str, str]:
    parts = [str(p) for p in identifier.parts]
    if len(parts) == 1:
        return ctx["db"], parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise SqlError(f"Invalid knowledge base name {identifier.to_string()}")


def _record(session: SqlSession, identifier: ast.Identifier, ctx: dict[str, Any]) -> KbRecord:
    project, name = _split(identifier, ctx)
    return session.catalog.knowledge_base(project, name)


# DDL -------------------------------------------------------------------------------------
def _create(session: SqlSession, statement: CreateKnowledgeBase, ctx: dict[str, Any]) -> SqlResult:
    project, name = _split(statement.name, ctx)
    if statement.from_query is not None:
        raise SqlError("CREATE KNOWLEDGE_BASE ... FROM (query) is not supported: create it, then "
                       "INSERT INTO kb SELECT ...")
    body = {k.lower(): v for k, v in (statement.params or {}).items()}
    body["name"] = name
    if statement.storage is not None:
        parts = [str(p) for p in statement.storage.parts]
        if len(parts) != 2:
            raise SqlError("storage must be written database.table")
        body["storage"] = {"database": parts[0], "table": parts[1]}
    session.kbs.create(project, body, bool(statement.if_not_exists))
    return OkResult(None, context=ctx)


def _drop(session: SqlSession, statement: DropKnowledgeBase, ctx: dict[str, Any]) -> SqlResult:
    project, name = _split(statement.name, ctx)
    try:
        session.kbs.delete(project, name)
    except NotFound:
        if not statement.if_exists:
            raise
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


def _alter(session: SqlSession, statement: AlterKnowledgeBase, ctx: dict[str, Any]) -> SqlResult:
    record = _record(session, statement.name, ctx)
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
            spec[key] = validate.model(value, key)
        elif key in ("metadata_columns", "content_columns"):
            spec[key] = validate.string_list(value, key)
        elif key == "id_column":
            spec[key] = validate.optional_string(value, key)
        else:
            spec[key] = validate.preprocessing(value)
    session.kbs.service.check_models(spec)
    session.kbs.service.spec_changed(session.catalog.update_knowledge_base(record, spec))
    return OkResult(None, context=ctx)


def _evaluate(session: SqlSession, statement: EvaluateKnowledgeBase, ctx: dict[str, Any]) -> SqlResult:
    import pandas as pd
    record = _record(session, statement.name, ctx)
    service = session.kbs.service

    def rows_of(sql: str | None) -> list[dict[str, Any]]:
        if sql is None:  # the knowledge base's own chunks, every one
            return [{"content": r[2], "id": r[0]} for r in service.search(record, SearchRequest())]
        frame = select_frame(session, parsing.parse(sql), ctx)
        return frame.to_dict("records")

    def save(name: str, rows: list[dict[str, Any]]) -> None:
        session.frames.register(name, pd.DataFrame(rows))

    ports = kb_evaluate.EvaluatePorts(
        kb_name=f"{record.project_name}.{record.name}",
        search=lambda request: service.search(record, request),
        reranking_model=record.spec.get("reranking_model") or None,
        rows_of=rows_of,
        save=save)
    names, rows = kb_evaluate.run(statement.params, ports)
    return ArrowTableResult.from_rows(names, rows, ctx)


# listing ---------------------------------------------------------------------------------
def _run_over(frame: pd.DataFrame, statement: ast.Select, ctx: dict[str, Any]) -> SqlResult:
    """Run a SELECT (its WHERE, targets, ORDER, LIMIT) over one frame, in a private DuckDB."""
    statement.from_table = ast.Identifier("kb_frame")
    with duckdb.connect(":memory:") as con:
        con.register("kb_frame", frame)
        table = con.execute(statement.to_string()).fetch_arrow_table()
    return ArrowTableResult(table, ctx)


def _show(session: SqlSession, statement: ast.Show, ctx: dict[str, Any]) -> SqlResult:
    project = str(statement.from_table.parts[-1]) if statement.from_table is not None else ctx["db"]
    frame = knowledge_bases_frame(session, session.catalog.knowledge_bases(project))
    if statement.where is None and statement.like is None:
        return TableResult(INFO_COLUMNS, frame.values.tolist(), context=ctx, frame=frame)
    where = statement.where
    if statement.like is not None:
        like = ast.BinaryOperation("like", args=[ast.Identifier("NAME"), ast.Constant(statement.like)])
        where = like if where is None else ast.BinaryOperation("and", args=[where, like])
    return _run_over(frame, ast.Select(targets=[ast.Star()], where=where), ctx)


def _describe(session: SqlSession, statement: ast.Describe, ctx: dict[str, Any],
              record: KbRecord | None) -> SqlResult | None:
    """DESCRIBE KNOWLEDGE_BASE kb, or DESCRIBE kb (`record`: the table, resolved by the router)."""
    kind = str(getattr(statement, "type", None) or "").upper().replace(" ", "_")
    if kind not in ("KNOWLEDGE_BASE", ""):
        return None
    if kind == "KNOWLEDGE_BASE":
        record = _record(session, statement.value, ctx)
    if record is None:
        return None
    frame = knowledge_bases_frame(session, [record])
    return TableResult(INFO_COLUMNS, frame.values.tolist(), context=ctx, frame=frame)


def _columns(session: SqlSession, record: KbRecord, statement: ast.Show, ctx: dict[str, Any]) -> SqlResult:
    """SHOW COLUMNS FROM kb: the columns a SELECT on it can name (the same two columns as
    DESCRIBE of a table), metadata columns included, declared or seen in its rows."""
    names = [("id", "VARCHAR"), ("chunk_id", "VARCHAR"), ("chunk_content", "VARCHAR"), ("metadata", "JSON"),
             ("relevance", "DOUBLE"), ("distance", "DOUBLE")]
    keys = record.metadata_columns
    if keys is None:  # inferred metadata: the keys its rows hold
        rows = session.kbs.service.search(record, SearchRequest(limit=1000))
        keys = sorted({k for r in rows for k in (r[3] or {})} - set(INTERNAL_KEYS))
    names += [(k, "VARCHAR") for k in keys]
    frame_rows = [[n, t] for n, t in names]
    if statement.like is not None:
        pattern = str(statement.like).replace("%", ".*").replace("_", ".")
        frame_rows = [r for r in frame_rows if re.fullmatch(pattern, r[0], re.IGNORECASE)]
    return TableResult(["COLUMN_NAME", "DATA_TYPE"], frame_rows, context=ctx)


# rows ------------------------------------------------------------------------------------
def _is_info_schema(table: Any) -> bool:
    return isinstance(table, ast.Identifier) and [str(p).lower() for p in table.parts] == \
        ["information_schema", "knowledge_bases"]


def _select(session: SqlSession, statement: ast.Select, ctx: dict[str, Any],
            record: KbRecord | None) -> SqlResult | None:
    if _is_info_schema(statement.from_table):
        return _run_over(knowledge_bases_frame(session, session.catalog.knowledge_bases()), statement, ctx)
    if record is None:
        return None
    service = session.kbs.service
    names, rows = kb_select.select_rows(
        statement, record.name, record.metadata_columns,
        search=lambda request: service.search(record, request),
        total=lambda: service.count(record),
        subquery=lambda select: subquery_values(session, select, ctx),
        extra_keys=metadata_keys(record.spec))
    result = ArrowTableResult.from_rows(names, rows, ctx)  # Arrow like every other SELECT
    # a plain search without LIMIT stops at the documented default: say so when it may have
    # (a notebook shows a note under the table; joins and aggregates are never capped)
    if (statement.limit is None and not statement.distinct and kb_select.is_plain(statement)
            and len(rows) == DEFAULT_LIMIT and _searches(statement.where)):
        result.default_limit = DEFAULT_LIMIT
    return result


def _searches(node: Any) -> bool:
    """Whether a WHERE clause compares `content` (a semantic search), at any depth."""
    if isinstance(node, ast.Identifier):
        return str(node.parts[-1]).lower() == "content"
    return any(_searches(arg) for arg in getattr(node, "args", None) or ())


def refuse_vector_store(session: SqlSession, table: Any) -> None:
    """insert_data.mdx reads a knowledge base's vector store as a table
    (`SELECT id, content, metadata, embeddings FROM my_kb_chromadb.storage_table`); here the
    store is the engine's own, read through the knowledge base. The router asks this when a
    SELECT's table does not resolve, so the user gets this line instead of "not found"."""
    if not isinstance(table, ast.Identifier) or len(table.parts) != 2:
        return
    database = str(table.parts[0]).lower()
    if database in ("df", "information_schema") or session.catalog.find_datasource(database) is not None:
        return
    for kb in session.catalog.knowledge_bases():
        if database in (f"{kb.name.lower()}_chromadb", str(kb.spec.get("vector_database") or "").lower()):
            raise unsupported(f"reading the vector store of knowledge base {kb.name} as a table "
                              f"(SELECT ... FROM {kb.name} reads its chunks)")


def subquery_values(session: SqlSession, select: ast.ASTNode, ctx: dict[str, Any]) -> list[Any]:
    """The first column of a subquery's rows (`id NOT IN (SELECT id FROM kb WHERE ...)`)."""
    frame = select_frame(session, select, ctx)
    return [] if frame.empty else list(frame.iloc[:, 0])


def _insert(session: SqlSession, record: KbRecord, statement: ast.Insert, ctx: dict[str, Any]) -> SqlResult:
    """VALUES rows are stored at once. `INSERT ... SELECT` is logged in
    information_schema.queries; with `USING batch_size` it runs in the background as
    MindsDB's partitioned inserts do (kb_background), else within the statement."""
    if statement.from_select is None:
        return OkResult(session.kbs.insert_rows(record, kb_write.values_rows(statement)), context=ctx)
    sql = kb_write.logged_sql(statement)
    using = kb_write.take_using(statement)
    if kb_background.wanted(using):
        return session.background.start(record, statement, sql, using or {}, ctx)
    with session.queries.track(sql, ctx["db"], using, record.id) as logged:
        frame = kb_write.frame_of(session, statement, ctx)
        if using:
            count = kb_write.insert_frame(session, record, frame, kb_insert.options_of(using))
        else:
            count = session.kbs.insert_rows(record, frame)
        logged["PROCESSED_ROWS"] = count
    return OkResult(count, context=ctx)
