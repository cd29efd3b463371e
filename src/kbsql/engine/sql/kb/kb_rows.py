"""The rows of a knowledge base in SQL: SELECT (a search), INSERT (VALUES or a SELECT,
`USING` batch options) and DELETE (on id and metadata columns).

The router resolves the statement's own table once and sends it here only when it is a
knowledge base (`routed.record`); the handlers are entries of `sql/statements.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast

from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.ingest import RowChunker
from kbsql.engine.knowledge.search import DEFAULT_LIMIT, Filter, SearchRequest
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.databases.info_schema import knowledge_bases_frame
from kbsql.engine.sql.kb import kb_insert, kb_select
from kbsql.engine.sql.kb.kb_conditions import constant
from kbsql.engine.sql.kb.kb_where import Columns, KbWhere, split_options
from kbsql.engine.sql.refusals import unsupported
from kbsql.engine.sql.tables.select import select_frame
from kbsql.interface.errors import SqlError
from kbsql.interface.progress import OnProgress
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed


def _record(routed: Routed) -> KbRecord:
    record = routed.record
    assert record is not None  # the router sends only a knowledge base here
    return record


def delete(session: SqlSession, statement: ast.Delete, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """`DELETE FROM kb WHERE ...` on id and metadata columns."""
    record = _record(routed)
    return OkResult(session.kbs.delete_rows(record, _delete_filters(session, record, statement, ctx)),
                    context=ctx)


def _delete_filters(session: SqlSession, record: KbRecord, statement: ast.Delete,
                    ctx: dict[str, Any]) -> list[Any]:
    """DELETE's WHERE as filters: the metadata conditions of a search (OR, NOT, BETWEEN,
    IN a subquery); a search term there has no meaning."""
    options, node = split_options(statement.where)
    if options.min_relevance is not None or options.hybrid:
        raise SqlError("DELETE FROM a knowledge base filters on id and metadata columns; "
                       "relevance and hybrid search are search options, not filters")
    if node is None:
        return []
    where = KbWhere(lambda request: [], Columns(record.metadata_columns), options, search_limit=0,
                    read_limit=None, subquery=lambda select: subquery_values(session, select, ctx))
    if where.has_search(node):
        raise SqlError("DELETE FROM a knowledge base filters on id and metadata columns; "
                       "`content = '...'` and relevance are search terms, not filters")
    return [where.to_filter(node)]


def is_info_schema_kbs(table: Any) -> bool:
    """Whether a FROM table is `information_schema.knowledge_bases` (answered like SHOW
    KNOWLEDGE_BASES, over every project)."""
    return isinstance(table, ast.Identifier) and [str(p).lower() for p in table.parts] == \
        ["information_schema", "knowledge_bases"]


def select_info_schema(session: SqlSession, statement: ast.Select, ctx: dict[str, Any],
                       routed: Routed) -> SqlResult:
    """`SELECT ... FROM information_schema.knowledge_bases` on its own."""
    return run_over(knowledge_bases_frame(session.catalog.knowledge_bases()), statement, ctx)


def select(session: SqlSession, statement: ast.Select, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """`SELECT ... FROM kb [WHERE content = '...' AND ...]`: a search, then the rest of the
    query over its rows (`kb_select`)."""
    record = _record(routed)
    service = session.kbs.service
    names, rows = kb_select.select_rows(
        statement, record.name, record.metadata_columns,
        search=lambda request: service.search(record, request),
        total=lambda: service.count(record),
        subquery=lambda select: subquery_values(session, select, ctx))
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
    """`INSERT INTO kb (...) VALUES ...` or `INSERT INTO kb SELECT ... [USING ...]`, logged in
    information_schema.queries with the rows it processed."""
    record = _record(routed)
    using = getattr(statement.from_select, "using", None) if statement.from_select is not None else None
    with session.queries.track(_logged_sql(statement), ctx["db"], using) as logged:
        result = _insert(session, record, statement, ctx, routed.progress)
        logged["PROCESSED_ROWS"] = result.affected_rows or 0
    return result


def _insert(session: SqlSession, record: KbRecord, statement: ast.Insert, ctx: dict[str, Any],
            progress: OnProgress | None) -> OkResult:
    if statement.from_select is not None:
        using = getattr(statement.from_select, "using", None)  # INSERT ... SELECT ... USING opts
        statement.from_select.using = None
        frame = select_frame(session, statement.from_select, ctx)
        if statement.columns:  # `INSERT INTO kb (a, b) SELECT x, y ...`: names by position
            names = _column_names(statement.columns)
            if len(names) != len(frame.columns):
                raise SqlError(f"INSERT names {len(names)} columns but its SELECT returns "
                               f"{len(frame.columns)}")
            frame.columns = names
        if using:
            return OkResult(_insert_with(session, record, frame, using, progress), context=ctx)
        return OkResult(session.kbs.insert_rows(record, frame, progress), context=ctx)
    if not statement.columns:
        raise SqlError("INSERT INTO a knowledge base needs its column names: "
                       "INSERT INTO kb (id, content) ...")
    names = _column_names(statement.columns)
    rows = []
    for values in statement.values or []:
        if len(values) != len(names):
            raise SqlError(f"INSERT has {len(names)} columns but a row of {len(values)} values")
        rows.append({n: constant(v) for n, v in zip(names, values, strict=True)})
    return OkResult(session.kbs.insert_rows(record, rows, progress), context=ctx)


def _logged_sql(statement: ast.Insert) -> str:
    """The INSERT as information_schema.queries shows it: VALUES are left out (they may be
    long, or hold text the user would not want copied into a log)."""
    if statement.from_select is None:
        return f"INSERT INTO {statement.table.to_string()} VALUES ({len(statement.values or [])} rows)"
    return statement.to_string()


def _insert_with(session: SqlSession, record: KbRecord, frame: Any, using: dict[str, Any],
                 progress: OnProgress | None) -> int:
    def doc_ids(rows: Any) -> list[str | None]:
        chunker = RowChunker(record.spec)
        out = []
        for i, row in enumerate(rows.to_dict("records")):
            made = chunker.chunks(row, i)
            out.append(None if made is None else made[0])
        return out

    def stored(ids: list[str]) -> set[str]:
        if not ids:
            return set()
        request = SearchRequest(filters=[Filter("id", "in", ids)])
        return {str(r[0]) for r in session.kbs.service.search(record, request)}

    def insert_batches(batches: kb_insert.FrameBatches, threads: int, skip: bool) -> int:
        return session.kbs.insert_batches(record, batches, threads=threads, skip=skip,
                                          progress=progress, total_rows=batches.rows)

    return kb_insert.insert_frame(frame, kb_insert.options_of(using), insert_batches, doc_ids, stored)


def _column_names(columns: list[Any]) -> list[str]:
    """The INSERT column list as plain names.

    mindsdb_sql_parser hands the list over as `TableColumn`s whose `name` is the raw token,
    backticks included (`Identifier` parts are clean, `TableColumn` names are not), so the
    quotes come off here: one layer of ` or ", doubled inner quotes undoubled.
    """
    names = [unquote_identifier(str(c.name)) if hasattr(c, "name") else str(c.parts[-1])
             for c in columns]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SqlError(f"INSERT names the column(s) {repeated} more than once")
    return names


def unquote_identifier(name: str) -> str:
    """`my col` -> my col, "a""b" -> a"b; an unquoted name is returned as it is."""
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "`\"":
        quote = name[0]
        return name[1:-1].replace(quote * 2, quote)
    return name


def run_over(frame: pd.DataFrame, statement: ast.Select, ctx: dict[str, Any]) -> SqlResult:
    """Run a SELECT (its WHERE, targets, ORDER, LIMIT) over one frame, in a private DuckDB."""
    statement.from_table = ast.Identifier("kb_frame")
    with duckdb.connect(":memory:") as con:
        con.register("kb_frame", frame)
        table = con.execute(statement.to_string()).fetch_arrow_table()
    return ArrowTableResult(table, ctx)
