"""Rows fetched by a DB-API driver -> an Arrow table, column by column (no per-row Python)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def rows_to_arrow(names: list[str], rows: list[tuple[Any, ...]]) -> pa.Table:
    """Arrow infers each column's type; a column of mixed types (SQLite allows it) is text."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = []
    for values in columns:
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    return pa.Table.from_arrays(arrays, names=unique(names))


def unique(names: list[str]) -> list[str]:
    """Column names made unique (`id`, `id_2`), as DuckDB does for a registered frame."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name.lower(), 0) + 1
        seen[name.lower()] = count
        out.append(name if count == 1 else f"{name}_{count}")
    return out
