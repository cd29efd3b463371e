"""Name resolution: what a table reference in a query means.

`a` resolves in the current project (`context.db`); `x.a` in project or data source `x`;
`x.s.a` in schema `s` of data source `x`. Projects and data sources share one namespace
(the catalog enforces it), `information_schema` and the built-in `df` and `files` sources are reserved.
A name that resolves to nothing is an error naming the table AND the database.

The executor resolves a statement's own table once, before routing (`target_of`), and hands
the handler a `Routed`: a knowledge base's handler gets its record, a SELECT compiler the
resolution (`Resolutions`), so no statement reads the catalog twice for one name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast import mindsdb as md

from kbsql.engine.catalog import KbRecord
from kbsql.engine.datasources.frame_store import FRAMES_SOURCE
from kbsql.engine.datasources.scans import Scan
from kbsql.engine.datasources.upload_store import UPLOADS_SOURCE
from kbsql.engine.spelling import did_you_mean
from kbsql.engine.sql.refusals import unsupported_table
from kbsql.engine.view_store import find_view, views
from kbsql.interface.errors import NotFound, UnknownDatabase, UnknownTable
from kbsql.interface.progress import OnProgress

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

INFORMATION_SCHEMA = "information_schema"
LOG_DATABASE = "log"  # MindsDB's system database of LLM calls (llm_log) and job runs (jobs_history)
LOG_TABLES = ("llm_log", "jobs_history")
RESERVED = frozenset({INFORMATION_SCHEMA, LOG_DATABASE, FRAMES_SOURCE, UPLOADS_SOURCE})


@dataclass
class Resolved:
    """kind: 'data' (a data source table, `scan` set), 'kb' (`record` set), 'view' (`query`
    set: the view's SELECT text, read in project `database`), 'agent', 'info' or 'jobs'
    (`<project>.jobs`, `log.jobs_history`)."""

    kind: str
    database: str
    name: str
    scan: Scan | None = None
    record: KbRecord | None = None
    query: str | None = None


Resolutions = dict[tuple[str, ...], Resolved]
"""Table names (their parts) already resolved for this statement, handed down by the router."""


@dataclass(frozen=True)
class Routed:
    """What the router learned about a statement before choosing its handler: its own table
    (`FROM t`, `INTO t`, `DESCRIBE t`, or None), what that names (`target`, resolved once),
    the statement's text when its plan may be cached (None with bound parameters), and the
    caller's progress callback."""

    table: Any = None
    target: Resolved | None = None
    query: str | None = None
    progress: OnProgress | None = None
    """Where the statement's long work (INSERT ... SELECT, EVALUATE) reports its progress:
    the caller's callback, None when nobody listens (a server)."""

    @property
    def record(self) -> KbRecord | None:
        """The knowledge base the statement's own table names, if it names one."""
        return self.target.record if self.target is not None and self.target.kind == "kb" else None

    @property
    def resolutions(self) -> Resolutions:
        """The statement's own table as already resolved, for the SELECT compiler."""
        return {} if self.target is None else {tuple(table_parts(self.table)): self.target}


def find_project(session: SqlSession, name: str) -> str | None:
    """The stored spelling of project `name`, None if there is no such project."""
    try:
        return session.catalog.project(name).name
    except NotFound:
        return None


def not_found(table: str, database: str, hint: str = "") -> UnknownTable:
    return UnknownTable(f"Table '{table}' not found in database '{database}'{hint}")


def _log_table(name: str) -> Resolved:
    """A table of MindsDB's `log` database: llm_log (the model calls) or jobs_history (the job runs)."""
    if name.lower() not in LOG_TABLES:
        raise not_found(name, LOG_DATABASE, f" (known: {', '.join(LOG_TABLES)})")
    return Resolved("log" if name.lower() == "llm_log" else "jobs", LOG_DATABASE, name.lower())


ELSEWHERE = {"jobs_history": " (the runs of every project's jobs are log.jobs_history: WHERE name = '<job>')"}
"""A project table MindsDB's clients read that lives elsewhere here (mindsdb_sdk's
job.get_history() reads `jobs_history` in the job's project; MindsDB has none there either)."""


def resolve(session: SqlSession, parts: list[str], current: str) -> Resolved:
    database, rest = (current, parts) if len(parts) == 1 else (parts[0], parts[1:])
    name = ".".join(rest)
    if database.lower() == INFORMATION_SCHEMA:
        return Resolved("info", INFORMATION_SCHEMA, rest[-1].lower())
    if database.lower() == LOG_DATABASE:
        return _log_table(name)
    catalog = session.catalog
    is_project = True
    if len(rest) == 1:  # the common case first: one read of the project, one of the KB
        try:
            kb = catalog.find_knowledge_base(database, rest[0])
        except NotFound:
            is_project = False
        else:
            if kb is not None:
                return Resolved("kb", kb.project_name, kb.name, record=kb)
    project = find_project(session, database) if is_project else None
    if project is not None:
        if len(rest) != 1:
            raise not_found(name, project)
        view = find_view(catalog, project, rest[0])
        if view is not None:
            return Resolved("view", project, view.name, query=view.query)
        try:
            return Resolved("agent", project, catalog.agent(project, rest[0]).name)
        except NotFound:
            pass
        if rest[0].lower() == "jobs":  # the project's jobs (job_tables.py)
            return Resolved("jobs", project, "jobs")
        refused = unsupported_table(project, rest[0])  # the project's `models`: MindsDB's ML models
        if refused is not None:
            raise refused
        known = [*(kb.name for kb in catalog.knowledge_bases(project)),
                 *(a.name for a in catalog.agents(project)),
                 *(v.name for v in views(catalog, project))]
        hint = did_you_mean(name, known) or ELSEWHERE.get(rest[0].lower()) or (
            " (a table of a data source is named <data_source>.<table>)" if len(parts) == 1 else "")
        raise not_found(name, project, hint)
    source = session.duck.source(database)
    if source is None:
        known = [p.name for p in catalog.projects()] + [d.name for d in catalog.datasources()]
        # "not found in the database": MindsDB's words for a table it cannot place, which
        # its clients (and its own tests) match on
        hint = did_you_mean(database, [*known, FRAMES_SOURCE, INFORMATION_SCHEMA])
        raise UnknownDatabase(f"Database '{database}' not found (table '{'.'.join(parts)}' not found in the "
                              f"databases here){hint}; SHOW DATABASES lists them")
    with session.duck.cursor() as con:  # native sources ask DuckDB's catalog
        scan = source.scan(con, rest)
        known = [] if scan is not None else source.tables(con)
    if scan is None:
        raise not_found(name, source.name, did_you_mean(name, known))
    return Resolved("data", source.name, name, scan)


def misspelt_knowledge_base(session: SqlSession, table: Any, ctx: dict[str, Any]) -> str | None:
    """The error for an INSERT or DELETE whose table is one edit from a knowledge base (a
    typo, rather than a write to a data source), None otherwise."""
    found = project_table(session, table, ctx)
    if found is None:
        return None
    project, name = found
    hint = did_you_mean(name, [kb.name for kb in session.catalog.knowledge_bases(project)])
    return f"Knowledge base '{name}' doesn't exist in project '{project}'{hint}" if hint else None


def project_table(session: SqlSession, table: Any, ctx: dict[str, Any]) -> tuple[str, str] | None:
    """(project, name) of a `[project.]name` table whose project exists (the current one from
    `context.db` when unqualified); None for any other table (a data source's, a longer name)."""
    parts = table_parts(table) if isinstance(table, ast.Identifier) else []
    if len(parts) not in (1, 2):
        return None
    project = find_project(session, parts[0] if len(parts) == 2 else ctx["db"])
    return None if project is None else (project, parts[-1])


SEARCH_COLUMNS = frozenset({"content", "chunk_content", "relevance", "distance", "hybrid_search",
                            "hybrid_search_alpha", "reranking"})
"""Columns only a knowledge base has: a SELECT whose WHERE names one searches a knowledge base."""


def _names_in(node: Any) -> set[str]:
    """The last part of every column name in an expression (lower case)."""
    if isinstance(node, ast.Identifier):
        return {str(node.parts[-1]).lower()}
    found: set[str] = set()
    for child in getattr(node, "args", None) or []:
        found |= _names_in(child)
    return found


def missing_knowledge_base(session: SqlSession, statement: ast.Select, ctx: dict[str, Any]) -> None:
    """The error for a search (`WHERE content = ...`, `relevance`, ...) of a project's name that
    is not there: it is a knowledge base that is missing, so the error says so, with the near
    knowledge base names, and not how data sources name their tables, which is off-topic.
    Asked by the router when a SELECT's table does not resolve; other SELECTs keep "Table
    ... not found"."""
    table = statement.from_table
    parts = table_parts(table) if isinstance(table, ast.Identifier) else []
    if len(parts) not in (1, 2) or not _names_in(statement.where) & SEARCH_COLUMNS:
        return
    project = find_project(session, parts[0] if len(parts) == 2 else ctx["db"])
    if project is None:
        return
    known = [kb.name for kb in session.catalog.knowledge_bases(project)]
    raise UnknownTable(f"Knowledge base '{parts[-1]}' doesn't exist in project '{project}'"  # MindsDB's words
                       f"{did_you_mean(parts[-1], known) or '; SHOW KNOWLEDGE_BASES lists them'}")


def target_of(session: SqlSession, table: Any, ctx: dict[str, Any],
              ctes: frozenset[str] = frozenset()) -> Resolved | None:
    """What a statement's own table (`FROM t`, `INSERT INTO t`, `DESCRIBE t`) names, resolved
    once by the router; None when it is not a plain table name (a join, a subquery, a CTE)."""
    if not isinstance(table, ast.Identifier) or not 1 <= len(table.parts) <= 3:
        return None
    parts = table_parts(table)
    if len(parts) == 1 and parts[0].lower() in ctes:
        return None
    return resolve(session, parts, ctx["db"])


def table_parts(identifier: Any) -> list[str]:
    """The parts of a parser Identifier naming a database object."""
    return [str(p) for p in identifier.parts]


_NAMED_ON_CREATE = (md.CreateView, md.CreateKnowledgeBase, md.CreateAgent, md.CreateJob, md.CreateDatabase)


def lower_created_name(statement: ast.ASTNode) -> None:
    """An unquoted name a CREATE gives a view, knowledge base, agent, job, project or data
    source is stored lower case, as MindsDB stores it (`CREATE VIEW MyView` makes `myview`;
    `` `MyView` `` quoted keeps its case): listed and filtered by that name, as MindsDB's
    test_lowercase.py reads them (`information_schema.tables WHERE table_name = 'myview'` found
    nothing when `MyView` was kept). Names are looked up without case here either way."""
    name = getattr(statement, "name", None) if isinstance(statement, _NAMED_ON_CREATE) else None
    if isinstance(name, ast.Identifier) and name.parts and not (name.is_quoted or [False])[-1]:
        name.parts[-1] = str(name.parts[-1]).lower()
