"""Jobs, their runs and their LAST values, in the catalog (SQLite or the shared PostgreSQL).

A run is claimed in one catalog transaction: the job's `next_run_at` is moved on only if it
still holds the value the claimer read (catalog writers serialise: SQLite's BEGIN IMMEDIATE,
PostgreSQL's transaction advisory lock), and the run's `jobs_history` row is written in the
same transaction. So of several servers that see a run due, exactly one claims it. On
PostgreSQL the claimer also holds a session advisory lock on the run until it is recorded:
a server that dies mid-run loses the lock with its connection, and any other server then
records that run as failed (`reap`). LAST values move only with a successful run's record.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbsql.engine.jobs.schedule import stamp, utcnow
from kbsql.engine.postgres.pg import lock_key
from kbsql.engine.stored_names import stored_name
from kbsql.interface.errors import Conflict, NotFound, clipped

if TYPE_CHECKING:
    from datetime import datetime

    from kbsql.engine.catalog import Catalog

STOPPED = "the server running this job stopped before the run ended (nothing of LAST moved)"


@dataclass
class JobRecord:
    id: int
    project: str
    name: str
    query: str
    if_query: str | None
    start_at: str
    end_at: str | None
    schedule: str | None
    next_run_at: str | None
    created_at: str
    creator: dict[str, Any]


def _job(row: Any) -> JobRecord:
    return JobRecord(row["id"], row["project"], row["name"], row["query"], row["if_query"],
                     row["start_at"], row["end_at"], row["schedule"], row["next_run_at"],
                     row["created_at"], json.loads(row["creator"] or "{}"))


def run_lock(history_id: int) -> int:
    return lock_key(f"kbsql:job-run:{history_id}")


_SELECT = ("SELECT j.*, p.name AS project FROM jobs j JOIN projects p ON p.id = j.project_id")


HISTORY_QUERY_CHARS = 4096
"""The most of a run's statements' text its jobs_history row keeps (marked when cut)."""


class JobStore:
    """Typed reads and transactional writes of the job tables (catalog_schema.py)."""

    def __init__(self, catalog: Catalog, history_rows: int | None = None):
        self.catalog = catalog
        self.history_rows = history_rows
        """Runs kept in jobs_history (None: all); each job's newest run always stays, since
        it gives the next run its {{PREVIOUS_START_DATETIME}}."""
        self.shared = catalog.shared_url is not None
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """Who runs a claimed run: this engine (its host and process, for `reap`)."""

    # jobs -------------------------------------------------------------------------------
    def create(self, job: JobRecord, if_not_exists: bool) -> bool:
        """Store a new job; False if it exists and `if_not_exists`, else Conflict."""
        stored_name(job.name, "job")
        with self.catalog.transaction() as db:
            project = db.execute("SELECT id FROM projects WHERE lower(name) = lower(?)",
                                 (job.project,)).fetchone()
            if project is None:
                raise NotFound(f"Project '{job.project}' does not exist", title="Project not found")
            taken = db.execute("SELECT 1 FROM jobs WHERE project_id = ? AND lower(name) = lower(?)",
                               (project[0], job.name)).fetchone()
            if taken:
                if if_not_exists:
                    return False
                raise Conflict(f"Job already exists: {job.name}", title="Job already exists")
            db.execute("INSERT INTO jobs (project_id, name, query, if_query, start_at, end_at, schedule,"
                       " next_run_at, created_at, creator) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (project[0], job.name, job.query, job.if_query, job.start_at, job.end_at,
                        job.schedule, job.next_run_at, job.created_at, json.dumps(job.creator)))
        return True

    def drop(self, project: str, name: str, if_exists: bool) -> None:
        """Delete a job and its LAST values (its runs stay in jobs_history)."""
        with self.catalog.transaction() as db:
            row = db.execute("SELECT j.id FROM jobs j JOIN projects p ON p.id = j.project_id"
                             " WHERE lower(p.name) = lower(?) AND lower(j.name) = lower(?)",
                             (project, name)).fetchone()
            if row is None:
                if if_exists:
                    return
                raise NotFound(f"Job does not exist: {name}", title="Job not found")
            db.execute("DELETE FROM jobs_last WHERE job_id = ?", (row[0],))
            db.execute("DELETE FROM jobs WHERE id = ?", (row[0],))

    def any(self) -> bool:
        """Whether the catalog holds a job (an engine starts its scheduler only then)."""
        return bool(self.catalog.read("SELECT 1 FROM jobs LIMIT 1"))

    def jobs(self, project: str | None = None) -> list[JobRecord]:
        if project is None:
            return [_job(r) for r in self.catalog.read(_SELECT + " ORDER BY p.name, j.name")]
        return [_job(r) for r in self.catalog.read(
            _SELECT + " WHERE lower(p.name) = lower(?) ORDER BY j.name", (project,))]

    def due(self, now: datetime) -> list[JobRecord]:
        return [_job(r) for r in self.catalog.read(
            _SELECT + " WHERE j.next_run_at IS NOT NULL AND j.next_run_at <= ? ORDER BY j.next_run_at",
            (stamp(now),))]

    # runs -------------------------------------------------------------------------------
    def claim(self, job: JobRecord, next_run_at: datetime | None) -> int | None:
        """Take the run `job.next_run_at` for this engine; None if another took it first, or
        if a run of this job is still in flight (runs of one job never overlap: two would
        read the same LAST and apply the same rows twice; a dead server's run is ended by
        `reap`). The job's next run becomes `next_run_at`; None (no EVERY, or past END) ends it."""
        with self.catalog.transaction() as db:
            row = db.execute("SELECT next_run_at FROM jobs WHERE id = ?", (job.id,)).fetchone()
            if row is None or row[0] != job.next_run_at:
                return None
            if db.execute("SELECT 1 FROM jobs_history WHERE job_id = ? AND run_end IS NULL",
                          (job.id,)).fetchone():
                return None
            if next_run_at is None:
                db.execute("UPDATE jobs SET next_run_at = NULL WHERE id = ?", (job.id,))
            else:
                db.execute("UPDATE jobs SET next_run_at = ? WHERE id = ?", (stamp(next_run_at), job.id))
            history_id = int(db.execute(
                "INSERT INTO jobs_history (job_id, name, project, due_at, run_start, owner)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (job.id, job.name, job.project, job.next_run_at, stamp(utcnow()), self.owner)).fetchone()[0])
            if self.shared:  # held past COMMIT, until `finish`; lost with the connection
                db.execute("SELECT pg_advisory_lock(?)", (run_lock(history_id),))
        return history_id

    def finish(self, job: JobRecord, history_id: int, error: str | None, query: str,
               lasts: dict[str, Any], done: bool) -> None:
        """Record the run's end; a run without error stores its LAST values with it. `done`:
        the job has no run left (MindsDB then deletes it; its runs stay in the log)."""
        query = clipped(query, HISTORY_QUERY_CHARS)  # a 1 MB statement run every minute: 1.4 GB a day
        with self.catalog.transaction() as db:
            db.execute("UPDATE jobs_history SET run_end = ?, error = ?, query = ? WHERE id = ?",
                       (stamp(utcnow()), error, query, history_id))
            exists = db.execute("SELECT next_run_at FROM jobs WHERE id = ?", (job.id,)).fetchone()
            if exists is not None and error is None:
                for key, value in lasts.items():
                    db.execute("INSERT INTO jobs_last (job_id, cond_key, value) VALUES (?, ?, ?)"
                               " ON CONFLICT (job_id, cond_key) DO UPDATE SET value = excluded.value",
                               (job.id, key, json.dumps({"v": value})))
            if exists is not None and done and exists[0] is None:
                db.execute("DELETE FROM jobs_last WHERE job_id = ?", (job.id,))
                db.execute("DELETE FROM jobs WHERE id = ?", (job.id,))
            if self.history_rows is not None:
                db.execute("DELETE FROM jobs_history WHERE run_end IS NOT NULL AND id <= "
                           "(SELECT max(id) FROM jobs_history) - ? AND id NOT IN "
                           "(SELECT max(id) FROM jobs_history GROUP BY job_id)", (self.history_rows,))
        if self.shared:
            self.catalog.read("SELECT pg_advisory_unlock(?)", (run_lock(history_id),))

    def starts(self, job_id: int, history_id: int) -> tuple[str, str | None]:
        """(this run's start, the previous run's start or None): the job's `{{...}}` variables."""
        this = self.catalog.read("SELECT run_start FROM jobs_history WHERE id = ?", (history_id,))
        before = self.catalog.read("SELECT run_start FROM jobs_history WHERE job_id = ? AND id < ?"
                                   " ORDER BY id DESC LIMIT 1", (job_id, history_id))
        return str(this[0][0]), (str(before[0][0]) if before else None)

    def lasts(self, job_id: int) -> dict[str, Any]:
        rows = self.catalog.read("SELECT cond_key, value FROM jobs_last WHERE job_id = ?", (job_id,))
        return {r[0]: json.loads(r[1])["v"] for r in rows}

    def history(self) -> list[Any]:
        return self.catalog.read("SELECT name, project, run_start, run_end, error, query"
                                 " FROM jobs_history ORDER BY id")

    def reap(self, running: set[int]) -> int:
        """Record as failed the runs whose server stopped mid-run; returns how many."""
        rows = self.catalog.read("SELECT id, owner FROM jobs_history WHERE run_end IS NULL")
        failed = 0
        for history_id, owner in ((int(r[0]), str(r[1] or "")) for r in rows):
            if history_id in running or owner == self.owner or not self._gone(history_id, owner):
                continue
            with self.catalog.transaction() as db:
                db.execute("UPDATE jobs_history SET run_end = ?, error = ? WHERE id = ? AND run_end IS NULL",
                           (stamp(utcnow()), STOPPED, history_id))
            failed += 1
        return failed

    def _gone(self, history_id: int, owner: str) -> bool:
        """Whether the engine that claimed a run is no more: on PostgreSQL its run lock is
        free; on SQLite (one machine) its process is not alive."""
        if self.shared:
            got = self.catalog.read("SELECT pg_try_advisory_lock(?)", (run_lock(history_id),))
            if got and got[0][0]:
                self.catalog.read("SELECT pg_advisory_unlock(?)", (run_lock(history_id),))
                return True
            return False
        host, _, rest = owner.partition(":")
        pid = rest.partition(":")[0]
        if host != socket.gethostname() or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False  # alive (in this process too: another engine's run)
