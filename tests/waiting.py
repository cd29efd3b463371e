"""Waiting for a background insert (`INSERT ... SELECT ... USING batch_size`) in tests: its
information_schema.queries row, polled until a condition holds (embedded or over HTTP:
the caller says how to read the row)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Row = dict[str, Any]


def ended(row: Row) -> bool:
    """The query finished or stopped (ERROR: failed or cancelled)."""
    return row["FINISHED_AT"] is not None or row["ERROR"] is not None


def wait_for(read: Callable[[], Row], until: Callable[[Row], bool] = ended, timeout: float = 60.0) -> Row:
    """Poll `read()` (the query's row) until `until(row)`; the row. Fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        row = read()
        if until(row):
            return row
        assert time.monotonic() < deadline, f"still waiting: {row}"
        time.sleep(0.01)


def queries_sql(query_id: int) -> str:
    return f"SELECT * FROM information_schema.queries WHERE ID = {int(query_id)}"
