"""Running due jobs: a thread of its own in every engine (a notebook kernel's, `kbsql serve`'s),
and `run_due` once for `kbsql jobs run` (cron).

Each due run is claimed in the catalog first (`JobStore.claim`), so on several servers
sharing one PostgreSQL catalog each run happens once. Its statements run one after the other
through the engine's SQL door, as the job's creator would run them: in the job's project,
under the deadline the creator's request had (`creator["timeout"]`) and this engine's own
statement timeout, memory limit and model lanes. The first failing statement ends the run;
its error, one line, goes to `log.jobs_history` and LAST does not move.

Fair share: the thread only looks for due runs; each runs in a small pool (`job_workers`,
default 2) as its creator's work (`creator["owner"]`, the credential of the request that
made the job, as in the server's lanes), and one owner runs at most half the pool at once
(`owner_share`). A due run over its owner's share, or of a job still running here, waits in
the catalog (it stays due) and starts when a worker frees. One thread used to run every
run in turn, so one user's long job held every other user's due runs (issue 39).
`run_due` (cron, tests) still runs the due runs in turn in the calling thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kbsql.engine.jobs import last_values
from kbsql.engine.jobs.job_store import JobRecord, JobStore
from kbsql.engine.jobs.schedule import fill_templates, moment, next_run, utcnow
from kbsql.engine.sql.parse import parsing
from kbsql.interface.control import CURRENT, Control, owner_share
from kbsql.interface.results import ErrorResult
from kbsql.interface.sqltext import statements

if TYPE_CHECKING:
    from kbsql.engine.sql.executor import SqlExecutor

log = logging.getLogger("kbsql.jobs")
DEFAULT_WORKERS = 2
STOP_WAIT_S = 30.0


def first_line(text: str) -> str:
    return (str(text).strip().splitlines() or [""])[0]


class JobScheduler:
    """Claims and runs due jobs; `start` makes its thread (polling every `poll_s`). `sql`
    gives the engine's executor when a run needs it: a scheduler that only polls builds
    nothing (the engine's parts are lazy, `Engine._wired`)."""

    def __init__(self, store: JobStore, sql: Callable[[], SqlExecutor], poll_s: float = 5.0,
                 time_scale: float = 1.0, workers: int = DEFAULT_WORKERS):
        self.store = store
        self._sql = sql
        self.poll_s = poll_s
        self.time_scale = time_scale
        self.workers = max(1, workers)
        self.share = owner_share(self.workers)
        """Runs one owner may have in the pool at once (see the module docstring)."""
        self._stop = threading.Event()
        self._wake = threading.Event()  # a worker freed: look for due runs now
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._running: dict[int, Control] = {}
        self._held: dict[str | None, int] = {}  # owner -> runs in the pool
        self._taken: set[int] = set()  # jobs with a run in the pool
        self._futures: set[Future[None]] = set()
        self._lock = threading.Lock()

    @property
    def sql(self) -> SqlExecutor:
        return self._sql()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Start the polling thread, once (later calls do nothing; none after close)."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="kbsql-job")
            self._thread = threading.Thread(target=self._loop, name="kbsql-jobs", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread; a run in flight is stopped and recorded as failed."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            for control in self._running.values():
                control.stop("the server stopped")
            futures = set(self._futures)
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)
        wait(futures, timeout=STOP_WAIT_S)  # each records its run as stopped
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._dispatch(utcnow())
            except Exception as exc:  # a catalog away for a while: try again at the next poll
                # one line, no traceback: a PostgreSQL restart would print one every poll
                log.warning("jobs: looking for due runs failed (%s: %s); trying again in %s s",
                            type(exc).__name__, first_line(str(exc)), self.poll_s)

    def run_due(self, now: datetime | None = None) -> int:
        """Claim and run every run due at `now` (default: the clock); returns how many ran."""
        with self._lock:
            running = set(self._running)
        self.store.reap(running)
        ran = 0
        for job in self.store.due(now or utcnow()):
            if self._stop.is_set():
                break
            following = self._following(job, now or utcnow())
            history_id = self.store.claim(job, following)
            if history_id is None:
                continue  # another server (or thread) took this run
            self._run(job, history_id, done=following is None)
            ran += 1
        return ran

    def _dispatch(self, now: datetime) -> None:
        """Hand due runs to free workers, each under its owner's share; a run that cannot go
        now stays due in the catalog for the next look."""
        with self._lock:
            running = set(self._running)
        self.store.reap(running)
        for job in self.store.due(now):
            owner = job.creator.get("owner")
            with self._lock:
                if self._stop.is_set() or sum(self._held.values()) >= self.workers:
                    return
                if job.id in self._taken or (owner is not None and self._held.get(owner, 0) >= self.share):
                    continue
                self._taken.add(job.id)
                self._held[owner] = self._held.get(owner, 0) + 1
                assert self._pool is not None
                future = self._pool.submit(self._take, job, owner)
                self._futures.add(future)
                future.add_done_callback(self._futures.discard)

    def _take(self, job: JobRecord, owner: str | None) -> None:
        """In a worker: claim the run (claim and finish on one thread: a shared catalog's run
        lock belongs to its connection) and run it; then free the worker."""
        ran = False
        try:
            following = self._following(job, utcnow())
            history_id = self.store.claim(job, following)
            if history_id is not None:  # else another server (or thread) took this run
                self._run(job, history_id, done=following is None)
                ran = True
        except Exception as exc:  # a catalog away: the run stays due for the next look
            log.warning("jobs: running %s failed (%s: %s)", job.name, type(exc).__name__,
                        first_line(str(exc)))
        finally:
            with self._lock:
                self._taken.discard(job.id)
                self._held[owner] -= 1
                if not self._held[owner]:
                    del self._held[owner]
            if ran:  # a worker is free: the runs waiting for it go now (not after a poll)
                self._wake.set()

    def _following(self, job: JobRecord, now: datetime) -> datetime | None:
        """The run after this one: never in the past; None without EVERY or beyond END.

        A late run (periods missed while nothing ran) moves the next one a period past now:
        moved only to now, as it was, the job was due again at once and ran a second time
        right after (two runs of `INSERT INTO src.t SELECT ...`: every row twice)."""
        current = moment(job.next_run_at)
        if job.schedule is None or current is None:
            return None
        try:
            following = next_run(job.schedule, current, self.time_scale)
            if following <= now:  # periods missed: this run catches them up, the next is a period on
                following = next_run(job.schedule, now, self.time_scale)
        except OverflowError:  # past year 9999 (START '9999-12-31' EVERY hour): this run is its last
            return None
        end = moment(job.end_at)
        return None if end is not None and following > end else following

    def _run(self, job: JobRecord, history_id: int, done: bool) -> None:
        control = Control.after(job.creator.get("timeout"), "the creating request's timeout")
        control.owner = job.creator.get("owner")  # what it starts (a background insert) keeps its share
        with self._lock:
            self._running[history_id] = control
        executed: list[str] = []
        lasts: dict[str, Any] = {}
        error: str | None = None
        try:
            token = CURRENT.set(control)
            try:
                error = self._statements(job, history_id, executed, lasts)
            finally:
                CURRENT.reset(token)
        except Exception as exc:  # a bug must still end the run on the record
            log.exception("jobs: a run failed unexpectedly")
            error = first_line(f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(history_id, None)
            self.store.finish(job, history_id, error, " ".join(executed), lasts, done)

    def _statements(self, job: JobRecord, history_id: int, executed: list[str],
                    lasts: dict[str, Any]) -> str | None:
        """Run IF, then the statements, their `{{...}}` variables filled in; the error of the
        first that fails, or None."""
        stored = self.store.lasts(job.id)
        ctx = {"db": job.project}
        start, previous = self.store.starts(job.id, history_id)
        created = moment(job.created_at)
        assert created is not None

        def filled(text: str) -> str:
            return fill_templates(text, moment(start) or created, moment(previous), created)

        if job.if_query:
            result = None
            for i, text in enumerate(statements(filled(job.if_query))):
                result = self._one(text, f"if{i}", ctx, stored, lasts, executed)
                if isinstance(result, str):
                    return result
            if result is None or len(result) == 0:
                return None  # IF returned no row: this run does nothing (and moves no LAST)
        for i, text in enumerate(statements(filled(job.query))):
            result = self._one(text, f"q{i}", ctx, stored, lasts, executed)
            if isinstance(result, str):
                return result
        return None

    def _one(self, text: str, key: str, ctx: dict[str, Any], stored: dict[str, Any],
             lasts: dict[str, Any], executed: list[str]) -> Any:
        """One statement, its LAST conditions filled in: its result, or its error as text."""
        executed.append(text + ";")
        try:
            statement = parsing.parse(text)
            found = last_values.apply(statement, key, stored, lambda probe: self._max(probe, ctx))
        except Exception as exc:
            return first_line(str(exc))
        if found:  # run as rewritten
            lasts.update(found)
            text = statement.to_string()
        result = self.sql.execute(text, dict(ctx))
        if isinstance(result, ErrorResult):
            return first_line(result.error_message)
        return result

    def _max(self, probe: Any, ctx: dict[str, Any]) -> Any:
        frame = self.sql.select_frame(probe, ctx)
        return None if frame.empty else frame.iloc[0, 0]
