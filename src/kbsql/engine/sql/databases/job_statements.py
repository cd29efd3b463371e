"""CREATE JOB, DROP JOB and SHOW JOBS (MindsDB's docs: mindsdb_sql/sql/create/jobs).

CREATE JOB checks what MindsDB checks (each statement parses, the dates read, END after
START, EVERY names a period) and stores the job; the engine's scheduler runs it
(engine/jobs/scheduler.py). A job without EVERY runs once, at START (default: now).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser.ast import mindsdb as md

from kbsql.engine.jobs.job_store import JobRecord, JobStore
from kbsql.engine.jobs.schedule import parse_date, parse_every, stamp, utcnow
from kbsql.engine.sql import refusals
from kbsql.engine.sql.databases import job_tables
from kbsql.engine.sql.databases.database_statements import filtered
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.tables.names import find_project, table_parts
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import SqlError, UnknownDatabase
from kbsql.interface.results import OkResult, SqlResult
from kbsql.interface.sqltext import statements

if TYPE_CHECKING:
    from mindsdb_sql_parser import ast

    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed


def _name(identifier: ast.Identifier, ctx: dict[str, Any]) -> tuple[str, str]:
    parts = list(identifier.parts)
    if len(parts) > 2:
        raise SqlError(f"A job is named [project.]name, not {identifier.to_string()}")
    return (parts[0], parts[1]) if len(parts) == 2 else (ctx["db"], parts[0])


def _check_statements(text: str | None, what: str) -> None:
    """Each statement parses, and is none the engine refuses: a job of `RETRAIN model; INSERT
    ...` (jobs.mdx's example 1) was stored, then failed at every run, where only
    log.jobs_history said why."""
    for sql in statements(text or ""):
        try:
            parsed = parsing.parse(sql)
        except Exception as exc:
            raise SqlError(f"Unable to parse the job's {what}: {sql}: {exc}") from None
        refused = refusals.refusal(parsed)
        if refused is not None:
            raise refusals.unsupported(f"{refused.message.removeprefix(refusals.PREFIX)}, in the "
                                       f"job's {what}")
    if text is not None and not statements(text):
        raise SqlError(f"The job's {what} holds no statement")


def create_job(session: SqlSession, statement: md.CreateJob, ctx: dict[str, Any],
               routed: Routed) -> SqlResult:
    project, name = _name(statement.name, ctx)
    _check_statements(statement.query_str, "statements")
    _check_statements(statement.if_query_str, "IF statements")
    now = utcnow()
    start = max(parse_date(statement.start_str), now) if statement.start_str else now
    end = parse_date(statement.end_str) if statement.end_str else None
    if statement.repeat_str is None:
        end = None  # runs once: END means nothing (MindsDB)
    else:
        parse_every(statement.repeat_str)
    if end is not None and end < start:
        raise SqlError(f"Wrong end date: END {stamp(end)} is before START {stamp(start)}")
    control = current_control()
    remaining = control.remaining() if control is not None else None
    creator: dict[str, Any] = {"timeout": round(remaining, 3)} if remaining else {}
    if control is not None and control.owner is not None:  # its runs take this owner's share
        creator["owner"] = control.owner
    job = JobRecord(0, project, name, statement.query_str, statement.if_query_str, stamp(start) or "",
                    stamp(end), statement.repeat_str, stamp(start), stamp(now) or "", creator)
    JobStore(session.catalog).create(job, bool(statement.if_not_exists))
    session.jobs_created()  # this engine now has a job to run
    return OkResult(None, context=ctx)


def drop_job(session: SqlSession, statement: md.DropJob, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    project, name = _name(statement.name, ctx)
    JobStore(session.catalog).drop(project, name, bool(statement.if_exists))
    return OkResult(None, context=ctx)


def show_jobs(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """SHOW JOBS [FROM project] [LIKE 'x' | WHERE ...]: a project's jobs, as MindsDB's command
    executor answers it (`information_schema.jobs` of that project, the filter applied)."""
    source = statement.from_table or statement.in_table
    project = ctx["db"] if source is None else table_parts(source)[-1]
    if find_project(session, project) is None:
        raise UnknownDatabase(f"Project not found: {project} (SHOW DATABASES lists them)")
    return filtered(session, job_tables.jobs(session, project), statement, ctx)
