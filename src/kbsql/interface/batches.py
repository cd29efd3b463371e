"""The one row batcher: rows to insert, as lists of plain dicts, a batch at a time.

Both sides batch the rows of an insert: the HTTP client into PUTs of `batch_size`, the
engine into the batches it chunks and embeds (knowledge/batch_insert.py). One function does
it for both, with one rule for what rows may be: a DataFrame or an Arrow table (sliced, never
converted whole) or a list, tuple or other iterable of objects (read as it goes). Anything else, and any row
that is not an object, is an `InvalidParameter` naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kbsql.interface.errors import InvalidParameter


def row_batches(rows: Any, size: int) -> Iterator[list[dict[str, Any]]]:
    """`rows` in lists of at most `size` dicts (a row that is already a dict is not copied)."""
    if hasattr(rows, "iloc") and hasattr(rows, "columns"):  # a DataFrame, sliced lazily
        for start in range(0, len(rows), size):
            yield rows.iloc[start:start + size].to_dict("records")
        return
    if hasattr(rows, "slice") and hasattr(rows, "schema"):  # an Arrow table: the same dicts as
        for start in range(0, len(rows), size):                # its frame's, a batch at a time
            yield rows.slice(start, size).to_pandas().to_dict("records")
        return
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise InvalidParameter("rows must be a list of objects or a DataFrame")
    batch: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, Mapping):
            raise InvalidParameter("each row must be an object (column -> value)")
        batch.append(row if type(row) is dict else dict(row))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
