"""A knowledge base's chunks streamed into DuckDB, for a query that reads them all (issue 39).

`SELECT count(*) FROM kb`, a GROUP BY, an ORDER BY or DISTINCT over a knowledge base with no
content search reads every chunk the WHERE keeps. They were read into Python lists (a dict
of metadata per row), then a pandas frame, before DuckDB saw them: count(*) over 400,000
small chunks took a server with a 256 MB SQL memory limit to 1.4 GB. Here the rows are read
in batches of `BATCH` from the storage's cursor (one committed state, on a connection of its
own) into Arrow columns, only those the statement names, under the deadline and a bound of
half the SQL memory limit; DuckDB's limit governs the rest. A DISTINCT of columns keeps only
the distinct rows, and stops reading once a LIMIT has them (kb_select).

The metadata column stays the stored JSON text (the same text the old frame's
`json.dumps` wrote). A metadata key the statement names becomes a column of its own, typed
once all its values are seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kbsql.interface.control import checkpoint
from kbsql.interface.errors import LimitExceeded
from kbsql.interface.results import KB_COLUMNS

BATCH = 4096
Raw = tuple[Any, ...]
"""(id, chunk_id, content, metadata JSON text) of one stored chunk."""
Count = Callable[[list[Any]], "int | None"]
"""Filters -> how many chunks they keep, counted by the storage without reading them (None:
the storage cannot)."""


@dataclass(frozen=True)
class Reader:
    """A fresh read of the chunks a statement selects, in batches, at each call; `count()`
    their number without reading them (None: the storage cannot count them so)."""

    batches: Callable[[], Iterator[list[Raw]]]
    count: Callable[[], int | None] = lambda: None

    def __call__(self) -> Iterator[list[Raw]]:
        return self.batches()


_TEXT_COLUMNS = ("id", "chunk_id", "chunk_content", "metadata")
FRAME_COLUMNS = frozenset({*KB_COLUMNS, "content"})
"""The columns of a knowledge base's frame that are not metadata keys (KB_COLUMNS are lower case)."""


def reader(filters: list[Any] | None, open_read: Callable[[list[Any]], Iterator[list[Raw]] | None],
           count: Count | None = None) -> Reader | None:
    """A fresh read, at each call, of the chunks `filters` keep (`open_read`: the storage's
    `plain_batches`, None when it cannot stream; `count`: its `count_matching`), or None: no
    filters (a WHERE with a content search, whose rows are the search's) or no streaming.
    Asking opens nothing: a read is a generator, which touches the storage only when iterated."""
    if filters is None or open_read(filters) is None:
        return None
    return Reader(lambda: open_read(filters) or iter(()),
                  (lambda: count(filters)) if count is not None else lambda: None)
_INT64 = (-(2**63), 2**63 - 1)


def row_keys(read: Reader, wanted: set[str]) -> tuple[dict[str, str], bool]:
    """(every metadata key of the rows, lower case -> key; whether there is any row), for a
    knowledge base without declared metadata columns whose statement names one: its name is
    resolved against the keys of all rows, not of one batch. Nothing is read when the
    statement names only the knowledge base's own columns."""
    if not wanted - FRAME_COLUMNS:
        return {}, False
    keys: dict[str, str] = {}
    seen = False
    for rows in read():
        checkpoint()
        seen = True
        for row in rows:
            keys.update((k.lower(), k) for k in json.loads(row[3]))
    return keys, seen


def row_cost(row: list[Any]) -> int:
    """About the bytes an answer's row takes in Python: its list, its texts, and a metadata
    dict at about 120 bytes a key (a chunk's row of 211 bytes of text, metadata of 7 keys,
    measured 1,050 bytes; this says 1,171)."""
    return 56 + 8 * len(row) + sum(len(v) + 50 if isinstance(v, str) else
                                   100 + 120 * len(v) if isinstance(v, dict) else 32 for v in row)


def _arrow_type(kinds: set[type], span: tuple[int, int] | None) -> pa.DataType:
    """The column type of a key's values, as pandas and DuckDB typed the old frame: numbers
    of one kind keep it, ints with floats are doubles, anything mixed (or nested) is text."""
    kinds = kinds - {type(None)}
    if not kinds:
        return pa.null()
    if kinds == {bool}:
        return pa.bool_()
    if kinds == {int} and span is not None and _INT64[0] <= span[0] and span[1] <= _INT64[1]:
        return pa.int64()
    if kinds <= {int, float} and kinds != {int}:
        return pa.float64()
    return pa.string()


def chunk_table(read: Reader, wanted: set[str] | None, declared: list[str] | None, bound: int,
                content: bool = True) -> pa.Table:
    """The chunks `read` gives as one Arrow table, built batch by batch under the deadline.

    `wanted`: the lower-case names the statement mentions (None: every column): a column it
    does not name is all nulls (no buffers), and a metadata key it names is a column of its
    own, typed by its values as the old pandas frame was (`_arrow_type`). `bound`: bytes the
    table may take; past it the statement is refused in one line (a count names no column,
    so it is never refused). `content`: add `content`, the chunk's text under the name a
    knowledge base's own SELECT uses.

    Why a table and not a stream DuckDB pulls from: a Python-backed Arrow stream is called
    by DuckDB's threads, which must take the GIL; an interrupt (the statement's deadline)
    then deadlocked or crashed the interpreter at exit (measured, DuckDB 1.5.5)."""
    if wanted is not None and "*" in wanted:  # `kb.*`: every column
        wanted = None
    if wanted is None:  # every column: a declared metadata column is one too
        named = {c.lower() for c in declared or ()} - FRAME_COLUMNS
    else:  # of a knowledge base with declared metadata columns, only those are keys
        named = wanted - FRAME_COLUMNS
        named = named if declared is None else named & {c.lower() for c in declared}
    need = [c for c in _TEXT_COLUMNS if wanted is None or c in wanted or
            (c == "chunk_content" and content and "content" in wanted)]
    parts: dict[str, list[pa.Array]] = {c: [] for c in need}
    values: dict[str, list[Any]] = {}
    kinds: dict[str, set[type]] = {}
    ints: dict[str, tuple[int, int]] = {}
    # a statement that names no column (`count(*)`) needs only how many rows there are
    counted = read.count() if not need and not named else None
    total = size = 0
    for rows in read() if counted is None else ():
        checkpoint()
        for c in need:
            array = pa.array([r[_TEXT_COLUMNS.index(c)] for r in rows], pa.string())
            parts[c].append(array)
            size += array.nbytes
        if named:
            size += _key_values(rows, total, named, declared, values, kinds, ints)
        total += len(rows)
        if size > bound:
            raise LimitExceeded(f"The statement reads more than {bound // 2**20} MB of the knowledge base's "
                                "chunks into the SQL engine (half its memory limit, sql_memory_mb); narrow "
                                "it with a WHERE on id or metadata, or name fewer columns")
    total = total if counted is None else counted
    arrays: list[Any] = []
    names: list[str] = []
    for c in KB_COLUMNS:
        kind = pa.float64() if c in ("relevance", "distance") else pa.string()
        arrays.append(pa.chunked_array(parts[c], kind) if c in parts else pa.nulls(total, kind))
        names.append(c)
    if content:
        arrays.append(arrays[KB_COLUMNS.index("chunk_content")])
        names.append("content")
    for key, found in values.items():
        kind = _arrow_type(kinds[key], ints.get(key))
        found.extend([None] * (total - len(found)))
        if kind == pa.string():
            found = [v if v is None or isinstance(v, str) else json.dumps(v) for v in found]
        arrays.append(pa.array(found, kind))
        names.append(key)
    return pa.Table.from_arrays(arrays, names=names)


def _key_values(rows: list[Raw], before: int, named: set[str], declared: list[str] | None,
                values: dict[str, list[Any]], kinds: dict[str, set[type]],
                ints: dict[str, tuple[int, int]]) -> int:
    """Append the named metadata keys' values of `rows` (row `before` onwards) to `values`;
    a key first seen here gets nulls for the rows before. Returns the bytes they add."""
    keys = None if declared is None else [c for c in declared if c.lower() in named]  # declared order
    for key in keys or ():
        if key not in values:
            values[key], kinds[key] = [None] * before, set()
    for offset, row in enumerate(rows):
        for key, value in json.loads(row[3]).items():
            if keys is not None and key not in keys:
                continue
            if keys is None and key.lower() not in named:
                continue
            if key not in values:
                values[key], kinds[key] = [None] * (before + offset), set()
            found = values[key]
            found.extend([None] * (before + offset - len(found)))
            found.append(value)
            kinds[key].add(type(value))
            if type(value) is int:
                low, high = ints.get(key, (value, value))
                ints[key] = (min(low, value), max(high, value))
    return 16 * len(rows) * len(values)
