"""Background inserts: `INSERT INTO kb SELECT ... USING batch_size = N [, track_column = c]`
as MindsDB runs its partitioned inserts (insert_data.mdx, "Insert Data using Partitions").

The statement answers at once with one row describing the query (MindsDB's columns: ID,
SQL, DATABASE, STARTED_AT, ...); the insert runs in a small pool of worker threads
(`DEFAULT_WORKERS`, outside any request), is listed in
information_schema.queries with its PROCESSED_ROWS as batches are stored, and shows in
DESCRIBE KNOWLEDGE_BASE. `SELECT query_cancel(id)` stops it after the batch being stored
(what was stored stays); `SELECT query_resume(id)` runs it again from where it stopped, as
does resuming an insert that failed half-way (its ERROR is kept until then).

Where it stopped: the rows are sorted by the tracked column (`track_column`, else the
knowledge base's id column when the SELECT has it) and the query's CONTEXT keeps
`track_value`, the largest value all of whose rows are stored. A resume runs the SELECT
again and skips the rows up to that value. Rows sharing the value at which a batch ended
are inserted again, which changes nothing (an insert of an id replaces it), so the final
count is exact; MindsDB's `WHERE track > last` would instead skip the rest of such a group.
Without a tracked column, a query that stored some rows cannot resume (MindsDB: "Can't
resume query without track_column").

Fair share: an insert belongs to the credential that started it (`Control.owner`, the lanes'
owner on both doors), and one owner runs at most half the pool at once (rounded up: 1 of
the default 2); its further inserts wait while another user's take the free worker, where
two long inserts of one token used to hold another user's 5-row insert queued 25 s and
more. A freed worker goes to the longest-waiting insert whose owner is under its share.

Bounds: a run holds its own `Control` (interface/control.py), so its SELECT and its batches
stop like a statement's. The SELECT runs under the statement deadline (`--statement-timeout`),
and so does each batch (the deadline is renewed when a batch is stored: a long insert of
many batches may run for hours, no single step for longer than a statement may); query_cancel
and the engine's close stop it at once, mid-SELECT included (a cross join used to go on for
minutes after its cancel).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.catalog import KbRecord
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.kb import kb_insert, kb_write
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.query_log import CANCELLED, INFO_COLUMNS, QueryLog, QueryRecord, first_line
from kbsql.engine.sql.tables import names
from kbsql.interface.control import CURRENT, Control, Stopped, owner_share
from kbsql.interface.errors import KbsqlError, SqlError
from kbsql.interface.progress import RUNNING, OnProgress, ProgressEvent
from kbsql.interface.results import OkResult, SqlResult, default_context

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.session import SqlSession

log = logging.getLogger("kbsql.sql")

DEFAULT_WORKERS = 2
"""Background inserts running at once per engine (more wait their turn): each may embed
with `threads` of its own, so a few are enough to keep a machine busy without starving the
statements of other users."""
STOP_WAIT_S = 30.0
STOPPED = "The engine stopped during this insert; query_resume({id}) continues it"


class InsertCancelled(KbsqlError):
    """Raised between two batches when query_cancel asked the insert to stop."""


def wanted(using: dict[str, Any] | None) -> bool:
    """`USING batch_size = N`: MindsDB's partitioned insert, which it runs in the background."""
    return any(str(k).lower() == "batch_size" for k in (using or {}))


def query_function(statement: ast.ASTNode) -> tuple[str, Any] | None:
    """`SELECT query_cancel(id)` / `SELECT query_resume(id)` as (name, id), else None."""
    if not isinstance(statement, ast.Select) or statement.from_table is not None or \
            len(statement.targets or []) != 1:
        return None
    target = statement.targets[0]
    if not isinstance(target, ast.Function) or str(target.op).lower() not in ("query_cancel",
                                                                             "query_resume"):
        return None
    args = [a.value for a in target.args if isinstance(a, ast.Constant)]
    if len(args) != 1 or len(target.args) != 1:
        raise SqlError(f"{target.op}() takes one query id (SELECT {target.op}(1)): see "
                       "information_schema.queries")
    return str(target.op).lower(), args[0]


class BackgroundInserts:
    """The pool and the inserts of this engine running in it."""

    def __init__(self, session: SqlSession, workers: int = DEFAULT_WORKERS):
        self.session = session
        self.queries: QueryLog = session.queries
        self.workers = max(1, workers)
        self.share = owner_share(self.workers)
        """Inserts one owner may run at once (see the module docstring)."""
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kbsql-insert")
        self._lock = threading.Lock()
        self._running: dict[int, tuple[Future[None], threading.Event]] = {}
        self._controls: dict[int, Control] = {}
        self._waiting: list[_Job] = []  # submitted, not yet given a worker (oldest first)
        self._held: dict[str | None, int] = {}  # owner -> inserts running
        self._closed = False

    # statements ------------------------------------------------------------------------------
    def start(self, record: KbRecord, statement: ast.Insert, sql: str, using: dict[str, Any],
              ctx: dict[str, Any]) -> SqlResult:
        """Check the statement (options, SELECT, tracked column), record the query and
        answer its row; the insert itself runs in the pool."""
        options = kb_insert.options_of(using)
        probe = _probe(self.session, statement, ctx, record.spec)
        if options["track_column"] is not None and \
                options["track_column"].lower() not in {str(c).lower() for c in probe.columns}:
            raise SqlError(f"track_column {options['track_column']!r} is not a column of the inserted "
                           f"rows {list(probe.columns)}")
        parameters = {str(k).lower(): (v.parts[-1] if hasattr(v, "parts") else v) for k, v in using.items()}
        query = self.queries.create(sql, ctx["db"], parameters, record.id)
        self._submit(query.id)
        return self._answer(query.id, ctx)

    def resume(self, query_id: Any, ctx: dict[str, Any]) -> SqlResult:
        record = self.queries.get(query_id)
        with self._lock:
            here = record.id in self._running
        self.queries.mark_as_run(record, alive=here or (record.running and self.queries.owner_alive(record)))
        self._submit(record.id)
        return self._answer(record.id, ctx)

    def cancel(self, query_id: Any, ctx: dict[str, Any]) -> SqlResult:
        record = self.queries.request_cancel(query_id)
        with self._lock:
            running = self._running.get(record.id)
        if running is not None:
            running[1].set()
            with self._lock:
                control = self._controls.get(record.id)
            if control is not None:  # at once: mid-SELECT or mid-batch
                control.stop(f"query_cancel({record.id}) stopped it")
        elif record.error is None and not (record.running and self.queries.owner_alive(record)):
            self.queries.fail(record.id, CANCELLED.format(id=record.id))  # nobody runs it
        return OkResult(None, context=ctx)

    def _answer(self, query_id: int, ctx: dict[str, Any]) -> SqlResult:
        row = self.queries.get(query_id).info_row()
        return ArrowTableResult.from_rows(list(INFO_COLUMNS), [row], ctx)

    # the pool --------------------------------------------------------------------------------
    def _submit(self, query_id: int) -> None:
        """Queue the insert for a worker under its owner's share (the credential of the
        request that started or resumed it: `Control.owner`)."""
        request = CURRENT.get()
        job = _Job(query_id, request.owner if request is not None else None)
        with self._lock:
            if self._closed:
                raise SqlError("The engine is stopping: no new background insert")
            if query_id in self._running:
                raise SqlError(f"The query {query_id} is running already")
            self._controls[query_id] = job.control
            self._running[query_id] = (job.done, job.stop)
            self._waiting.append(job)
            self._dispatch()

    def _dispatch(self) -> None:
        """Give free workers to the oldest waiting inserts whose owner is under its share
        (lock held). No owner (no credential: an embedded engine, a server without
        authentication) has no share, as in the lanes."""
        for job in list(self._waiting):
            if sum(self._held.values()) >= self.workers:
                return
            if job.owner is not None and self._held.get(job.owner, 0) >= self.share:
                continue
            self._waiting.remove(job)
            self._held[job.owner] = self._held.get(job.owner, 0) + 1
            self.pool.submit(self._work, job)

    def _work(self, job: _Job) -> None:
        try:
            self._run(job.query_id, job.stop, job.control)
        finally:
            with self._lock:
                self._held[job.owner] -= 1
                if not self._held[job.owner]:
                    del self._held[job.owner]
                if not self._closed:
                    self._dispatch()
            job.done.set_result(None)

    def running(self) -> list[int]:
        with self._lock:
            return sorted(self._running)

    def close(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop every insert of this engine after its current batch (each is recorded as
        stopped, for query_resume), then the pool."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            for job in waiting:  # never started: recorded as stopped, for query_resume
                self._running.pop(job.query_id, None)
                self._controls.pop(job.query_id, None)
            running = list(self._running.items())
        for job in waiting:
            self.queries.fail(job.query_id, STOPPED.format(id=job.query_id))
            job.done.set_result(None)
        for query_id, (_, stop) in running:
            stop.set()
            control = self._controls.get(query_id)
            if control is not None:
                control.stop("the engine stopped")
        for query_id, (future, _) in running:
            try:
                future.result(timeout=timeout)
            except CancelledError:  # still waiting for a worker: it never started
                self.queries.fail(query_id, STOPPED.format(id=query_id))
            except Exception:  # recorded in the query by the worker
                pass
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, query_id: int, stop: threading.Event, control: Control) -> None:
        queries = self.queries
        token = CURRENT.set(control)  # the SELECT and the batches read it (deadline, stop)
        try:
            if stop.is_set() or queries.get(query_id).cancel_requested:
                raise InsertCancelled()
            record = queries.get(query_id)
            if record.started_at is None or record.owner != queries.owner:
                queries.mark_as_run(record, alive=False)
            renew = self._deadline(control)
            renew()
            processed = _Insert(self.session, queries.get(query_id), stop, renew).run()
            queries.finish(query_id, processed)
        except (InsertCancelled, Stopped) as exc:
            if isinstance(exc, Stopped) and not stop.is_set():  # its deadline: a failure to say
                queries.fail(query_id, first_line(exc))
                return
            closing = self._closed and not queries.get(query_id).cancel_requested
            queries.fail(query_id, (STOPPED if closing else CANCELLED).format(id=query_id))
        except BaseException as exc:
            if not isinstance(exc, KbsqlError):
                log.warning("background insert %s failed: %s", query_id, first_line(exc))
            queries.fail(query_id, first_line(exc))
        finally:
            CURRENT.reset(token)
            with self._lock:
                self._running.pop(query_id, None)
                self._controls.pop(query_id, None)

    def _deadline(self, control: Control) -> Any:
        """A function that sets `control`'s deadline to the statement deadline from now."""
        settings = self.session.duck.settings
        seconds = settings.statement_timeout

        def renew() -> None:
            if seconds and seconds > 0:
                control.deadline = time.monotonic() + seconds
                control.limit_note = f"{seconds:g} s, {settings.timeout_note}"
        return renew


class _Job:
    """One insert given to the pool: whose it is, how to stop it, and when it is done."""

    def __init__(self, query_id: int, owner: str | None):
        self.query_id, self.owner = query_id, owner
        self.stop = threading.Event()
        self.control = Control()
        self.done: Future[None] = Future()


def _probe(session: SqlSession, statement: ast.Insert, ctx: dict[str, Any],
           spec: dict[str, Any]) -> pd.DataFrame:
    """The SELECT's columns without its rows (LIMIT 0): unknown tables or columns, and a
    column list of the wrong length, fail the statement itself, not the background run."""
    import copy

    probe = copy.deepcopy(statement)
    if isinstance(probe.from_select, ast.Select):
        probe.from_select.limit = ast.Constant(0)
    return kb_write.frame_of(session, probe, ctx, spec)


class _Insert:
    """One run (a start or a resume) of a background insert."""

    def __init__(self, session: SqlSession, query: QueryRecord, stop: threading.Event,
                 renew: Any = None):
        self.session, self.query, self.stop = session, query, stop
        self.renew = renew or (lambda: None)  # the deadline, anew for each batch
        self.context = dict(query.context)
        self.processed = 0

    def run(self) -> int:
        session, query = self.session, self.query
        ctx = {**default_context(), "db": query.database or default_context()["db"]}
        statement = parsing.parse(query.sql)
        if not isinstance(statement, ast.Insert) or statement.from_select is None:
            raise SqlError(f"The query {query.id} is not an INSERT ... SELECT")
        options = kb_insert.options_of(kb_write.take_using(statement))
        target = names.target_of(session, statement.table, ctx)
        if target is None or target.kind != "kb" or target.record is None:
            raise SqlError(f"The knowledge base of query {query.id} no longer exists")
        frame = kb_write.frame_of(session, statement, ctx, target.record.spec)
        track = options["track_column"] or _id_column(target.record, frame)
        columns = {str(c).lower(): c for c in frame.columns}
        if track is not None:
            track = columns.get(track.lower())
            frame = frame.sort_values(track, kind="stable").reset_index(drop=True) if track else frame
        options["track_column"] = track
        total = len(frame)
        frame = self._skip_done(frame, track)
        if options["kb_no_upsert"] and self.processed:  # a resume: ids it stored are expected
            options["kb_no_upsert"], options["kb_skip_existing"] = False, True
        self.context.update(total_rows=total, track_column=track)
        self.session.queries.progress(query.id, self.processed, self.context)
        kb_write.insert_frame(session, target.record, frame, options,
                              observe=lambda batches: self._observer(batches, len(frame), track))
        return total

    def _skip_done(self, frame: pd.DataFrame, track: str | None) -> pd.DataFrame:
        """On a resume, the rows already stored (up to CONTEXT's track_value) are skipped."""
        value = self.context.get("track_value")
        if value is None:
            if self.query.processed_rows and track is None:
                raise SqlError("Can't resume query without track_column: give the INSERT a "
                               "track_column (or run it again)")
            return frame
        column = frame[track]
        try:
            if str(column.dtype).startswith("datetime"):
                import pandas as pd

                value = pd.Timestamp(value)
            done = column <= value
        except TypeError as exc:
            raise SqlError(f"Cannot resume: the values of {track} cannot be compared with {value!r}") from exc
        self.processed = int(done.sum())
        return frame[~done].reset_index(drop=True)

    def _observer(self, batches: kb_insert.FrameBatches, given: int, track: str | None) -> OnProgress:
        """The insert's progress callback: once a batch is committed (the event's `committed`
        rows moved), record the rows processed and the tracked value reached, and stop if
        cancelled. Rows kb_skip_existing dropped count as processed from the start."""
        start = self.processed + (given - batches.rows)
        values = batches.frame[track] if track is not None else None
        reached = 0

        def on_progress(event: ProgressEvent) -> None:
            nonlocal reached
            end = min(event.committed, batches.rows)
            if event.state != RUNNING or end <= reached:  # not a newly committed batch
                return
            reached = end
            if values is not None:
                last = values.iloc[end - 1]
                if end < batches.rows and values.iloc[end] == last:  # the group goes on
                    before = values.iloc[:end][values.iloc[:end] < last]
                    last = before.iloc[-1] if len(before) else None
                if last is not None:
                    self.context["track_value"] = _plain(last)
            self.session.queries.progress(self.query.id, start + end, self.context)
            self.renew()
            if self.stop.is_set() or self.session.queries.get(self.query.id).cancel_requested:
                raise InsertCancelled()

        return on_progress


def _id_column(record: KbRecord, frame: pd.DataFrame) -> str | None:
    """The column a knowledge base takes its ids from, when the rows have it (MindsDB's
    autobatch tracks the id column too)."""
    wanted_name = record.spec.get("id_column") or "id"
    return wanted_name if wanted_name.lower() in {str(c).lower() for c in frame.columns} else None


def _plain(value: Any) -> Any:
    """A tracked value as JSON can keep it (numpy scalars as Python, timestamps as text)."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value
