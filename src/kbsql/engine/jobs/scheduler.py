"""Running due jobs: a thread of its own in every engine (a notebook kernel's, `kbsql serve`'s),
and `run_due` once for `kbsql jobs run` (cron).

Each due run is claimed in the catalog first (`JobStore.claim`), so on several servers
sharing one PostgreSQL catalog each run happens once. Its statements run one after the other
through the engine's SQL door, as the job's creator would run them: in the job's project,
under the deadline the creator's request had (`creator["timeout"]`) and this engine's own
statement timeout, memory limit and model lanes. The first failing statement ends the run;
its error, one line, goes to `log.jobs_history` and LAST does not move.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kbsql.engine.jobs import last_values
from kbsql.engine.jobs.job_store import JobRecord, JobStore
from kbsql.engine.jobs.schedule import moment, next_run, split_sql, utcnow
from kbsql.engine.sql.parse import parsing
from kbsql.interface.control import CURRENT, Control
from kbsql.interface.results import ErrorResult

if TYPE_CHECKING:
    from kbsql.engine.sql.executor import SqlExecutor

log = logging.getLogger("kbsql.jobs")


def first_line(text: str) -> str:
    return (str(text).strip().splitlines() or [""])[0]


class JobScheduler:
    """Claims and runs due jobs; `start` makes its thread (polling every `poll_s`). `sql`
    gives the engine's executor when a run needs it: a scheduler that only polls builds
    nothing (the engine's parts are lazy, `Engine._wired`)."""

    def __init__(self, store: JobStore, sql: Callable[[], SqlExecutor], poll_s: float = 5.0,
                 time_scale: float = 1.0):
        self.store = store
        self._sql = sql
        self.poll_s = poll_s
        self.time_scale = time_scale
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: dict[int, Control] = {}
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
            self._thread = threading.Thread(target=self._loop, name="kbsql-jobs", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread; a run in flight is stopped and recorded as failed."""
        self._stop.set()
        with self._lock:
            for control in self._running.values():
                control.stop("the server stopped")
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.run_due()
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

    def _following(self, job: JobRecord, now: datetime) -> datetime | None:
        """The run after this one: never in the past; None without EVERY or beyond END."""
        current = moment(job.next_run_at)
        if job.schedule is None or current is None:
            return None
        following = max(next_run(job.schedule, current, self.time_scale), now)
        end = moment(job.end_at)
        return None if end is not None and following > end else following

    def _run(self, job: JobRecord, history_id: int, done: bool) -> None:
        control = Control.after(job.creator.get("timeout"), "the creating request's timeout")
        with self._lock:
            self._running[history_id] = control
        executed: list[str] = []
        lasts: dict[str, Any] = {}
        error: str | None = None
        try:
            token = CURRENT.set(control)
            try:
                error = self._statements(job, executed, lasts)
            finally:
                CURRENT.reset(token)
        except Exception as exc:  # a bug must still end the run on the record
            log.exception("jobs: a run failed unexpectedly")
            error = first_line(f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(history_id, None)
            self.store.finish(job, history_id, error, " ".join(executed), lasts, done)

    def _statements(self, job: JobRecord, executed: list[str], lasts: dict[str, Any]) -> str | None:
        """Run IF, then the statements; the error of the first that fails, or None."""
        stored = self.store.lasts(job.id)
        ctx = {"db": job.project}
        if job.if_query:
            result = None
            for i, text in enumerate(split_sql(job.if_query)):
                result = self._one(text, f"if{i}", ctx, stored, lasts, executed)
                if isinstance(result, str):
                    return result
            if result is None or len(result) == 0:
                return None  # IF returned no row: this run does nothing (and moves no LAST)
        for i, text in enumerate(split_sql(job.query)):
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
