"""Following a background insert from a notebook cell until it ends.

`INSERT INTO kb SELECT ... USING batch_size = N` answers at once with the query's row
(ID, SQL, ..., PROCESSED_ROWS, ERROR) and runs on in the service, as MindsDB runs it. A
`%%kbsql` cell then polls `information_schema.queries` for that ID (through the same
client, so it works embedded and over HTTP alike), reports the rows processed as progress
events to the client's bars (the notebook's), and ends when the query does: with its final row, or failing
with its ERROR. Ctrl-C while following cancels the insert (`query_cancel`), keeping what
was stored; `SELECT query_resume(id)` continues it.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from typing import Any, TypeGuard

from kbsql.client.bars import ProgressOption
from kbsql.interface.errors import SqlError
from kbsql.interface.progress import Reporter
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
           progress: ProgressOption = True) -> TableResult:
    """Wait for the query of `result` to end, reporting its progress to the client's bars
    (`progress` as the client's `progress=`: drawn unless False); its last row. A query
    that ends with an ERROR raises it as an SqlError (the cell fails)."""
    query_id = result.rows()[0][0]
    on_progress = client.on_progress(progress) if progress is not False else None
    row = dict(zip(QUERY_COLUMNS, result.rows()[0], strict=True))
    with ExitStack() as ending:  # the task ends with the block: done, or failed with its error
        report: Reporter | None = None
        try:
            while True:
                total = _total(row)
                if report is None and total:
                    report = ending.enter_context(Reporter(on_progress, f"insert (query {query_id})", total))
                if report is not None:
                    report.update(PHASE, min(row["PROCESSED_ROWS"] or 0, total))
                if row["FINISHED_AT"] is not None or row["ERROR"] is not None:
                    break
                time.sleep(poll)
                row = _row(client, query_id)
        except KeyboardInterrupt:
            client.sql(f"SELECT query_cancel({int(query_id)})", raise_on_error=False)
            print(f"interrupted: query {query_id} cancelled after {row['PROCESSED_ROWS'] or 0:,} rows; "
                  f"what was stored stays; SELECT query_resume({query_id}) continues it")
            raise
        if row["ERROR"] is not None:
            raise SqlError(f"query {query_id}: {row['ERROR']}")
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
