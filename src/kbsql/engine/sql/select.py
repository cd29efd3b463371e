"""SELECT over tables: resolve every table reference, rewrite it to what DuckDB reads, run.

Each reference becomes a FROM item the engine controls (an attached table, a file
reader, or a registered frame) under the alias the user wrote (or the table's own name),
so `t.col` keeps working. Knowledge bases and agents in a query with other tables are
materialized first (`kb_tables`). A compiled query that reads only stable tables (attached
files, registered DataFrames) is cached per (text, project) and re-checked cheaply on
reuse, so a repeated query skips both parsers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from mindsdb_sql_parser import ast
from sqlglot import exp

from kbsql.engine.datasources.base import FrameScan, Scan
from kbsql.engine.sql import info_schema, kb_tables, names, render
from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    from kbsql.engine.sql.executor import SqlExecutor

PLAN_CACHE_SIZE = 256


@dataclass
class Compiled:
    sql: str
    temps: list[str] = field(default_factory=list)
    checks: list[tuple[list[str], Scan]] = field(default_factory=list)
    cacheable: bool = True


class PlanCache:
    """(query text, project) -> compiled SQL, valid while its tables resolve the same way."""

    def __init__(self, size: int = PLAN_CACHE_SIZE):
        self.size = size
        self._plans: OrderedDict[tuple[str, str], Compiled] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, executor: SqlExecutor, query: str, db: str) -> Compiled | None:
        with self._lock:
            plan = self._plans.get((query, db))
        if plan is None:
            return None
        try:
            for parts, scan in plan.checks:
                if names.resolve(executor, parts, db).scan != scan:
                    raise LookupError
        except (LookupError, SqlError):
            with self._lock:
                self._plans.pop((query, db), None)
            return None
        return plan

    def put(self, query: str, db: str, plan: Compiled) -> None:
        if plan.cacheable and not plan.temps:
            with self._lock:
                self._plans[(query, db)] = plan
                while len(self._plans) > self.size:
                    self._plans.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()


def compile_select(executor: SqlExecutor, statement: ast.ASTNode, ctx: dict[str, Any],
                   frames: dict[str, Any] | None = None) -> Compiled:
    """DuckDB SQL for a SELECT (or UNION ...); release `temps` after running."""
    tree = render.to_tree(statement)
    _name_columns(tree, statement)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    compiled = Compiled("")
    try:
        for table in list(tree.find_all(exp.Table)):
            _rewrite(executor, table, ctes, ctx, frames or {}, compiled)
        for column in tree.find_all(exp.Column):  # ds.t.col -> t.col (t is the alias)
            if column.args.get("db") is not None:
                column.set("db", None)
                column.set("catalog", None)
        compiled.sql = render.to_duckdb(tree)
    except BaseException:
        executor.duck.release(compiled.temps)
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


def _rewrite(executor: SqlExecutor, table: exp.Table, ctes: set[str], ctx: dict[str, Any],
             frames: dict[str, Any], compiled: Compiled) -> None:
    if not isinstance(table.this, exp.Identifier):
        raise SqlError(f"Table functions are not allowed in queries: {table.sql()}; "
                       "query tables of a data source as <data_source>.<table>")
    parts = [p.name for p in table.parts]
    if len(parts) == 1 and parts[0].lower() in ctes:
        return
    duck = executor.duck
    if len(parts) == 1 and parts[0] in frames:
        item = duck.from_item(FrameScan(frames[parts[0]]), compiled.temps)
        compiled.cacheable = False
    else:
        target = names.resolve(executor, parts, ctx["db"])
        if target.kind == "data":
            assert target.scan is not None
            item = duck.from_item(target.scan, compiled.temps)
            compiled.checks.append((parts, target.scan))
            if isinstance(target.scan, FrameScan) and target.scan.cache_key is None:
                compiled.cacheable = False
        else:
            compiled.cacheable = False
            if target.kind == "info":
                frame = info_schema.frame(executor, target.name, ctx)
            else:
                frame = kb_tables.materialize(executor, table, target)
            item = duck.from_item(FrameScan(frame), compiled.temps)
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(parts[-1]))
    item.set("alias", alias)
    table.replace(item)


def run_select(executor: SqlExecutor, statement: ast.ASTNode, ctx: dict[str, Any],
               query: str | None = None, frames: dict[str, Any] | None = None) -> pa.Table:
    """Run a SELECT; the answer as Arrow. `query` (the original text) enables the cache.

    No lock is held while compiling: a knowledge-base search or an agent's answer may take
    seconds and may itself run SQL. The session locks each DuckDB call on its own."""
    duck = executor.duck
    plan = executor.plans.get(executor, query, ctx["db"]) if query else None
    if plan is None:
        plan = compile_select(executor, statement, ctx, frames)
        if query:
            executor.plans.put(query, ctx["db"], plan)
    try:
        return duck.run(plan.sql)
    finally:
        duck.release(plan.temps)


def describe_sql(executor: SqlExecutor, parts: list[str], ctx: dict[str, Any]) -> pa.Table:
    """Column names and DuckDB types of a table (DESCRIBE ds.table)."""
    statement = ast.Select(targets=[ast.Star()], from_table=ast.Identifier(parts=parts))
    duck = executor.duck
    plan = compile_select(executor, statement, ctx)
    try:
        with duck.lock:
            relation = duck.con.sql(f"DESCRIBE {plan.sql}")
            return relation.select("column_name", "column_type").to_arrow_table()
    finally:
        duck.release(plan.temps)
