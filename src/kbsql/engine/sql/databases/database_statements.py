"""Projects and data sources in SQL: CREATE/DROP DATABASE (and PROJECT), USE, SHOW
DATABASES, SHOW [FULL] TABLES [FROM db], DESCRIBE db.table.

`CREATE DATABASE p` without an engine, or with `ENGINE = 'mindsdb'`, makes a project (the
parser reads `CREATE PROJECT p` the same way); any other engine makes a data source. A data
source is checked (its file exists, its server answers, its tables list) before the
statement succeeds, and removed again if that check fails: nothing half-made is stored.
DROP DATABASE never takes anything else with it: a project that holds knowledge bases or
agents, or a data source a knowledge base stores its chunks in (or an agent reads), is
refused with one line naming them (catalog_uses.py), `IF EXISTS` or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.mindsdb.create_database import CreateDatabase

from kbsql.engine.datasources import registry
from kbsql.engine.datasources.frame_store import FRAMES_SOURCE
from kbsql.engine.spelling import did_you_mean
from kbsql.engine.sql import refusals
from kbsql.engine.sql.arrow_results import ArrowTableResult
from kbsql.engine.sql.databases import info_schema, mysql_schema
from kbsql.engine.sql.information_functions import system_variables
from kbsql.engine.sql.tables.names import (
    INFORMATION_SCHEMA,
    LOG_DATABASE,
    LOG_TABLES,
    RESERVED,
    Routed,
    find_project,
    misspelt_knowledge_base,
    project_table,
    table_parts,
)
from kbsql.engine.sql.tables.select import describe_sql, run_select
from kbsql.engine.view_store import views
from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.column_types import SHOW_COLUMNS, SHOW_FULL_COLUMNS, show_columns_rows, with_own_type
from kbsql.interface.errors import Conflict, ServiceError, SqlError, UnknownDatabase, UnknownTable
from kbsql.interface.results import OkResult, SqlResult
from kbsql.interface.system_variables import shown

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

PROJECT_ENGINES = (None, "", "mindsdb")


def _name(identifier: ast.Identifier) -> str:
    parts = table_parts(identifier)
    if len(parts) != 1:
        raise SqlError(f"A database name has one part, got {'.'.join(parts)}")
    return parts[0]


def create_database(session: SqlSession, statement: CreateDatabase, ctx: dict[str, Any],
                    routed: Routed) -> SqlResult:
    name = _name(statement.name)
    engine = (statement.engine or "").lower() or None
    catalog = session.catalog
    if name.lower() in RESERVED:
        raise SqlError(f"The name {name} is reserved; choose another database name")
    exists = find_project(session, name) is not None or catalog.find_datasource(name) is not None
    if exists and statement.if_not_exists:
        return OkResult(None, context=ctx)
    if exists:
        raise Conflict(f"Database with name {name} already exists", title="Database already exists")
    if engine in PROJECT_ENGINES:
        catalog.create_project(name)
        return OkResult(None, context=ctx)
    if session.duck.policy is not None and engine is not None:  # before normalize looks for the
        # file: "does not exist" past --allow-path told which files the server's machine holds
        session.duck.policy.check_source(engine, dict(statement.parameters or {}))
    parameters = registry.normalize(engine, dict(statement.parameters or {}), session.duck.engines,
                                    session.kbs.service.storage)
    catalog.create_datasource(name, engine, parameters)
    try:
        source = session.duck.source(name)
        assert source is not None
        with session.duck.cursor() as con:
            source.tables(con)
    except BaseException:
        session.duck.forget(name)
        catalog.delete_datasource(name)
        raise
    return OkResult(None, context=ctx)


def drop_database(session: SqlSession, statement: ast.DropDatabase, ctx: dict[str, Any],
                  routed: Routed) -> SqlResult:
    name = _name(statement.name)
    catalog = session.catalog
    if name.lower() in RESERVED:
        raise SqlError(f"{name} is built in and cannot be dropped")
    project = find_project(session, name)
    if project is not None:
        if project.lower() == DEFAULT_PROJECT:
            raise SqlError(f"The default project {DEFAULT_PROJECT} cannot be dropped")
        catalog.drop_project(project)  # refused while it holds knowledge bases or agents
        if str(ctx.get("db", "")).lower() == project.lower():
            ctx["db"] = DEFAULT_PROJECT
    elif catalog.find_datasource(name) is not None:
        catalog.delete_datasource(name)  # refused while a knowledge base or agent uses it
        session.duck.forget(name)
    elif not statement.if_exists:
        raise UnknownDatabase(f"Database {name} does not exist")
    session.plans.clear()
    return OkResult(None, context=ctx)


def use(session: SqlSession, statement: ast.Use, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    name = _name(statement.value)
    project = find_project(session, name)
    if project is None:
        hint = " (it is a data source; USE takes a project)" \
            if session.catalog.find_datasource(name) is not None else \
            did_you_mean(name, [p.name for p in session.catalog.projects()])
        raise UnknownDatabase(f"Project {name} does not exist{hint}")
    ctx["db"] = project
    return OkResult(None, context=ctx)


def filtered(session: SqlSession, table: pa.Table, statement: ast.Show,
             ctx: dict[str, Any], shown: list[str] | None = None) -> SqlResult:
    """A SHOW answer with its `LIKE '...'` (on the first column) / `WHERE ...` applied (by
    DuckDB, like a SELECT); `shown`: the columns answered when the WHERE may also name others
    of `table` (MindsDB's SHOW DATABASES filters information_schema.DATABASES: `WHERE name = x`)."""
    where = statement.where
    if statement.like is not None:
        like = ast.BinaryOperation("like", args=[ast.Identifier(table.column_names[0]),
                                                 ast.Constant(statement.like)])
        where = like if where is None else ast.BinaryOperation("and", args=[where, like])
    if where is not None:
        query = ast.Select(targets=[ast.Star()], from_table=ast.Identifier("__show__"), where=where)
        table = run_select(session, query, ctx, frames={"__show__": table})
    return ArrowTableResult(table if shown is None else table.select(shown), ctx)


def show_databases(session: SqlSession, statement: ast.Show, ctx: dict[str, Any],
                   routed: Routed) -> SqlResult:
    """SHOW [FULL] DATABASES: `Database`, and with FULL MindsDB's `TYPE` and `ENGINE`."""
    listed = info_schema.databases(session)
    full = "full" in [m.lower() for m in statement.modes or []]
    return filtered(session, named_databases(listed, "Database"), statement, ctx,
                    ["Database", "TYPE", "ENGINE"] if full else ["Database"])


def named_databases(listed: pa.Table, name: str) -> pa.Table:
    """information_schema.DATABASES rows with their NAME also as `name` first, the column a
    SHOW answers and its LIKE reads; its WHERE may name NAME, TYPE or ENGINE, as MindsDB's."""
    return pa.table({name: listed.column("NAME"),
                     **{c: listed.column(c) for c in ("NAME", "TYPE", "ENGINE")}})


def show_tables(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    database = _name(statement.from_table or statement.in_table) \
        if (statement.from_table or statement.in_table) else ctx["db"]
    catalog = session.catalog
    project = find_project(session, database)
    if database.lower() == INFORMATION_SCHEMA:
        rows = [(t, "SYSTEM VIEW") for t in info_schema.TABLES]
    elif database.lower() == LOG_DATABASE:
        rows = [(t, "SYSTEM VIEW") for t in LOG_TABLES]
    elif project is not None:
        database = project
        rows = [(kb.name, "KNOWLEDGE BASE") for kb in catalog.knowledge_bases(project)]
        rows += [(a.name, "AGENT") for a in catalog.agents(project)]
        rows += [(v.name, "VIEW") for v in views(catalog, project)]
    else:
        source = session.duck.source(database)
        if source is None:
            raise UnknownDatabase(f"Database {database} does not exist; SHOW DATABASES lists them")
        database = source.name
        with session.duck.cursor() as con:
            rows = [(t, "BASE TABLE") for t in source.tables(con)]
    columns: dict[str, Any] = {f"Tables_in_{database}": pa.array([r[0] for r in rows], pa.string())}
    if "full" in [m.lower() for m in statement.modes or []]:
        columns["Table_type"] = pa.array([r[1] for r in rows], pa.string())
    return filtered(session, pa.table(columns), statement, ctx)


def describe(session: SqlSession, statement: ast.Describe, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """DESCRIBE [db.]table: its columns, their DuckDB types (what SQL over the table uses) and
    ORIGINAL_TYPE, the type in the source's own words where the source tells it
    (PostgreSQL's `character varying`; MindsDB's information_schema.COLUMNS column of that
    name), else the DuckDB type in lower case."""
    parts = table_parts(statement.value)
    table = describe_sql(session, parts, ctx, routed.resolutions)
    own = mysql_schema.own_types_of(session, parts, ctx, routed.resolutions)
    names, kinds = table.column(0).to_pylist(), table.column(1).to_pylist()
    original = [own[n][0] if n in own else str(k).lower() for n, k in zip(names, kinds, strict=True)]
    return ArrowTableResult(pa.table({"COLUMN_NAME": pa.array(names, pa.string()),
                                      "DATA_TYPE": pa.array(kinds, pa.string()),
                                      "ORIGINAL_TYPE": pa.array(original, pa.string())}), ctx)


def show_columns(session: SqlSession, statement: ast.Show, ctx: dict[str, Any], routed: Routed) -> SqlResult:
    """SHOW [FULL] COLUMNS (or FIELDS) FROM [db.]table [FROM|IN db] [LIKE | WHERE] in
    MindsDB's shape (`Field, Type, Null, Key, Default, Extra`, FULL adds `Collation,
    Privileges, Comment`; `Type` in MySQL's words): what its clients read, over HTTP too."""
    if statement.from_table is None:
        raise refusals.fallback(statement)
    parts = table_parts(statement.from_table)
    table = describe_sql(session, parts, ctx, routed.resolutions)
    pairs = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    own = mysql_schema.own_types_of(session, parts, ctx, routed.resolutions)
    if own:
        pairs = [(name, with_own_type(kind, own.get(name))) for name, kind in pairs]
    return show_columns_answer(session, pairs, statement, ctx)


def show_columns_answer(session: SqlSession, pairs: list[tuple[str, str]], statement: ast.Show,
                        ctx: dict[str, Any]) -> SqlResult:
    """The SHOW [FULL] COLUMNS answer of (name, engine type) pairs, its LIKE (on `Field`) or
    WHERE applied."""
    full = "full" in [m.lower() for m in statement.modes or []]
    names = SHOW_FULL_COLUMNS if full else SHOW_COLUMNS
    rows = show_columns_rows(pairs, full)
    table = pa.table({n: pa.array([r[i] for r in rows], pa.string()) for i, n in enumerate(names)})
    return filtered(session, table, statement, ctx)


def refuse_write(session: SqlSession, statement: ast.Insert | ast.Update | ast.Delete, ctx: dict[str, Any],
                 routed: Routed) -> SqlResult:
    """INSERT, UPDATE or DELETE on anything but a knowledge base: refused in one line (or
    the project it names does not exist)."""
    missing = _missing_project(session, statement.table, ctx) or misspelt_knowledge_base(
        session, statement.table, ctx)
    if missing is not None:
        raise SqlError(missing)
    absent = _absent_project_table(session, statement.table, ctx)
    if absent is not None:
        found = project_table(session, statement.table, ctx)
        feature = refusals.unsupported_table(*found) if found is not None else None
        raise feature or UnknownTable(absent)  # the project's `models`: the feature, not a typo
    raise refusals.unsupported(f"{type(statement).__name__.upper()} of data-source tables: "
                               f"{statement.to_string()} (INSERT, UPDATE and DELETE write to "
                               "knowledge bases only)")


def _absent_project_table(session: SqlSession, table: Any, ctx: dict[str, Any]) -> str | None:
    """Why a write to `[project.]name` found nothing, in MindsDB's words ("Table or Knowledge
    Base '...' doesn't exist", which its clients match on), when the project holds no
    knowledge base or agent of that name; None otherwise."""
    found = project_table(session, table, ctx)
    if found is None:
        return None
    (project, name), catalog = found, session.catalog
    held = [kb.name for kb in catalog.knowledge_bases(project)] + [a.name for a in catalog.agents(project)]
    if name.lower() in (h.lower() for h in held):
        return None
    return (f"Table or Knowledge Base '{name}' doesn't exist in project '{project}'; SHOW KNOWLEDGE_BASES "
            "lists them")


def _missing_project(session: SqlSession, table: Any, ctx: dict[str, Any]) -> str | None:
    """Why a write found no knowledge base, when the reason is a project that does not
    exist (the current one from `context.db`, or `project.kb`); None otherwise."""
    parts = [str(p) for p in getattr(table, "parts", [])]
    if len(parts) not in (1, 2):
        return None
    project = parts[0] if len(parts) == 2 else ctx["db"]
    if project.lower() == FRAMES_SOURCE or session.catalog.find_datasource(project):
        return None
    try:
        session.catalog.project(project)
    except ServiceError as exc:
        return exc.detail
    return None


def show_variables(session: SqlSession, statement: ast.Show, ctx: dict[str, Any],
                   routed: Routed) -> SqlResult:
    """SHOW [SESSION | GLOBAL] VARIABLES [LIKE | WHERE]: `Variable_name`, `Value`, as the MySQL
    door answers it (MindsDB answers it on every door); from the table `@@name` reads."""
    listed = sorted(system_variables(ctx).items())
    table = pa.table({"Variable_name": [name for name, _ in listed],
                      "Value": pa.array([shown(value) for _, value in listed], pa.string())})
    return filtered(session, table, statement, ctx)
