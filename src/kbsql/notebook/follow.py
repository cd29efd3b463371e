"""Following a background insert from a notebook cell until it ends.

`INSERT INTO kb SELECT ... USING batch_size = N` answers at once with the query's row
(ID, SQL, ..., PROCESSED_ROWS, ERROR) and runs on in the service, as MindsDB runs it. A
`%%kbsql` cell then polls `information_schema.queries` for that ID (through the same
client, so it works embedded and over HTTP alike), shows the rows processed on the
notebook's progress bar, and ends when the query does: with its final row, or failing
with its ERROR. Ctrl-C while following cancels the insert (`query_cancel`), keeping what
was stored; `SELECT query_resume(id)` continues it.
"""

from __future__ import annotations

import json
import time
from typing import Any, TypeGuard

from kbsql.interface import progress as progress_mod
from kbsql.interface.errors import SqlError
from kbsql.interface.results import TableResult

QUERY_COLUMNS = ("ID", "SQL", "DATABASE", "STARTED_AT", "FINISHED_AT", "PARAMETERS", "CONTEXT",
                 "PROCESSED_ROWS", "ERROR", "UPDATED_AT")
POLL_SECONDS = 0.25
PHASE = "inserting"


def is_background(result: Any) -> TypeGuard[TableResult]:
    """Whether a statement's answer is a query that goes on in the background."""
    return isinstance(result, TableResult) and tuple(result.column_names) == QUERY_COLUMNS and \
        len(result.rows()) == 1 and not result.rows()[0][QUERY_COLUMNS.index("FINISHED_AT")]


def follow(client: Any, result: TableResult, poll: float = POLL_SECONDS,
           progress: bool | progress_mod.ProgressFactory | None = True) -> TableResult:
    """Wait for the query of `result` to end, drawing its progress; its last row. A query
    that ends with an ERROR raises it as an SqlError (the cell fails)."""
    query_id = result.rows()[0][0]
    bar: progress_mod.Progress | None = None
    row = dict(zip(QUERY_COLUMNS, result.rows()[0], strict=True))
    try:
        while True:
            total = _total(row)
            if bar is None and total:
                bar = progress_mod.open_progress(f"insert (query {query_id})", total, progress=progress)
            if bar is not None and total:
                bar.update(PHASE, min(row["PROCESSED_ROWS"] or 0, total), total)
            if row["FINISHED_AT"] is not None or row["ERROR"] is not None:
                break
            time.sleep(poll)
            row = _row(client, query_id)
    except KeyboardInterrupt as exc:
        client.sql(f"SELECT query_cancel({int(query_id)})", raise_on_error=False)
        if bar is not None:
            bar.close(exc)
        print(f"interrupted: query {query_id} cancelled after {row['PROCESSED_ROWS'] or 0:,} rows; "
              f"what was stored stays; SELECT query_resume({query_id}) continues it")
        raise
    if row["ERROR"] is not None:
        failure = SqlError(f"query {query_id}: {row['ERROR']}")
        if bar is not None:
            bar.close(failure)
        raise failure
    if bar is not None:
        bar.close()
    return TableResult(list(QUERY_COLUMNS), [[row[c] for c in QUERY_COLUMNS]], context=dict(result.context))


def _row(client: Any, query_id: Any) -> dict[str, Any]:
    answer = client.sql(f"SELECT * FROM information_schema.queries WHERE ID = {int(query_id)}")
    rows = answer.rows()
    if not rows:
        raise SqlError(f"query {query_id} is no longer listed in information_schema.queries")
    return dict(zip(answer.column_names, rows[0], strict=True))


def _total(row: dict[str, Any]) -> int:
    """The rows the insert reads (known once it has run its SELECT), from CONTEXT."""
    context = row.get("CONTEXT")
    try:
        value = json.loads(context) if isinstance(context, str) else context or {}
    except ValueError:
        return 0
    total = value.get("total_rows") if isinstance(value, dict) else None
    return int(total) if isinstance(total, int) else 0
