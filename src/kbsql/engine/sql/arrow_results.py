"""Arrow result -> `TableResult`, computed lazily and column-wise.

The rows (`data`) and the DataFrame (`frame`) are both derived from the Arrow table on
first access: an embedded `to_pandas()` never builds Python rows, and an HTTP answer never
builds a DataFrame. Types follow JSON: dates and timestamps become ISO strings, decimals
numbers, NaN null (Arrow compute does the conversion per column, not per row).

A struct whose fields have no names or repeat a name (a SQL row value: `SELECT (1, 2)`,
`row(1, 2)`) has no faithful dict form, so it becomes a list of its values; other structs
become dicts. Such columns are converted once, when the result is made, so a failure there is
an SQL error answer and never a crash while the answer is being sent.

Rows computed in Python (a knowledge-base search, EVALUATE) become the same result through
`ArrowTableResult.from_rows`, so `client.query()` gives the same dtypes for them as for any
other SELECT. A column whose values Arrow cannot hold as one flat type (metadata dicts of
varying keys, lists, mixed types) is JSON text in the Arrow table (DuckDB's `->>` reads it)
and keeps its Python values as they are in the rows and the DataFrame.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from kbsql.interface.errors import SqlError
from kbsql.interface.results import SCORE_COLUMNS, TableResult


def json_column(column: pa.ChunkedArray) -> list[Any]:
    """One column as JSON-faithful Python values. (`pyarrow.compute` loads here, on the first
    column that needs it: 70 ms of a served engine's first statement otherwise.)"""
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_date(kind) or pa.types.is_timestamp(kind) or pa.types.is_time(kind):
        column = pc.cast(column, pa.string())
    elif pa.types.is_decimal(kind):
        try:  # whole numbers (e.g. DuckDB's HUGEINT sums) stay integers when they fit
            column = pc.cast(column, pa.int64()) if kind.scale == 0 else _decimal_float(column)
        except pa.ArrowInvalid:
            column = _decimal_float(column)
    elif pa.types.is_floating(kind):
        column = pc.if_else(pc.is_nan(column), pa.scalar(None, kind), column)
    elif pa.types.is_dictionary(kind):
        column = column.cast(kind.value_type)
    return column.to_pylist()


def _row_like(kind: pa.DataType) -> bool:
    """A struct whose field names cannot be dict keys: empty or repeated."""
    names = [kind.field(i).name for i in range(kind.num_fields)]
    return "" in names or len(set(names)) < len(names)


def _needs_python(kind: pa.DataType) -> bool:
    """Whether a type holds, at any depth, a struct that must become a list."""
    if pa.types.is_struct(kind):
        return _row_like(kind) or any(_needs_python(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _needs_python(kind.key_type) or _needs_python(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _needs_python(kind.value_type)
    return False


def _python_values(array: pa.Array) -> list[Any]:
    """Array -> Python values, row-like structs as lists (children converted column-wise)."""
    kind = array.type
    if not _needs_python(kind):
        return json_column(pa.chunked_array([array], type=kind))
    valid = array.is_valid().to_pylist()
    if pa.types.is_struct(kind):
        children = [_python_values(child) for child in array.flatten()]
        names = [kind.field(i).name for i in range(kind.num_fields)]
        as_list = _row_like(kind)
        return [(list(values) if as_list else dict(zip(names, values, strict=True))) if ok else None
                for ok, *values in zip(valid, *children, strict=True)] if children else \
            [([] if as_list else {}) if ok else None for ok in valid]
    # lists and maps: the flattened values of the valid rows, cut back by each row's length
    flat = _python_values(array.flatten())
    if pa.types.is_map(kind):  # a map reads as [(key, value), ...], as Arrow's own as_py does
        flat = [tuple(item.values()) if isinstance(item, dict) else tuple(item) for item in flat]
    if pa.types.is_fixed_size_list(kind):
        lengths = [kind.list_size if ok else None for ok in valid]
    else:
        lengths = array.value_lengths().to_pylist()
    out: list[Any] = []
    at = 0
    for length in lengths:
        if length is None:
            out.append(None)
        else:
            out.append(flat[at:at + length])
            at += length
    return out


def _python_column(name: str, column: pa.ChunkedArray) -> list[Any]:
    try:
        return [value for chunk in column.chunks for value in _python_values(chunk)]
    except Exception as exc:  # any failure is the user's to see as an SQL error, never a 500
        raise SqlError(f"Column {name!r} of type {column.type} cannot be returned: {exc}") from exc


def _decimal_float(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Through the decimal text, so 19.99 stays 19.99 (a binary cast gives 19.990000000000002)."""
    import pyarrow.compute as pc

    return pc.cast(pc.cast(column, pa.string()), pa.float64())


JSON_COLUMNS = b"kbsql.json_columns"  # schema metadata: comma-separated names of JSON-text columns
THREADED_ROWS = 1_000_000
"""Rows from which Arrow's to_pandas converts columns on several threads. Below, one thread is
faster (2-core machine, 5 columns, str + float + int): 10 rows 0.38 vs 0.58 ms, 10k 0.33 vs
0.53, 100k 0.85 vs 4.4; at 1M the same 12.6 ms. A knowledge-base search's 10 rows as a
DataFrame (client.query) spent ~0.2 ms of its ~1 ms conversion starting threads."""


def _json_values(column: pa.ChunkedArray) -> list[Any]:
    return [json.loads(v) if isinstance(v, str) else v for v in column.to_pylist()]


def _is_nested(kind: pa.DataType) -> bool:
    return pa.types.is_nested(kind) or pa.types.is_union(kind)


def _arrow_column(name: str, values: list[Any]) -> tuple[pa.Array, bool]:
    """(Arrow array, kept as Python values?) of one column of Python rows."""
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        array = None
    if array is None or _is_nested(array.type):
        text = [None if v is None else json.dumps(v, default=str) for v in values]
        return pa.array(text, pa.string()), True
    if pa.types.is_null(array.type) and name.lower() in SCORE_COLUMNS:
        array = pa.array(values, pa.float64())
    return array, False


class ArrowTableResult(TableResult):
    """A `TableResult` backed by an Arrow table; `data` and `frame` are built on demand."""

    def __init__(self, table: pa.Table, context: dict[str, Any], column_names: list[str] | None = None,
                 python: dict[int, list[Any]] | None = None):
        """`python`: columns (by position) whose values are given as Python values (the Arrow
        column then holds their JSON text); see `from_rows`."""
        self._table = table
        self._data: list[list[Any]] | None = None
        self._frame: Any = None
        super().__init__(list(column_names or table.column_names), None, context)  # type: ignore[arg-type]
        self._python = {i: _python_column(self.column_names[i], column)  # rare: row values
                        for i, column in enumerate(table.columns) if _needs_python(column.type)}
        marked = (table.schema.metadata or {}).get(JSON_COLUMNS, b"").decode().split(",")
        for i, name in enumerate(table.column_names):  # a knowledge base's metadata: objects
            if name in marked and pa.types.is_string(table.field(i).type):
                try:
                    self._python[i] = _json_values(table.column(i))
                except ValueError:  # not JSON after all (a user's own column): leave it
                    pass
        self._python.update(python or {})

    @classmethod
    def from_rows(cls, names: Sequence[str], rows: list[list[Any]],
                  context: dict[str, Any]) -> ArrowTableResult:
        """Rows computed in Python as an Arrow-backed result (see the module docstring)."""
        names = list(names)
        arrays, python = [], {}
        for i, name in enumerate(names):
            values = [row[i] for row in rows]
            array, keep = _arrow_column(name, values)
            arrays.append(array)
            if keep:
                python[i] = values
        table = pa.Table.from_arrays(arrays, names=names)
        return cls(table, context, names, python)

    @property  # type: ignore[override]
    def data(self) -> list[list[Any]]:
        if self._data is None:
            columns = [self._python[i] if i in self._python else json_column(c)
                       for i, c in enumerate(self._table.columns)]
            self._data = list(map(list, zip(*columns, strict=True))) if columns else []
        return self._data

    @data.setter
    def data(self, value: list[list[Any]] | None) -> None:
        self._data = value

    @property  # type: ignore[override]
    def frame(self) -> Any:
        if self._frame is None:
            table = self._table
            for i in self._python:  # Arrow would make dicts of them, losing repeated fields
                table = table.set_column(i, table.field(i).name, pa.nulls(table.num_rows))
            frame = table.to_pandas(use_threads=table.num_rows >= THREADED_ROWS)
            frame.columns = list(self.column_names)
            for i, values in self._python.items():
                frame.isetitem(i, pd_object_series(values, frame.index))
            self._frame = frame
        return self._frame

    @frame.setter
    def frame(self, value: Any) -> None:
        self._frame = value

    @property
    def arrow(self) -> pa.Table:
        return self._table

    @property
    def python_columns(self) -> Mapping[int, list[Any]]:
        return self._python

    def __len__(self) -> int:
        return self._table.num_rows


def pd_object_series(values: list[Any], index: Any) -> Any:
    """A pandas object column holding `values` as they are (lists stay lists)."""
    import numpy as np
    import pandas as pd

    column = np.empty(len(values), dtype=object)  # filled one by one: a list value is one item
    for at, value in enumerate(values):
        column[at] = value
    return pd.Series(column, index=index, dtype=object, copy=False)  # (.iat per value: 6x slower)
