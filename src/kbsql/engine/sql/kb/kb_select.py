"""SELECT on one knowledge base, read like a table (docs/mindsdb_sql/knowledge_bases/query.mdx).

The WHERE clause becomes searches and filters (`kb_where`). A SELECT of columns (`*`, `id`,
`chunk_content`, a metadata column by name) is answered from those rows directly; anything
else (`count(*)`, aggregates, GROUP BY, ORDER BY, DISTINCT, expressions) runs on the engine's
SQL session over every row the WHERE selects: then a search is not capped at the default 10
rows, which would quietly corrupt a count or an order. Names are case-insensitive and an
unknown column is an error, never a column of nulls.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
from mindsdb_sql_parser import ast

from kbsql.engine.knowledge.search import DEFAULT_LIMIT
from kbsql.engine.sql.kb import kb_stream
from kbsql.engine.sql.kb.kb_columns import Columns
from kbsql.engine.sql.kb.kb_conditions import count
from kbsql.engine.sql.kb.kb_where import (
    Search,
    Subquery,
    one_search,
    read_filters,
    run_where,
)
from kbsql.engine.sql.tables.sqlglot_render import walk
from kbsql.interface.control import checkpoint
from kbsql.interface.errors import LimitExceeded, SqlError, one_line
from kbsql.interface.results import KB_COLUMNS

Row = list[Any]
RunOver = Callable[[ast.Select, Any], Any]
"""(statement reading `kb_frame`, that frame) -> its answer as an Arrow table."""
Stream = Callable[[list[Any]], "Iterator[list[kb_stream.Raw]] | None"]
"""Filters -> a new read of the chunks they keep, in batches (None: the storage cannot)."""
KnownKeys = tuple[dict[str, str], bool]
_MISSING = re.compile(r'column "?([^"\s]+)"? not found', re.IGNORECASE)


class FrameColumns(SqlError):
    """DuckDB refused the statement over the rows' frame for its columns: a name it lacks, or
    a type that does not fit. A frame of a search's first rows only (`_in_search_order`) is
    typed from those rows, so its caller reads every row before answering so."""


def is_plain(statement: ast.Select) -> bool:
    """Only columns selected, nothing to group, order or aggregate (DISTINCT is kept here, so
    `SELECT DISTINCT id ... LIMIT 1` keeps the best-first order of a search)."""
    if statement.group_by or statement.having or statement.order_by:
        return False
    return all(isinstance(t, ast.Star) or (isinstance(t, ast.Identifier) and not
                                           isinstance(t.parts[-1], ast.Star))
               for t in statement.targets)


def select_rows(statement: ast.Select, name: str, columns: Columns, search: Search,
                total: Callable[[], int], run: RunOver, subquery: Subquery | None = None,
                stream: Stream | None = None, read_bound: int = 0,
                ranked: bool = False, counter: kb_stream.Count | None = None) -> tuple[list[str], list[Row]]:
    """(column names, rows) of a SELECT on knowledge base `name`. `stream` (filters -> the
    matching chunks in batches, or None when the storage cannot) lets a statement that reads
    every chunk the WHERE keeps, without a content search, read them in batches into Arrow
    columns of at most `read_bound` bytes (kb_stream). `ranked`: a search's rows come ordered by
    their relevance (no reranker reorders them), so an ORDER BY relevance with a LIMIT reads
    only the search's first rows. `counter` (filters -> the number of chunks they keep, or None)
    answers a statement that names no column of the chunks (`count(*)`) without reading them.
    `columns`: the knowledge base's (kb_columns.Columns.of)."""
    metadata_columns = columns.listed
    limit = count(statement.limit, "LIMIT") if statement.limit is not None else None
    offset = count(statement.offset, "OFFSET") if statement.offset is not None else 0
    if statement.distinct or not is_plain(statement) or limit is None:
        read = _reader(statement.where, stream, columns, subquery, counter)
        if read is not None and is_plain(statement) and not statement.distinct:
            return _plain_streamed(statement.targets, read, metadata_columns, offset, read_bound)
        if read is not None and is_plain(statement):
            return _distinct_streamed(statement.targets, read, metadata_columns, offset, limit)
        if read is not None:
            return _run_over(statement, name, metadata_columns, run, lambda wanted: kb_stream.chunk_table(
                read, wanted, metadata_columns, read_bound))
    where = functools.partial(run_where, statement.where, search, columns, subquery=subquery)
    if is_plain(statement) and statement.distinct:
        rows = where(limit=None, cap=max(total(), 1))
        checkpoint()  # every row was read: the deadline may have passed meanwhile
        names, out = project(statement.targets, rows, metadata_columns)
        unique = _first_seen(out)
        return names, unique[offset:] if limit is None else unique[offset:offset + limit]
    if is_plain(statement):
        rows = where(limit=None if limit is None else limit + offset, cap=DEFAULT_LIMIT + offset)
        return project(statement.targets, rows[offset:], metadata_columns)
    first = limit + offset if limit is not None and ranked and _in_search_order(statement) else None
    rows = where(limit=first, cap=max(total(), 1))
    checkpoint()  # before the rows become a frame (a SELECT DISTINCT over 400,000 answered 3 s late)
    if first is not None:
        try:
            return run_in_duckdb(statement, name, rows, metadata_columns, run)
        except FrameColumns:  # the first rows lack a key others have, or hold it as another kind
            rows = where(limit=None, cap=max(total(), 1))
            checkpoint()
    return run_in_duckdb(statement, name, rows, metadata_columns, run)


@functools.cache
def _scalar_functions() -> frozenset[str]:
    """DuckDB's functions that are scalar only (not also an aggregate under the same name)."""
    kinds: dict[str, set[str]] = {}
    for name, kind in duckdb.sql("SELECT function_name, function_type FROM duckdb_functions()").fetchall():
        kinds.setdefault(str(name).lower(), set()).add(str(kind))
    return frozenset(name for name, found in kinds.items() if found == {"scalar"})


def _in_search_order(statement: ast.Select) -> bool:
    """`... WHERE content = 'x' ORDER BY relevance DESC LIMIT n` (or distance ascending), with
    no aggregate, window, GROUP BY or DISTINCT: the search's own first n rows are the answer,
    so it searches for n, not for every row (a search for every row of 200,000 chunks took
    8.9 s and 524 MB to answer a LIMIT 3)."""
    if statement.distinct or statement.group_by or statement.having or len(statement.order_by or []) != 1:
        return False
    order = statement.order_by[0]
    if not isinstance(order.field, ast.Identifier) or str(order.nulls or "default").lower() != "default":
        return False
    if any(t.alias is not None and str(t.alias.parts[-1]).lower() in ("relevance", "distance")
           for t in statement.targets if not isinstance(t, ast.Star)):
        return False  # an alias may name another expression so
    column, direction = str(order.field.parts[-1]).lower(), str(order.direction or "ASC").upper()
    if (column, direction) not in (("relevance", "DESC"), ("distance", "ASC"), ("distance", "DEFAULT")):
        return False
    for node in walk(statement.targets):
        if isinstance(node, ast.WindowFunction) or isinstance(node, ast.Select) or (
                isinstance(node, ast.Function) and str(node.op).lower() not in _scalar_functions()):
            return False
    return one_search(statement.where)


def _reader(where: ast.ASTNode | None, stream: Stream | None, columns: Columns,
            subquery: Subquery | None, counter: kb_stream.Count | None = None) -> kb_stream.Reader | None:
    """A fresh read of the chunks a WHERE without a content search keeps, or None (a search:
    its rows are the search's; or a storage that cannot stream)."""
    if stream is None:
        return None
    return kb_stream.reader(read_filters(where, columns, subquery=subquery), stream, counter)


def _projected(targets: list[ast.ASTNode], read: kb_stream.Reader, metadata_columns: list[str] | None
               ) -> tuple[list[str], Iterator[list[Row]]]:
    """(column names, each batch's rows projected to them) of a SELECT of columns over every
    chunk, under the deadline. A name is resolved against the keys of every row (a first read
    of them, `row_keys`, for a knowledge base without declared metadata columns), not of one
    batch, so a key only later rows hold is no "unknown column"."""
    wanted = {str(t.parts[-1]).lower() for t in targets if isinstance(t, ast.Identifier)}
    known = kb_stream.row_keys(read, wanted) if metadata_columns is None else ({}, False)
    names, _ = project(targets, [], metadata_columns, known)  # an unknown name fails here, before a read

    def batches() -> Iterator[list[Row]]:
        for batch in read():
            checkpoint()
            rows = [[r[0], r[1], r[2], json.loads(r[3]), None, None] for r in batch]
            yield project(targets, rows, metadata_columns, known)[1]
    return names, batches()


def _distinct_streamed(targets: list[ast.ASTNode], read: kb_stream.Reader, metadata_columns: list[str] | None,
                       offset: int, limit: int | None) -> tuple[list[str], list[Row]]:
    """SELECT DISTINCT of columns over every chunk, in batches, first-seen order: Python holds
    the distinct rows only, and a LIMIT stops the read once it has them."""
    names, batches = _projected(targets, read, metadata_columns)
    seen: set[str] = set()
    unique: list[Row] = []
    for rows in batches:
        unique.extend(_first_seen(rows, seen))
        if limit is not None and len(unique) >= offset + limit:
            break
    return names, unique[offset:] if limit is None else unique[offset:offset + limit]


def _plain_streamed(targets: list[ast.ASTNode], read: kb_stream.Reader, metadata_columns: list[str] | None,
                    offset: int, bound: int) -> tuple[list[str], list[Row]]:
    """SELECT of columns with no LIMIT and no content search (every chunk the WHERE keeps),
    in batches under the deadline, refused in one line once its rows would take more than
    `bound` bytes. It was read whole into Python rows with no look at either: over 200,000
    chunks `SELECT * FROM kb` answered 11.4 s past a 3 s deadline and grew a server with
    256 MB for SQL by 427 MB (doors13)."""
    names, batches = _projected(targets, read, metadata_columns)
    out: list[Row] = []
    size = 0
    for kept in batches:
        size += sum(kb_stream.row_cost(r) for r in kept)  # what the answer keeps: the columns named
        if size > bound:
            raise LimitExceeded(f"The statement answers more than {bound // 2**20} MB of the knowledge "
                                "base's chunks (half the SQL memory limit, sql_memory_mb); narrow it with a "
                                "WHERE on id or metadata, or a LIMIT")
        out.extend(kept)
    return names, out[offset:]


def _first_seen(rows: list[Row], seen: set[str] | None = None) -> list[Row]:
    """The rows not seen before, in order (`seen`: the keys of rows seen before, added to)."""
    seen = set() if seen is None else seen
    out = []
    for n, row in enumerate(rows):
        if n % 4096 == 0:
            checkpoint()
        key = json.dumps(row, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _row_column(name: str) -> int | None:
    lowered = "chunk_content" if name.lower() == "content" else name.lower()
    return KB_COLUMNS.index(lowered) if lowered in KB_COLUMNS else None


def _metadata_key(name: str, rows: list[Row], metadata_columns: list[str] | None,
                  known: KnownKeys | None = None) -> str:
    """The metadata key a selected name reads, or an error naming what exists. `known`: the
    keys of every row (lower case -> key) and whether there was any, when `rows` are one batch."""
    if metadata_columns is not None:
        try:
            return Columns(metadata_columns).resolve(name)
        except SqlError:
            pass
    else:
        keys, any_row = known if known is not None else \
            ({k.lower(): k for r in rows for k in (r[3] or {})}, bool(rows))
        if name.lower() in keys or not any_row:
            return keys.get(name.lower(), name)
    known_names = metadata_columns if metadata_columns is not None else \
        sorted(known[0].values()) if known is not None else sorted({k for r in rows for k in (r[3] or {})})
    raise SqlError(f"Unknown column {name!r} in a knowledge base: the columns are {list(KB_COLUMNS)} "
                   f"and the metadata columns {known_names}")


def project(targets: list[ast.ASTNode], rows: list[Row], metadata_columns: list[str] | None,
            known: KnownKeys | None = None) -> tuple[list[str], list[Row]]:
    """Keep the selected columns; a name that is not a result column reads a metadata key."""
    if len(targets) == 1 and isinstance(targets[0], ast.Star):
        return list(KB_COLUMNS), rows
    picks: list[tuple[str, int | str]] = []
    for target in targets:
        if isinstance(target, ast.Star):
            picks.extend((c, i) for i, c in enumerate(KB_COLUMNS))
            continue
        column = str(target.parts[-1])
        name = str(target.alias.parts[-1]) if target.alias is not None else column
        index = _row_column(column)
        picks.append((name, index if index is not None else
                      _metadata_key(column, rows, metadata_columns, known)))
    out = [[row[p] if isinstance(p, int) else (row[3] or {}).get(p) for _, p in picks] for row in rows]
    return [n for n, _ in picks], out


def _frame(rows: list[Row], metadata_columns: list[str] | None, wanted: set[str]) -> Any:
    """The rows as a DataFrame: the KB columns, `content`, and one column per metadata key the
    statement names (`wanted`, lower case). Every key of every row made rows x keys cells: 6,000
    chunks of one key each (JSON chunking) took a 256 MB server to 1.1 GB before the query ran."""
    import pandas as pd

    keys = list(metadata_columns) if metadata_columns is not None else \
        list(dict.fromkeys(k for r in rows for k in (r[3] or {}) if k.lower() in wanted))
    keys = [k for k in keys if k.lower() not in kb_stream.FRAME_COLUMNS]
    data: dict[str, list[Any]] = {c: [r[i] for r in rows] for i, c in enumerate(KB_COLUMNS)}
    data["metadata"] = [None if r[3] is None else json.dumps(r[3], default=str) for r in rows]
    data["content"] = data["chunk_content"]
    for key in keys:
        data[key] = [(r[3] or {}).get(key) for r in rows]
    frame = pd.DataFrame(data)
    for column in ("relevance", "distance"):
        frame[column] = frame[column].astype("float64")
    return frame


def run_in_duckdb(statement: ast.Select, name: str, rows: list[Row], metadata_columns: list[str] | None,
                  run: RunOver) -> tuple[list[str], list[Row]]:
    """The statement over rows already read (a search's) as table `kb_frame`."""
    return _run_over(statement, name, metadata_columns, run,
                     lambda wanted: _frame(rows, metadata_columns, wanted))


def _run_over(statement: ast.Select, name: str, metadata_columns: list[str] | None, run: RunOver,
              table: Callable[[set[str]], Any]) -> tuple[list[str], list[Row]]:
    """The statement over `table(names it mentions)` as table `kb_frame`, run by `run` (the
    engine's SQL session: the memory limit, per-value caps and deadline of every SELECT hold
    here too; a private DuckDB had none of them, and `length(repeat(content, 20000000))` over
    two rows ran past a 3 s deadline and grew a 256 MB engine by 1 GB)."""
    query = copy.deepcopy(statement)
    alias = statement.from_table.alias if getattr(statement.from_table, "alias", None) is not None \
        else ast.Identifier(str(statement.from_table.parts[-1]))
    query.from_table = ast.Identifier(parts=["kb_frame"], alias=alias)
    query.where = None
    targets: list[ast.ASTNode] = []
    for target in query.targets:  # `*` is the contract's six columns, not the helper ones
        if isinstance(target, ast.Star):
            targets.extend(ast.Identifier(c) for c in KB_COLUMNS)
        else:
            targets.append(target)
    query.targets = targets
    try:
        names_only = {id(alias), id(query.from_table), *(id(t.alias) for t in targets if t.alias is not None)}
        nodes = [n for n in walk(query) if id(n) not in names_only]  # the table's and the answer's own names
        wanted = {str(part).lower() for node in nodes if isinstance(node, ast.Identifier)
                  for part in node.parts}
        own = [str(alias.parts[-1]).lower()]
        if any((isinstance(n, ast.Identifier) and [str(p).lower() for p in n.parts] == own) or
               (isinstance(n, ast.Function) and str(n.op).lower() == "columns") for n in nodes):
            wanted = {"*"}  # `to_json(kb)`, `COLUMNS('chunk_.*')`: whole rows, though no column is named
        answer = run(query, table(wanted))
    except duckdb.BinderException as exc:
        missing = _MISSING.search(str(exc))
        if missing:
            raise FrameColumns(f"Unknown column {missing.group(1)!r} in knowledge base {name}: the "
                               f"columns are {list(KB_COLUMNS)} and the metadata columns "
                               f"{metadata_columns if metadata_columns is not None else 'of its rows'}"
                               ) from None
        raise FrameColumns(_first_line(exc)) from None
    except duckdb.ConversionException as exc:
        raise FrameColumns(_first_line(exc)) from None
    except duckdb.Error as exc:
        raise SqlError(_first_line(exc)) from None
    names = list(answer.column_names)
    out = [list(r) for r in zip(*(c.to_pylist() for c in answer.columns), strict=True)] \
        if names else []
    if "metadata" in names:
        i = names.index("metadata")
        for row in out:
            if isinstance(row[i], str):
                row[i] = json.loads(row[i])
    return names, out


def _first_line(exc: Exception) -> str:
    return one_line(str(exc)) or type(exc).__name__
