"""Arrow result -> `TableResult`, computed lazily and column-wise.

The rows (`data`) and the DataFrame (`frame`) are both derived from the Arrow table on
first access: an embedded `to_pandas()` never builds Python rows, and an HTTP answer never
builds a DataFrame. Types follow JSON: dates and timestamps become ISO strings, decimals
numbers, NaN null (Arrow compute does the conversion per column, not per row).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kbsql.interface.results import TableResult


def json_column(column: pa.ChunkedArray) -> list[Any]:
    """One column as JSON-faithful Python values."""
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


def _decimal_float(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Through the decimal text, so 19.99 stays 19.99 (a binary cast gives 19.990000000000002)."""
    return pc.cast(pc.cast(column, pa.string()), pa.float64())


class ArrowTableResult(TableResult):
    """A `TableResult` backed by an Arrow table; `data` and `frame` are built on demand."""

    def __init__(self, table: pa.Table, context: dict[str, Any], column_names: list[str] | None = None):
        self._table = table
        self._data: list[list[Any]] | None = None
        self._frame: Any = None
        super().__init__(list(column_names or table.column_names), None, context)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def data(self) -> list[list[Any]]:
        if self._data is None:
            columns = [json_column(c) for c in self._table.columns]
            self._data = list(map(list, zip(*columns, strict=True))) if columns else []
        return self._data

    @data.setter
    def data(self, value: list[list[Any]] | None) -> None:
        self._data = value

    @property  # type: ignore[override]
    def frame(self) -> Any:
        if self._frame is None:
            frame = self._table.to_pandas()
            frame.columns = list(self.column_names)
            self._frame = frame
        return self._frame

    @frame.setter
    def frame(self, value: Any) -> None:
        self._frame = value

    @property
    def arrow(self) -> pa.Table:
        return self._table

    def __len__(self) -> int:
        return self._table.num_rows


def table_result(columns: dict[str, list[Any]], context: dict[str, Any]) -> ArrowTableResult:
    """A small result made by the engine (SHOW ..., DESCRIBE ...)."""
    return ArrowTableResult(pa.table(columns) if columns else pa.table({}), context)
