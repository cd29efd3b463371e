"""The rows of a knowledge base in SQL: SELECT (a search), INSERT (VALUES or a SELECT,
`USING` batch options) and DELETE (on id and metadata columns).

The router resolves the statement's own table once and sends it here only when it is a
knowledge base (`routed.record`); the handlers are entries of `sql/statements.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.search import DEFAULT_LIMIT
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.databases.info_schema import knowledge_bases_table
from kbsql.engine.sql.kb import kb_background, kb_insert, kb_select, kb_stream, kb_update, kb_write
from kbsql.engine.sql.kb.kb_columns import Columns
from kbsql.engine.sql.kb.kb_write import unquote_identifier  # noqa: F401 (its old home)
from kbsql.engine.sql.refusals import unsupported
from kbsql.engine.sql.tables.select import run_select, select_frame
from kbsql.interface.control import Stopped
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed


INLINE = "_inline"
"""A context key the REST insert of a query sets: its rows are inserted within the request
(MindsDB's PUT .../knowledge_bases/{kb} with a `query` answers once they are in), even with
`batch_size`, which in SQL sends an INSERT to the background."""


def _record(routed: Routed) -> KbRecord:
    record = routed.record
    assert record is not None  # the router sends only a knowledge base here
    return record


def delete(session: SqlSession, statement: ast.Delete, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """`DELETE FROM kb WHERE ...` on id and metadata columns."""
    record = _record(routed)
    filters = kb_update.where_filters(Columns.of(record, session.kbs.service), statement.where,
                                      lambda select: subquery_values(session, select, ctx), "DELETE")
    return OkResult(session.kbs.delete_rows(record, filters), context=ctx)


def update(session: SqlSession, statement: ast.Update, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """`UPDATE kb SET content = '...' WHERE chunk_id = '...'` (kb_update)."""
    return kb_update.update(session, _record(routed), statement, ctx,
                            lambda select: subquery_values(session, select, ctx))


def is_info_schema_kbs(table: Any) -> bool:
    """Whether a FROM table is `information_schema.knowledge_bases` (answered like SHOW
    KNOWLEDGE_BASES, over every project)."""
    return isinstance(table, ast.Identifier) and [str(p).lower() for p in table.parts] == \
        ["information_schema", "knowledge_bases"]


def select_info_schema(session: SqlSession, statement: ast.Select, ctx: dict[str, Any],
                       routed: Routed) -> SqlResult:
    """`SELECT ... FROM information_schema.knowledge_bases` on its own."""
    table = knowledge_bases_table(session, session.catalog.knowledge_bases())
    return run_over(session, table, statement, ctx)


def select(session: SqlSession, statement: ast.Select, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """`SELECT ... FROM kb [WHERE content = '...' AND ...]`: a search, then the rest of the
    query over its rows (`kb_select`)."""
    record = _record(routed)
    service = session.kbs.service
    names, rows = kb_select.select_rows(
        statement, record.name, Columns.of(record, service),
        search=lambda request: service.search(record, request),
        total=lambda: service.count(record),
        subquery=lambda select: subquery_values(session, select, ctx),
        run=lambda query, frame: run_frame(session, query, ctx, frame),
        stream=lambda filters: service.plain_batches(record, filters, kb_stream.BATCH),
        counter=lambda filters: service.count_matching(record, filters),
        read_bound=session.duck.memory_limit // 2, ranked=not record.spec.get("reranking_model"))
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


def insert(session: SqlSession, statement: ast.Insert, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """VALUES rows are stored at once. `INSERT ... SELECT` is logged in
    information_schema.queries; with `USING batch_size` it runs in the background as
    MindsDB's partitioned inserts do (kb_background), else within the statement."""
    record = _record(routed)
    progress = routed.progress
    if statement.from_select is None:
        rows = kb_write.values_rows(statement, record.spec)
        return OkResult(session.kbs.insert_rows(record, rows, progress), context=ctx)
    sql = kb_write.logged_sql(statement)
    using = kb_write.take_using(statement)
    if kb_background.wanted(using) and not ctx.get(INLINE):
        return session.background.start(record, statement, sql, using or {}, ctx)
    with session.queries.track(sql, ctx["db"], using, record.id) as logged:
        try:
            if using:
                frame = kb_write.frame_of(session, statement, ctx, record.spec)
                count = kb_write.insert_frame(session, record, frame, kb_insert.options_of(using), progress)
            else:  # its batches read from the SELECT's Arrow answer, one at a time
                table = kb_write.table_of(session, statement, ctx, record.spec)
                count = session.kbs.insert_rows(record, table, progress)
        except Stopped as exc:  # the deadline or the client, between batches: say how a long one runs
            if ctx.get(INLINE):
                raise
            said = Stopped(f"{exc.reason}. A long INSERT ... SELECT runs in the background with "
                           f"USING batch_size = {kb_insert.DEFAULT_BATCH} (information_schema.queries "
                           "follows it)")
            said.stored = exc.stored
            raise said from None
        logged["PROCESSED_ROWS"] = count
    return OkResult(count, context=ctx)


def run_over(session: SqlSession, frame: pd.DataFrame | pa.Table, statement: ast.Select,
             ctx: dict[str, Any]) -> SqlResult:
    """Run a SELECT (its WHERE, targets, ORDER, LIMIT) over one frame, as every SELECT runs:
    under the SQL memory limit, the per-value caps and the statement's deadline."""
    statement.from_table = ast.Identifier("kb_frame")
    return ArrowTableResult(run_frame(session, statement, ctx, frame), ctx)


def run_frame(session: SqlSession, statement: ast.Select, ctx: dict[str, Any],
              frame: pd.DataFrame | pa.Table) -> pa.Table:
    """`statement`, whose table `kb_frame` is `frame`, on the engine's SQL session."""
    return run_select(session, statement, ctx, frames={"kb_frame": frame})
