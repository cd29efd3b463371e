"""`information_schema.queries` (docs/mindsdb_sql/knowledge_bases/insert_data.mdx): the
INSERTs into knowledge bases, with when they started and finished, the rows processed and
the error, as MindsDB's QueriesTable lists them (its columns, in its order).

Kept in memory for the life of the engine, so it lists the inserts of this process since
it started: in a notebook the kernel's own engine, behind `kbsql serve` every client's.
(The reference keeps its queries in its database, across restarts.) An insert here runs to
completion within its statement, so there is nothing to cancel or resume (`query_cancel` /
`query_resume` are refused); one stopped by Ctrl-C is listed with ERROR `interrupted: ...`
and the rows it stored.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

COLUMNS = ["ID", "STARTED_AT", "FINISHED_AT", "PROCESSED_ROWS", "ERROR", "SQL", "DATABASE", "PARAMETERS",
           "CONTEXT", "UPDATED_AT"]
KEEP = 1000


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _error_line(exc: BaseException) -> str:
    """The ERROR column: the first line of the error's message. Ctrl-C is `interrupted`
    (its KeyboardInterrupt may have no message at all), any other silent error its type."""
    text = str(getattr(exc, "message", None) or exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, KeyboardInterrupt):
        first = f"interrupted: {first}" if first else "interrupted"
    return (first or type(exc).__name__)[:500]


class QueryLog:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._rows: deque[dict[str, Any]] = deque(maxlen=KEEP)
        self._lock = threading.Lock()

    @contextmanager
    def track(self, sql: str, database: str, parameters: dict[str, Any] | None = None
              ) -> Iterator[dict[str, Any]]:
        """Record one statement; the caller sets `row["PROCESSED_ROWS"]` as it goes."""
        row = {"ID": next(self._ids), "STARTED_AT": _now(), "FINISHED_AT": None, "PROCESSED_ROWS": 0,
               "ERROR": None, "SQL": sql, "DATABASE": database,
               "PARAMETERS": json.dumps(parameters or {}, default=str),
               "CONTEXT": json.dumps({"db": database}),
               "UPDATED_AT": _now()}
        with self._lock:
            self._rows.append(row)
        try:
            yield row
        except BaseException as exc:
            row["ERROR"] = _error_line(exc)
            stored = getattr(exc, "stored", None)  # an interrupted insert says what it kept
            if isinstance(stored, int):
                row["PROCESSED_ROWS"] = stored
            raise
        finally:
            row["FINISHED_AT"] = row["UPDATED_AT"] = _now()

    def rows(self) -> list[list[Any]]:
        with self._lock:
            return [[r[c] for c in COLUMNS] for r in self._rows]
