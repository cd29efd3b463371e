"""Knowledge-base statements in SQL, on `mindsdb_sql_parser` ASTs.

`handle` executes a statement about a knowledge base (SELECT / INSERT / DELETE on a KB,
CREATE / DROP / ALTER KNOWLEDGE_BASE, SHOW KNOWLEDGE_BASES, DESCRIBE KNOWLEDGE_BASE,
information_schema.knowledge_bases) and returns None for anything else, so the executor
can route the statement on. Names resolve in the current project (`ctx["db"]`) or as
`project.kb`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb import AlterKnowledgeBase, CreateKnowledgeBase, DropKnowledgeBase

from kbsql.engine import validate
from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.search import DEFAULT_LIMIT
from kbsql.engine.sql import kb_index  # CREATE / DROP INDEX ON KNOWLEDGE_BASE
from kbsql.engine.sql.info_schema import INFO_COLUMNS, knowledge_bases_frame
from kbsql.engine.sql.kb_conditions import constant, count, search_request
from kbsql.engine.sql.select import select_frame
from kbsql.interface.errors import NotFound, SqlError
from kbsql.interface.results import KB_COLUMNS, OkResult, SqlResult, TableResult

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.session import SqlSession

_ALTERABLE = {"reranking_model", "metadata_columns", "content_columns", "id_column", "preprocessing",
              "embedding_model"}


def handle(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any]) -> SqlResult | None:
    """Execute `statement` if it is about a knowledge base; None when it is not."""
    indexed = kb_index.handle(session, statement, ctx, lambda name: _record(session, name, ctx))
    if indexed is not None:
        return indexed
    if isinstance(statement, CreateKnowledgeBase):
        return _create(session, statement, ctx)
    if isinstance(statement, DropKnowledgeBase):
        return _drop(session, statement, ctx)
    if isinstance(statement, AlterKnowledgeBase):
        return _alter(session, statement, ctx)
    if isinstance(statement, ast.Show) and str(statement.category).upper().replace(" ", "_") == \
            "KNOWLEDGE_BASES":
        return _show(session, statement, ctx)
    if isinstance(statement, ast.Describe):
        return _describe(session, statement, ctx)
    if isinstance(statement, ast.Select):
        return _select(session, statement, ctx)
    if isinstance(statement, ast.Insert):
        record = _find(session, statement.table, ctx)
        return None if record is None else _insert(session, record, statement, ctx)
    if isinstance(statement, ast.Delete):
        record = _find(session, statement.table, ctx)
        if record is None:
            return None
        request = search_request(statement.where, metadata_columns=record.metadata_columns)
        if request.query is not None or request.min_relevance is not None or request.hybrid:
            raise SqlError("DELETE FROM a knowledge base filters on id and metadata columns; "
                           "`content = '...'` and relevance are search terms, not filters")
        return OkResult(session.kbs.delete_rows(record, request.filters), context=ctx)
    return None


# names -----------------------------------------------------------------------------------
def _split(identifier: ast.Identifier, ctx: dict[str, Any]) -> tuple[str, str]:
    parts = [str(p) for p in identifier.parts]
    if len(parts) == 1:
        return ctx["db"], parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise SqlError(f"Invalid knowledge base name {identifier.to_string()}")


def _find(session: SqlSession, table: Any, ctx: dict[str, Any]) -> KbRecord | None:
    """The knowledge base a table name denotes, or None (a table of a data source)."""
    if not isinstance(table, ast.Identifier) or len(table.parts) > 2:
        return None
    project, name = _split(table, ctx)
    try:
        return session.catalog.find_knowledge_base(project, name)
    except NotFound:  # the first part is a data source, not a project
        return None


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


def _alter(session: SqlSession, statement: AlterKnowledgeBase, ctx: dict[str, Any]) -> SqlResult:
    record = _record(session, statement.name, ctx)
    params = {k.lower(): v for k, v in (statement.params or {}).items()}
    unknown = set(params) - _ALTERABLE
    if unknown:
        raise SqlError(f"ALTER KNOWLEDGE_BASE cannot change {sorted(unknown)}")
    spec = dict(record.spec)
    for key, value in params.items():
        if key in ("reranking_model", "embedding_model"):
            spec[key] = validate.model(value, key)
        elif key in ("metadata_columns", "content_columns"):
            spec[key] = validate.string_list(value, key)
        elif key == "id_column":
            spec[key] = validate.optional_string(value, key)
        else:
            spec[key] = validate.preprocessing(value)
    if spec.get("embedding_model") != record.spec.get("embedding_model") and \
            session.kbs.service.count(record) > 0:
        raise SqlError("the embedding model of a knowledge base that holds rows cannot change: "
                       "create a new knowledge base")
    session.kbs.service.check_models(spec)
    session.kbs.service.spec_changed(session.catalog.update_knowledge_base(record, spec))
    return OkResult(None, context=ctx)


# listing ---------------------------------------------------------------------------------
def _run_over(frame: pd.DataFrame, statement: ast.Select, ctx: dict[str, Any]) -> TableResult:
    """Run a SELECT (its WHERE, targets, ORDER, LIMIT) over one frame, in a private DuckDB."""
    statement.from_table = ast.Identifier("kb_frame")
    with duckdb.connect(":memory:") as con:
        con.register("kb_frame", frame)
        cursor = con.execute(statement.to_string())
        names = [d[0] for d in cursor.description]
        rows = [list(r) for r in cursor.fetchall()]
    return TableResult(names, rows, context=ctx)


def _show(session: SqlSession, statement: ast.Show, ctx: dict[str, Any]) -> SqlResult:
    project = str(statement.from_table.parts[-1]) if statement.from_table is not None else ctx["db"]
    frame = knowledge_bases_frame(session.catalog.knowledge_bases(project))
    if statement.where is None and statement.like is None:
        return TableResult(INFO_COLUMNS, frame.values.tolist(), context=ctx, frame=frame)
    where = statement.where
    if statement.like is not None:
        like = ast.BinaryOperation("like", args=[ast.Identifier("NAME"), ast.Constant(statement.like)])
        where = like if where is None else ast.BinaryOperation("and", args=[where, like])
    return _run_over(frame, ast.Select(targets=[ast.Star()], where=where), ctx)


def _describe(session: SqlSession, statement: ast.Describe, ctx: dict[str, Any]) -> SqlResult | None:
    kind = str(getattr(statement, "type", None) or "").upper().replace(" ", "_")
    if kind not in ("KNOWLEDGE_BASE", ""):
        return None
    if kind == "":
        record = _find(session, statement.value, ctx)
        if record is None:
            return None
    else:
        record = _record(session, statement.value, ctx)
    frame = knowledge_bases_frame([record])
    return TableResult(INFO_COLUMNS, frame.values.tolist(), context=ctx, frame=frame)


# rows ------------------------------------------------------------------------------------
def _is_info_schema(table: Any) -> bool:
    return isinstance(table, ast.Identifier) and [str(p).lower() for p in table.parts] == \
        ["information_schema", "knowledge_bases"]


def _select(session: SqlSession, statement: ast.Select, ctx: dict[str, Any]) -> SqlResult | None:
    if _is_info_schema(statement.from_table):
        return _run_over(knowledge_bases_frame(session.catalog.knowledge_bases()), statement, ctx)
    record = _find(session, statement.from_table, ctx)
    if record is None:
        return None
    if statement.group_by or statement.having or statement.order_by or statement.distinct:
        raise SqlError("GROUP BY / HAVING / ORDER BY / DISTINCT on a knowledge base are not supported: "
                       "results come best first")
    request = search_request(statement.where, statement.limit, record.metadata_columns)
    offset = count(statement.offset, "OFFSET") if statement.offset is not None else 0
    if offset and (request.limit is not None or request.query is not None):
        request.limit = (DEFAULT_LIMIT if request.limit is None else request.limit) + offset
    rows = session.kbs.service.search(record, request)[offset:]
    names, rows = _project(statement.targets, rows)
    defaulted = statement.limit is None and request.query is not None and len(rows) == DEFAULT_LIMIT
    return TableResult(names, rows, context=ctx, default_limit=DEFAULT_LIMIT if defaulted else None)


def _project(targets: list[ast.ASTNode], rows: list[list[Any]]) -> tuple[list[str], list[list[Any]]]:
    """Keep the selected columns; a name that is not a result column reads a metadata key."""
    if len(targets) == 1 and isinstance(targets[0], ast.Star):
        return list(KB_COLUMNS), rows
    picks: list[tuple[str, int | str]] = []
    for target in targets:
        if isinstance(target, ast.Star):
            picks.extend((c, i) for i, c in enumerate(KB_COLUMNS))
        elif isinstance(target, ast.Identifier):
            column = str(target.parts[-1])
            name = str(target.alias.parts[-1]) if target.alias is not None else column
            lowered = "chunk_content" if column.lower() == "content" else column.lower()
            picks.append((name, KB_COLUMNS.index(lowered) if lowered in KB_COLUMNS else column))
        else:
            raise SqlError(f"Only columns can be selected from a knowledge base, not {target.to_string()}")
    out = [[row[p] if isinstance(p, int) else (row[3] or {}).get(p) for _, p in picks] for row in rows]
    return [n for n, _ in picks], out


def _insert(session: SqlSession, record: KbRecord, statement: ast.Insert, ctx: dict[str, Any]) -> SqlResult:
    if statement.from_select is not None:
        frame = select_frame(session, statement.from_select, ctx)
        if statement.columns:  # `INSERT INTO kb (a, b) SELECT x, y ...`: names by position
            names = _column_names(statement.columns)
            if len(names) != len(frame.columns):
                raise SqlError(f"INSERT names {len(names)} columns but its SELECT returns "
                               f"{len(frame.columns)}")
            frame.columns = names
        return OkResult(session.kbs.insert_rows(record, frame), context=ctx)
    if not statement.columns:
        raise SqlError("INSERT INTO a knowledge base needs its column names: "
                       "INSERT INTO kb (id, content) ...")
    names = _column_names(statement.columns)
    rows = []
    for values in statement.values or []:
        if len(values) != len(names):
            raise SqlError(f"INSERT has {len(names)} columns but a row of {len(values)} values")
        rows.append({n: constant(v) for n, v in zip(names, values, strict=True)})
    return OkResult(session.kbs.insert_rows(record, rows), context=ctx)


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
