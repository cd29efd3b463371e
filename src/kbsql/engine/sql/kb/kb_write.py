"""`INSERT INTO kb ...`: the rows of a VALUES list or of a SELECT, into a knowledge base.

Shared by the inline insert (kb_statements) and the background one (kb_background): the
rows of `INSERT INTO kb [(columns)] SELECT ...` as one frame (`frame_of`), and that frame
stored with the `USING` options of insert_data.mdx (`insert_frame`, see kb_insert.py)
through the one insert pipeline, reporting to an `OnProgress`: the caller's, or one an
observer makes for the batches about to be stored (a background insert records its
progress from each event's `committed` rows and stops there when cancelled).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.ingest import RowChunker, unplaced_column
from kbsql.engine.knowledge.search import Filter, SearchRequest
from kbsql.engine.sql.kb import kb_insert
from kbsql.engine.sql.kb.kb_conditions import constant
from kbsql.engine.sql.tables.select import run_select
from kbsql.interface.control import current
from kbsql.interface.errors import SqlError
from kbsql.interface.progress import OnProgress

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from kbsql.engine.sql.session import SqlSession

BatchObserver = Callable[[kb_insert.FrameBatches], OnProgress]
"""Given the batches an insert is about to store, the progress callback of that insert."""


def take_using(statement: ast.Insert) -> dict[str, Any] | None:
    """The `USING` options of `INSERT ... SELECT ... USING ...`, taken off the SELECT (which
    is then plain SQL over tables)."""
    select = statement.from_select
    using = getattr(select, "using", None) if select is not None else None
    if select is not None:
        select.using = None
    return using


def frame_of(session: SqlSession, statement: ast.Insert, ctx: dict[str, Any],
             spec: dict[str, Any] | None = None) -> pd.DataFrame:
    """`table_of` as one pandas frame (an insert with `USING` options sorts and filters it)."""
    return table_of(session, statement, ctx, spec).to_pandas()


def table_of(session: SqlSession, statement: ast.Insert, ctx: dict[str, Any],
             spec: dict[str, Any] | None = None) -> pa.Table:
    """The rows of `INSERT INTO kb [(a, b)] SELECT ...` (USING already taken off) as the
    SELECT's Arrow answer (within the result cap), named by the column list when there is one
    (by position, as SQL does). An inline insert reads its batches from it one at a time
    (interface/batches.py): a pandas frame of every row beside it was ~5x its size. With the
    knowledge base's `spec`, a column the statement names (in its column list, or as an alias
    in its SELECT) that the knowledge base has no place for is refused (`check_named_columns`);
    columns a `SELECT *` or a plain column brings are not named here, and go as MindsDB takes
    them."""
    if spec is not None:
        check_named_columns(column_names(statement.columns) if statement.columns
                            else aliases(statement.from_select), spec)
    table = run_select(session, statement.from_select, ctx)
    if statement.columns:
        names = column_names(statement.columns)
        if len(names) != table.num_columns:
            raise SqlError(f"INSERT names {len(names)} columns but its SELECT returns {table.num_columns}")
        table = table.rename_columns(names)
    return table


def aliases(select: Any) -> list[str]:
    """The names a SELECT gives its columns with `AS` (none for a UNION or a star)."""
    return [str(t.alias.parts[-1]) for t in getattr(select, "targets", None) or []
            if getattr(t, "alias", None) is not None]


def values_rows(statement: ast.Insert, spec: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rows of `INSERT INTO kb (columns) VALUES (...), ...`; with the knowledge base's
    `spec`, a named column it has no place for is refused (see `check_named_columns`)."""
    if not statement.columns:
        raise SqlError("INSERT INTO a knowledge base needs its column names: "
                       "INSERT INTO kb (id, content) ...")
    names = column_names(statement.columns)
    if spec is not None:
        check_named_columns(names, spec)
    rows = []
    for values in statement.values or []:
        if len(values) != len(names):
            raise SqlError(f"INSERT has {len(names)} columns but a row of {len(values)} values")
        rows.append({n: constant(v) for n, v in zip(names, values, strict=True)})
    return rows


def check_named_columns(names: list[str], spec: dict[str, Any]) -> None:
    """A named column the knowledge base has no place for is refused in one line, with the
    near name (knowledge/ingest.unplaced_column)."""
    refusal = unplaced_column(names, spec)
    if refusal is not None:
        raise SqlError(refusal)


def insert_frame(session: SqlSession, record: KbRecord, frame: Any, options: dict[str, Any],
                 progress: OnProgress | None = None, observe: BatchObserver | None = None) -> int:
    """Store `frame` with checked `USING` options (kb_insert.options_of); the rows stored.
    Progress goes to `observe(batches)` when given (a background insert, which stops itself
    there), else to `progress`, and the statement's deadline stops it between batches."""
    def doc_ids(rows: Any) -> list[str | None]:
        chunker = RowChunker(record.spec, session.kbs.service.config.max_chunks_per_row)
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
        listener = observe(batches) if observe is not None else progress
        return session.kbs.insert_batches(record, batches, threads=threads, skip=skip,
                                          total_rows=batches.rows, progress=listener,
                                          watch=current())  # a background insert: its own, renewed per batch

    return kb_insert.insert_frame(frame, options, insert_batches, doc_ids, stored)


def logged_sql(statement: ast.Insert) -> str:
    """The INSERT as information_schema.queries shows it (and as a resume runs it again)."""
    return statement.to_string()


def column_names(columns: list[Any]) -> list[str]:
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
