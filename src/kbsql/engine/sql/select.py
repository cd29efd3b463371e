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

from kbsql.engine.datasources.base import FrameScan
from kbsql.engine.sql import info_schema, kb_tables, names, render
from kbsql.engine.sql.plans import Compiled
from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.session import SqlSession

def compile_select(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
                   frames: dict[str, Any] | None = None) -> Compiled:
    """DuckDB SQL for a SELECT (or UNION ...); release `temps` after running."""
    tree = render.to_tree(statement)
    _name_columns(tree, statement)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    compiled = Compiled("")
    try:
        for table in list(tree.find_all(exp.Table)):
            _rewrite(session, table, ctes, ctx, frames or {}, compiled)
        for column in tree.find_all(exp.Column):  # ds.t.col -> t.col (t is the alias)
            if column.args.get("db") is not None:
                column.set("db", None)
                column.set("catalog", None)
        compiled.sql = render.to_duckdb(tree)
    except BaseException:
        session.duck.release(compiled.temps)
        raise
    return compiled


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
        expression.replace(exp.alias_(expression.copy(), target.to_string(), quoted=True))


def _rewrite(session: SqlSession, table: exp.Table, ctes: set[str], ctx: dict[str, Any],
             frames: dict[str, Any], compiled: Compiled) -> None:
    if not isinstance(table.this, exp.Identifier):
        raise SqlError(f"Table functions are not allowed in queries: {table.sql()}; "
                       "query tables of a data source as <data_source>.<table>")
    parts = [p.name for p in table.parts]
    if len(parts) == 1 and parts[0].lower() in ctes:
        return
    duck = session.duck
    if len(parts) == 1 and parts[0] in frames:
        item = duck.from_item(FrameScan(frames[parts[0]]), compiled.temps)
        compiled.cacheable = False
    else:
        target = names.resolve(session, parts, ctx["db"])
        if target.kind == "data":
            assert target.scan is not None
            item = duck.from_item(target.scan, compiled.temps)
            compiled.checks.append((parts, target.scan))
            if isinstance(target.scan, FrameScan) and target.scan.cache_key is None:
                compiled.cacheable = False
        else:
            compiled.cacheable = False
            if target.kind == "info":
                frame = info_schema.frame(session, target.name, ctx)
            else:
                frame = kb_tables.materialize(session, table, target)
            item = duck.from_item(FrameScan(frame), compiled.temps)
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(parts[-1]))
    item.set("alias", alias)
    table.replace(item)


def run_select(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any],
               query: str | None = None, frames: dict[str, Any] | None = None) -> pa.Table:
    """Run a SELECT; the answer as Arrow. `query` (the original text) enables the cache.

    No lock is held while compiling: a knowledge-base search or an agent's answer may take
    seconds and may itself run SQL. The session locks each DuckDB call on its own."""
    duck = session.duck
    plan = cached_plan(session, query, ctx["db"]) if query else None
    if plan is None:
        plan = compile_select(session, statement, ctx, frames)
        if query:
            session.plans.put(query, ctx["db"], plan)
    try:
        return duck.run(plan.sql)
    finally:
        duck.release(plan.temps)


def describe_sql(session: SqlSession, parts: list[str], ctx: dict[str, Any]) -> pa.Table:
    """Column names and DuckDB types of a table (DESCRIBE ds.table)."""
    statement = ast.Select(targets=[ast.Star()], from_table=ast.Identifier(parts=parts))
    duck = session.duck
    plan = compile_select(session, statement, ctx)
    try:
        with duck.lock:
            relation = duck.con.sql(f"DESCRIBE {plan.sql}")
            return relation.select("column_name", "column_type").to_arrow_table()
    finally:
        duck.release(plan.temps)


def cached_plan(session: SqlSession, query: str, db: str) -> Compiled | None:
    """The cached plan for `query` in project `db`, if its tables still resolve the same."""
    return session.plans.get(query, db, lambda parts, current: names.resolve(session, parts, current).scan)


def select_frame(session: SqlSession, statement: ast.ASTNode, ctx: dict[str, Any]) -> pd.DataFrame:
    """Run a SELECT over tables and return ONE pandas DataFrame of all its rows (used by
    `INSERT INTO kb SELECT ...`, which batches the rows itself)."""
    return run_select(session, statement, ctx).to_pandas()
