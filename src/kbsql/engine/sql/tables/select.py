"""SELECT over tables: resolve every table reference, rewrite it to what DuckDB reads, run.

Each reference becomes a FROM item the engine controls (an attached table, a file
reader, or a registered frame) under the alias the user wrote (or the table's own name),
so `t.col` keeps working. Knowledge bases and agents in a query with other tables are
materialized first (`kb_tables`). A compiled query that reads only stable tables (attached
files, registered DataFrames) is cached per (text, project) and re-checked cheaply on
reuse, so a repeated query skips both parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from mindsdb_sql_parser import ast
from sqlglot import exp

from kbsql.engine.datasources.scans import FrameScan, NativeTable
from kbsql.engine.sql import refusals
from kbsql.engine.sql.arrow_results import JSON_COLUMNS, ArrowTableResult
from kbsql.engine.sql.databases import info_schema, job_tables
from kbsql.engine.sql.information_functions import answer_information_functions
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.tables import (
    agent_join,
    kb_tables,
    names,
    native_queries,
    source_columns,
    sqlglot_render,
)
from kbsql.engine.sql.tables.like_escape import bound_like_escapes
from kbsql.engine.sql.tables.mysql_functions import adapt_mysql_functions
from kbsql.engine.sql.tables.plans import Compiled
from kbsql.engine.sql.tables.setting_reads import refuse_qualified_functions, refuse_setting_reads
from kbsql.engine.sql.tables.value_caps import cap_values
from kbsql.interface.errors import NotFound, SqlError
from kbsql.interface.results import SqlResult

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.session import SqlSession

def compile_select(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
                   frames: dict[str, Any] | None = None,
                   resolved: names.Resolutions | None = None) -> Compiled:
    """DuckDB SQL for a SELECT (or UNION ...), with the frames and files it reads. `resolved`:
    table names the router already resolved for this statement (not resolved again)."""
    compiled = Compiled("")
    tree = compile_tree(session, statement, ctx, compiled, frames, resolved)
    compiled.lineage = source_columns.lineage(tree, compiled.sources)
    compiled.sql = sqlglot_render.to_duckdb(tree)
    return compiled


def compile_tree(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any], compiled: Compiled,
                 frames: dict[str, Any] | None = None,
                 resolved: names.Resolutions | None = None) -> exp.Expression:
    """`compile_select`'s DuckDB query tree, before rendering (a write wraps it: source_writes);
    the frames and files it reads go into `compiled`."""
    tree = _tree(session, statement, ctx, compiled, frames, resolved)
    _unalias_stars(tree)
    _bound(session, tree)
    return tree


def _bound(session: SqlSession, tree: exp.Expression) -> None:
    """The last steps of every compiled tree: qualifiers DuckDB reads, and the value bounds."""
    for column in tree.find_all(exp.Column):  # ds.t.col -> t.col (t is the alias)
        if column.args.get("db") is not None:
            column.set("db", None)
            column.set("catalog", None)
    refuse_setting_reads(tree)  # current_setting('secret_directory') and the like
    bound_like_escapes(tree)  # like_escape(...): linear matching, or refused
    refuse_qualified_functions(tree)  # src.macro(): a DuckDB file's macro reads any file
    cap_values(tree, session.duck.value_cap, session.duck.settings.checks)  # repeat('x', 10**9)...: per row


def _unalias_stars(tree: exp.Expression) -> None:
    """`SELECT * AS content FROM t` (`* content`, as MindsDB's test_autobatch writes it) keeps
    every column under its own name, as MindsDB answers it: DuckDB would name each of them
    `content`, and a DataFrame or a knowledge-base insert of that answer keeps only one."""
    for alias in list(tree.find_all(exp.Alias)):
        star = alias.this
        if isinstance(star, exp.Star) or (isinstance(star, exp.Column) and isinstance(star.this, exp.Star)):
            alias.replace(star)


def _tree(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any], compiled: Compiled,
          frames: dict[str, Any] | None, resolved: names.Resolutions | None) -> exp.Expression:
    """The tree with every table reference rewritten (a view's own SELECT inlined)."""
    adapt_mysql_functions(statement)  # LENGTH, CHAR, DAYOFWEEK ... answer as MySQL's
    natives = native_queries.take(session, statement)  # FROM pg (its own SQL): read as a CTE
    tree = sqlglot_render.to_tree(statement)
    _name_columns(tree, statement)
    ctes = _rename_ctes(tree, f"__kbsql_v{compiled.views}_cte_" if compiled.views else "__kbsql_cte_")
    ctes.update({name: name for name in natives})
    resolved = dict(resolved or {})  # what the agent joins' pass resolves is not resolved again
    frames = _ask_joined_agents(session, tree, ctes, ctx, dict(frames or {}), resolved, compiled)
    for table in list(tree.find_all(exp.Table)):
        _rewrite(session, table, ctes, ctx, frames, compiled, resolved)
    for name, item in natives.items():  # after the rewrite: their FROM items are the source's own
        tree = tree.with_(name, as_=exp.select("*").from_(item), copy=False)
        compiled.cacheable = False  # a remote server's answer, asked again each time
    return tree


def _ask_joined_agents(session: SqlSession, tree: exp.Expression, ctes: dict[str, str],
                       ctx: dict[str, Any], frames: dict[str, Any],
                       resolved: names.Resolutions, compiled: Compiled) -> dict[str, Any]:
    """Each agent joined on a column (`JOIN my_agent a ON a.question = t.q`) asked its
    questions and replaced by their answers' frame (agent_join); `frames` with those frames.
    `compiled.agent_questions` counts the statement's questions, its views' too: the bound is
    the statement's, where each join had its own (a UNION of five joins asked 5x it)."""
    known = {**ctes, **{generated: generated for generated in ctes.values()}}

    def resolve(table: exp.Table) -> names.Resolved | None:
        """What a joined table is; None for a CTE, a frame, or a name that does not resolve
        (the rewrite below reports it, in the query's order)."""
        parts = [p.name for p in table.parts]
        if len(parts) == 1 and (parts[0].lower() in known or parts[0] in frames):
            return None
        if tuple(parts) not in resolved:
            try:
                resolved[tuple(parts)] = names.resolve(session, parts, ctx["db"])
            except NotFound:
                return None
        return resolved[tuple(parts)]

    def run_rows(select: exp.Select) -> pa.Table:
        compiled = Compiled("")
        for table in list(select.find_all(exp.Table)):
            _rewrite(session, table, known, ctx, frames, compiled, resolved)
        _bound(session, select)
        compiled.sql = sqlglot_render.to_duckdb(select)
        return session.duck.run(compiled)

    for join, target, source in agent_join.joined_agents(tree, resolve):
        name = f"__kbsql_agent_{len(frames)}"
        frames[name] = agent_join.answer_frame(session, join, target, source, run_rows,
                                               session.agent_join_max_rows, compiled.agent_questions)
        compiled.agent_questions += frames[name].num_rows
        join.this.replace(agent_join.frame_reference(name, join.this))
    return frames


MAX_VIEWS = 32
"""Views one statement may read (a view reading views ...): past it, a view that reads itself."""


def _view_item(session: SqlSession, target: names.Resolved, compiled: Compiled) -> exp.Expression:
    """A view's SELECT as a subquery, compiled in the view's project (so its unqualified
    names mean there what they meant when it was made)."""
    compiled.views += 1
    compiled.cacheable = False  # a view may be replaced: its readers are compiled again
    if compiled.views > MAX_VIEWS:
        raise SqlError(f"The statement reads more than {MAX_VIEWS} views: does view "
                       f"{target.database}.{target.name} read itself?")
    statement = parsing.parse(target.query or "")
    if not isinstance(statement, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
        raise SqlError(f"View {target.database}.{target.name} is not a SELECT")
    answer_information_functions(statement, {"db": target.database}, target.query)
    inner = _tree(session, statement, {"db": target.database}, compiled, None, None)
    return exp.Subquery(this=inner)


def _rename_ctes(tree: exp.Expression, prefix: str = "__kbsql_cte_") -> dict[str, str]:
    """Give every CTE a generated name; the map is (lower-cased) user name -> that name.

    Why: a reference named like a CTE is left for DuckDB to resolve, and DuckDB reads an
    unknown table name that looks like a file path (`/etc/x.csv`) as that file (a
    replacement scan). A CTE named like a path, defined in one subquery and referenced
    outside it, would read any file past the path policy. Under generated names, such a
    reference names no CTE and no file: DuckDB answers that the table does not exist."""
    renamed: dict[str, str] = {}
    for cte in tree.find_all(exp.CTE):
        alias = cte.args.get("alias")
        if alias is None:
            continue
        safe = renamed.setdefault(cte.alias_or_name.lower(), f"{prefix}{len(renamed)}")
        alias.set("this", exp.to_identifier(safe))
    return renamed


def _name_columns(tree: exp.Expression, statement: ast.ASTNode) -> None:
    """An unaliased expression is named as the user wrote it (`count(*)`, not DuckDB's
    `count_star()`), as the reference names its columns."""
    targets = getattr(statement, "targets", None)
    if not isinstance(tree, exp.Select) or not targets or len(targets) != len(tree.expressions):
        return
    for expression, target in zip(list(tree.expressions), targets, strict=True):
        if isinstance(expression, (exp.Alias, exp.Column, exp.Star)) or \
                getattr(target, "alias", None) is not None:
            continue
        # a string constant is named by its text (`SELECT 'a'` gives column `a`, as MindsDB)
        name = target.value if isinstance(target, ast.Constant) and isinstance(target.value, str) \
            else target.to_string()
        expression.replace(exp.alias_(expression.copy(), name, quoted=True))


def _refuse_native_query(session: SqlSession, table: exp.Table) -> None:
    """MindsDB's native query, `FROM pg (SELECT ... in pg's own SQL)` (its test_executor.py
    TestWithNativeQuery), reads as a call of a function named after the data source: refused
    as the feature it is when that name is a data source (the text is never sent to the
    source here), not as a table function."""
    call = table.this
    if not isinstance(call, exp.Anonymous) or not call.name:
        return
    record = session.catalog.find_datasource(call.name)
    if record is not None:
        raise refusals.native_query(call.name, record.engine)
    if any(isinstance(arg, exp.Query) for arg in call.expressions):  # `nope (SELECT ...)`
        raise NotFound(f"Unknown data source {call.name!r} in the native query {call.name} (...): "
                       "SHOW DATABASES lists them")


def _rewrite(session: SqlSession, table: exp.Table, ctes: dict[str, str], ctx: dict[str, Any],
             frames: dict[str, Any], compiled: Compiled, resolved: names.Resolutions) -> None:
    if not isinstance(table.this, exp.Identifier):
        _refuse_native_query(session, table)
        raise SqlError(f"Table functions are not allowed in queries: {table.sql()}; "
                       "query tables of a data source as <data_source>.<table>")
    parts = [p.name for p in table.parts]
    if len(parts) == 1 and parts[0].lower() in ctes:  # its generated name, under the user's
        table.set("alias", table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(parts[0])))
        table.set("this", exp.to_identifier(ctes[parts[0].lower()]))
        return
    duck = session.duck
    if len(parts) == 1 and parts[0] in frames:
        item = duck.from_item(FrameScan(frames[parts[0]]), compiled)
        compiled.cacheable = False
    else:
        target = resolved.get(tuple(parts)) or names.resolve(session, parts, ctx["db"])
        if target.kind == "data":
            assert target.scan is not None
            item = duck.from_item(target.scan, compiled)
            compiled.checks.append((parts, target.scan))
            if isinstance(target.scan, NativeTable) and target.database:
                compiled.sources.append(source_columns.SourceItem(item, target.database, target.scan))
        elif target.kind == "view":
            item = _view_item(session, target, compiled)
        else:
            compiled.cacheable = False
            if target.kind == "info":
                frame = info_schema.frame(session, target.name, ctx, table, describe_sql)
            elif target.kind == "jobs":
                frame = job_tables.frame(session, target)
            elif target.kind == "log":
                frame = info_schema.llm_log(session)
            else:
                frame = kb_tables.materialize(session, table, target)
                compiled.kb_metadata = compiled.kb_metadata or target.kind == "kb"
            item = duck.from_item(FrameScan(frame), compiled)
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(parts[-1]))
    item.set("alias", alias)
    table.replace(item)


def run_select(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
               query: str | None = None, frames: dict[str, Any] | None = None,
               resolved: names.Resolutions | None = None) -> pa.Table:
    """Run a SELECT; the answer as Arrow. `query` (the original text) enables the cache.

    Nothing is held while compiling: a knowledge-base search or an agent's answer may take
    seconds and may itself run SQL. The plan runs on a cursor of its own (`duck.run`)."""
    plan = cached_plan(session, query, ctx["db"]) if query else None
    if plan is None:
        plan = compile_select(session, statement, ctx, frames, resolved)
        if query:
            session.plans.put(query, ctx["db"], plan)
    return run_plan(session, plan)


def run_plan(session: SqlSession, plan: Compiled) -> pa.Table:
    """Run a compiled SELECT (fresh or from the plan cache); its columns marked as the
    result reads them: a source's own types (source_columns), a knowledge base's JSON."""
    table = session.duck.run(plan)
    if plan.lineage:
        table = source_columns.mark(session.duck, table, plan.lineage)
    if plan.kb_metadata and "metadata" in table.column_names:
        # the contract's `metadata` is an object: mark the column so the result parses it back
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), JSON_COLUMNS: b"metadata"})
    return table


def select_tables(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
                  routed: names.Routed) -> SqlResult:
    """The handler of a SELECT (or UNION ...) over tables: its answer as Arrow."""
    return ArrowTableResult(run_select(session, statement, ctx, routed.query, resolved=routed.resolutions),
                            ctx)


def describe_sql(session: SqlSession, parts: list[str], ctx: dict[str, Any],
                 resolved: names.Resolutions | None = None) -> pa.Table:
    """Column names and DuckDB types of a table (DESCRIBE ds.table)."""
    statement = ast.Select(targets=[ast.Star()], from_table=ast.Identifier(parts=parts))
    return session.duck.describe(compile_select(session, statement, ctx, resolved=resolved))


def cached_plan(session: SqlSession, query: str, db: str) -> Compiled | None:
    """The cached plan for `query` in project `db`, if its tables still resolve the same."""
    return session.plans.get(query, db, lambda parts, current: names.resolve(session, parts, current).scan)


def select_frame(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any]) -> pd.DataFrame:
    """Run a SELECT over tables and return ONE pandas DataFrame of all its rows (subqueries'
    values, EVALUATE's test table; an inline `INSERT INTO kb SELECT ...` reads the Arrow
    answer a batch at a time instead, kb_write.table_of)."""
    return run_select(session, statement, ctx).to_pandas()
