"""Tool observations: SQL results rendered as text a model reads well.

`Output columns: 'id', 'chunk_id', ...` then CSV with a header. Knowledge-base metadata keys
that the engine adds are underscore-prefixed and `_updated_at` is present, so the model can
tell them from the user's own metadata columns. Past 30 rows: a summary plus the first 30.
"""

from __future__ import annotations

import json
from typing import Any

from kbsql.interface.observation import parse_table, write_table
from kbsql.interface.results import KB_INTERNAL_METADATA, ErrorResult, OkResult, SqlResult, TableResult

MAX_ROWS = 30
INTERNAL_METADATA = (*KB_INTERNAL_METADATA, "updated_at")


def observation(result: SqlResult, updated_at: str | None = None) -> str:
    if isinstance(result, ErrorResult):
        return f"Error: {result.error_message}"
    if isinstance(result, OkResult):
        return f"Query executed; affected rows: {result.affected_rows}"
    assert isinstance(result, TableResult)
    return table_text(result.column_names, result.data, updated_at)


def table_text(columns: list[str], rows: list[list[Any]], updated_at: str | None = None) -> str:
    note = ""
    if len(rows) > MAX_ROWS:
        note = f"The query returned {len(rows)} rows; the first {MAX_ROWS} are shown."
    elif not rows:
        note = "The query returned no rows."
    cells = [[cell(c, v, updated_at) for c, v in zip(columns, row, strict=False)]
             for row in rows[:MAX_ROWS]]
    return write_table(columns, cells, note)


def cell(column: str, value: Any, updated_at: str | None) -> str:
    if column == "metadata" and isinstance(value, str) and value.startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if column == "metadata" and isinstance(value, dict):
        value = agent_metadata(value, updated_at)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return "" if value is None else str(value)


def agent_metadata(metadata: dict[str, Any], updated_at: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        out[f"_{key}" if key in INTERNAL_METADATA else key] = value
    out.setdefault("_updated_at", updated_at)
    return out


def parse_table_text(text: str) -> list[dict[str, str]]:
    """Rows back out of an observation (the offline agent reads what a model would read)."""
    table = parse_table(text)
    return [] if table is None else table.records()
