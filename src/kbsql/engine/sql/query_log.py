"""`information_schema.queries` (docs/mindsdb_sql/knowledge_bases/insert_data.mdx): the
`INSERT INTO kb SELECT ...` statements, with when they started and finished, the rows
processed and the error, in MindsDB's columns and order (its QueriesTable).

Kept in the catalog (`queries` table, catalog_schema.py), as MindsDB keeps them in its
database: the list is server-wide (every connection, every process on the data directory,
every server sharing a PostgreSQL catalog sees the same queries) and survives a restart,
which `query_resume(id)` needs. As in MindsDB, a query finished more than a day ago is
removed when a new one is created (and no more than KEEP are kept).

A background insert (kb_background.py) runs in one engine but may be cancelled through any:
`cancel_requested` is read by the owner between batches. `owner` names the engine running a
query (host, process, engine), so a query whose process died can be told from one running
elsewhere: it may be resumed; a live one may not run twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kbsql.engine.catalog import Catalog, now
from kbsql.engine.catalog_records import TIMESTAMP_FORMAT
from kbsql.interface.control import Stopped
from kbsql.interface.errors import InsufficientStorage, SqlError

log = logging.getLogger(__name__)

COLUMNS = ["ID", "STARTED_AT", "FINISHED_AT", "PROCESSED_ROWS", "ERROR", "SQL", "DATABASE", "PARAMETERS",
           "CONTEXT", "UPDATED_AT"]
INFO_COLUMNS = ["ID", "SQL", "DATABASE", "STARTED_AT", "FINISHED_AT", "PARAMETERS", "CONTEXT",
                "PROCESSED_ROWS", "ERROR", "UPDATED_AT"]
"""The row an INSERT answers when it goes to the background (MindsDB's `get_info()` keys,
upper-cased, in its order)."""
KEEP = 1000
KEEP_FINISHED = dt.timedelta(days=1)
CANCELLED = "Query cancelled (query_cancel); query_resume({id}) continues it"


@dataclass(frozen=True)
class QueryRecord:
    id: int
    sql: str
    database: str | None
    started_at: str | None
    finished_at: str | None
    processed_rows: int
    error: str | None
    parameters: dict[str, Any]
    context: dict[str, Any]
    updated_at: str
    owner: str | None
    cancel_requested: bool
    kb_id: int | None

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.finished_at is None and self.error is None

    def value(self, column: str) -> Any:
        """The value of an information_schema.queries column (JSON columns as text)."""
        key = column.lower()
        value = getattr(self, key)
        return json.dumps(value, default=str) if key in ("parameters", "context") else value

    def info_row(self) -> list[Any]:
        return [self.value(c) for c in INFO_COLUMNS]


def _record(row: Any) -> QueryRecord:
    context = json.loads(row["context"])
    return QueryRecord(int(row["id"]), row["sql"], row["database"], row["started_at"], row["finished_at"],
                       int(row["processed_rows"]), row["error"], json.loads(row["parameters"]), context,
                       row["updated_at"], row["owner"], bool(row["cancel_requested"]), context.get("kb_id"))


def first_line(exc: BaseException) -> str:
    """An error as one line for the ERROR column: its message's first line; Ctrl-C is
    `interrupted` (a KeyboardInterrupt may have no message at all), any other silent error
    its type."""
    text = str(getattr(exc, "message", None) or getattr(exc, "detail", None) or exc).strip()
    lines = text.splitlines()
    first = lines[0] if lines else ""
    if isinstance(exc, KeyboardInterrupt):
        first = f"interrupted: {first}" if first else "interrupted"
    return (first or type(exc).__name__)[:500]


class QueryLog:
    """The catalog's `queries` table, plus which of them this engine is running."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    # writes ------------------------------------------------------------------------------
    def create(self, sql: str, database: str, parameters: dict[str, Any] | None = None,
               kb_id: int | None = None, started: bool = False) -> QueryRecord:
        """A new query (not started unless `started`); old finished ones are pruned first."""
        stamp = now()
        context = {"kb_id": kb_id} if kb_id is not None else {}
        with self.catalog.transaction() as db:
            self._prune(db)
            db.execute("INSERT INTO queries (sql, database, started_at, parameters, context, updated_at, "
                       "owner) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (sql, database, stamp if started else None,
                        json.dumps(parameters or {}, default=str), json.dumps(context), stamp,
                        self.owner if started else None))
            row = db.execute("SELECT max(id) FROM queries").fetchone()
        return self.get(int(row[0]))

    def _prune(self, db: Any) -> None:
        cutoff = (dt.datetime.now(dt.UTC) - KEEP_FINISHED).strftime(TIMESTAMP_FORMAT)
        db.execute("DELETE FROM queries WHERE finished_at IS NOT NULL AND finished_at < ?", (cutoff,))
        count = db.execute("SELECT count(*) FROM queries").fetchone()[0]
        if count >= KEEP:
            db.execute("DELETE FROM queries WHERE id IN (SELECT id FROM queries WHERE finished_at IS NOT "
                       "NULL OR error IS NOT NULL ORDER BY id LIMIT ?)", (count - KEEP + 1,))

    def _update(self, query_id: int, **values: Any) -> None:
        values["updated_at"] = now()
        for key in ("parameters", "context"):
            if key in values:
                values[key] = json.dumps(values[key], default=str)
        names = ", ".join(f"{k} = ?" for k in values)
        with self.catalog.transaction() as db:
            db.execute(f"UPDATE queries SET {names} WHERE id = ?", (*values.values(), query_id))

    def mark_as_run(self, record: QueryRecord, alive: bool) -> None:
        """Start (or resume) `record` in this engine; MindsDB's RunningQuery.mark_as_run
        rules, with `alive` saying whether its last owner may still be running it."""
        if record.finished_at is not None:
            raise SqlError(f"The query {record.id} already finished")
        if record.started_at is not None and record.error is None and alive:
            raise SqlError(f"The query {record.id} is running already (query_cancel({record.id}) stops "
                           "it; then query_resume continues it)")
        self._update(record.id, started_at=record.started_at or now(), error=None, owner=self.owner,
                     cancel_requested=0)

    def progress(self, query_id: int, processed_rows: int, context: dict[str, Any]) -> None:
        self._update(query_id, processed_rows=processed_rows, context=context)

    def finish(self, query_id: int, processed_rows: int | None = None) -> None:
        if processed_rows is None:
            self._update(query_id, finished_at=now())
        else:
            self._update(query_id, finished_at=now(), processed_rows=processed_rows)

    def fail(self, query_id: int, error: str) -> None:
        self._update(query_id, error=error)

    def request_cancel(self, query_id: int) -> QueryRecord:
        record = self.get(query_id)
        if record.finished_at is not None:
            raise SqlError(f"The query {query_id} already finished: there is nothing to cancel")
        self._update(query_id, cancel_requested=1)
        return record

    @contextmanager
    def track(self, sql: str, database: str, parameters: dict[str, Any] | None = None,
              kb_id: int | None = None) -> Iterator[dict[str, Any]]:
        """Record one statement run inline; the caller sets `row["PROCESSED_ROWS"]`.

        The statement's own answer wins over its record here: a failure it raises is raised
        even when recording it fails too (a full disk refuses both), and a statement done
        whose finish cannot be recorded answers a 507 that says what it did, never one that
        reads as "nothing stored"."""
        record = self.create(sql, database, parameters, kb_id, started=True)
        row: dict[str, Any] = {"ID": record.id, "PROCESSED_ROWS": 0}
        try:
            yield row
        except BaseException as exc:
            stored = getattr(exc, "stored", None)  # an interrupted insert says what it kept
            processed = stored if isinstance(stored, int) else row["PROCESSED_ROWS"]
            # stopped (its deadline, its client gone): over for good, as a finished row says;
            ended = {"finished_at": now()} if isinstance(exc, Stopped) else {}  # else resumable
            try:
                self._update(record.id, error=first_line(exc), processed_rows=processed, **ended)
            except Exception as logged:
                log.warning("query %s: its error was not recorded: %s", record.id, logged)
            raise
        try:
            self.finish(record.id, row["PROCESSED_ROWS"])
        except InsufficientStorage as exc:
            error = InsufficientStorage(
                f"The disk is full: the statement was done ({row['PROCESSED_ROWS']:,} rows stored), but "
                f"information_schema.queries could not record it (query {record.id} shows it running). "
                "Free some space on the server")
            error.stored = row["PROCESSED_ROWS"]
            raise error from exc

    # reads -------------------------------------------------------------------------------
    def get(self, query_id: Any) -> QueryRecord:
        try:
            key = int(query_id)
        except (TypeError, ValueError):
            raise SqlError(f"Query not found: {query_id}") from None
        rows = self.catalog.read("SELECT * FROM queries WHERE id = ?", (key,))
        if not rows:
            raise SqlError(f"Query not found: {query_id}")
        return _record(rows[0])

    def records(self) -> list[QueryRecord]:
        return [_record(r) for r in self.catalog.read("SELECT * FROM queries ORDER BY id")]

    def rows(self) -> list[list[Any]]:
        """information_schema.queries, in COLUMNS order."""
        return [[r.value(c) for c in COLUMNS] for r in self.records()]

    def latest_by_kb(self) -> dict[int, QueryRecord]:
        """The last insert of each knowledge base (DESCRIBE KNOWLEDGE_BASE's INSERT_* columns)."""
        latest: dict[int, QueryRecord] = {}
        for record in self.records():
            if record.kb_id is not None:
                latest[int(record.kb_id)] = record
        return latest

    def owner_alive(self, record: QueryRecord) -> bool:
        """Whether the engine that last ran `record` may still be running it: this engine
        asks its own pool (the caller); another process on this host is alive while its
        pid is; on another host nobody here can tell, so it is taken as alive."""
        if not record.owner:
            return False
        host, _, rest = record.owner.partition(":")
        pid, _, _ = rest.partition(":")
        if record.owner == self.owner:
            return True
        if host != socket.gethostname() or not pid.isdigit():
            return True
        if int(pid) == os.getpid():
            return True  # another engine of this process: it answers for its own queries
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
