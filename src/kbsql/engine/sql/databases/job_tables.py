"""The tables of jobs, with MindsDB's columns: `information_schema.jobs` (every project),
`<project>.jobs` and SHOW JOBS (one project), upper case as MindsDB's JobsTable answers all
three (its project table and SHOW JOBS read information_schema.jobs; its test_jobs.py reads
`row.NAME`), and `log.jobs_history` (mindsdb/interfaces/database/log.py, lower case: name,
project, run_start, run_end, error, query)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kbsql.engine.jobs.job_store import JobStore
from kbsql.engine.sql.tables.names import LOG_DATABASE
from kbsql.interface.secrets import mask_sql_text

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Resolved

JOB_COLUMNS = ["NAME", "PROJECT", "START_AT", "END_AT", "NEXT_RUN_AT", "SCHEDULE_STR", "QUERY",
               "IF_QUERY", "VARIABLES"]
HISTORY_COLUMNS = ["name", "project", "run_start", "run_end", "error", "query"]


def _text_table(columns: list[str], rows: list[list[Any]]) -> pa.Table:
    return pa.table({c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(columns)})


def _shown(sql: str | None) -> str | None:
    """A job's statement as every user sees it: its secrets masked (mask_sql_text)."""
    return None if sql is None else mask_sql_text(sql)


def jobs(session: SqlSession, project: str | None) -> pa.Table:
    """The jobs of `project` (None: all); `variables` shows each job's LAST values; the
    statements with their secrets masked (every user of a server reads them)."""
    store = JobStore(session.catalog)
    rows = []
    for job in store.jobs(project):
        lasts = store.lasts(job.id)
        rows.append([job.name, job.project, job.start_at, job.end_at, job.next_run_at,
                     None if job.schedule is None else f"every {job.schedule}", _shown(job.query),
                     _shown(job.if_query), json.dumps(lasts) if lasts else None])
    return _text_table(JOB_COLUMNS, rows)


def history(session: SqlSession) -> pa.Table:
    rows = [[*r[:-1], _shown(r[-1])] for r in JobStore(session.catalog).history()]
    return _text_table(HISTORY_COLUMNS, rows)


def frame(session: SqlSession, target: Resolved) -> pa.Table:
    """A `jobs` target of the name resolver: `log.jobs_history` or `<project>.jobs`."""
    if target.database == LOG_DATABASE:
        return history(session)
    return jobs(session, target.database)
