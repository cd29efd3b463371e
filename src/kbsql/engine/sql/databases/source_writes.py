"""Writes to connected data sources (duckdb, sqlite, postgres), as MindsDB does them:
`CREATE [OR REPLACE] TABLE src.t (SELECT ...)` (or with column definitions), `INSERT INTO
src.t SELECT ... | VALUES ...`, `UPDATE src.t SET ... WHERE ...` (also MindsDB's UPDATE FROM
SELECT forms), `DELETE FROM src.t WHERE ...`, `DROP TABLE [IF EXISTS] src.t`. `src.t` is
`src.schema.t` for a schema other than the source's own (`main`, a postgres source's `schema`).

How: the statement's SELECT (or WHERE, SET) is compiled as every SELECT is (select.py), so
knowledge bases, agents, views and other sources in it are read the same way and the write
runs as DuckDB SQL straight into the attached source: no row passes through Python. It runs
on a cursor under the statement's deadline, the SQL memory limit and the result cap
(`DuckSession.run`), with the source attached read-write for this write only
(`DuckSession.writable`, which checks the path policy again). An operator may refuse all
of it (`read_only_sources`): the write then answers one line naming the setting.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast
from sqlglot import exp

from kbsql.engine.datasources.scans import DataSource, NativeTable
from kbsql.engine.faults import says_disk_full
from kbsql.engine.sql.kb.kb_conditions import constant
from kbsql.engine.sql.kb.kb_write import column_names
from kbsql.engine.sql.tables import sqlglot_render
from kbsql.engine.sql.tables.plans import Compiled
from kbsql.engine.sql.tables.select import compile_tree
from kbsql.interface.errors import InsufficientStorage, ReadOnlySource, SqlError, UnknownTable
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

ROWS = "__kbsql_rows__"

_NO_COLUMN = re.compile(r'does not have a column with name "([^"]+)"')
"""DuckDB's binder naming a column an INSERT fills that the table lacks (three lines)."""


def _check_writable(session: SqlSession, database: str, verb: str) -> None:
    settings = session.duck.settings
    if settings.read_only_sources:
        raise ReadOnlySource(f"{verb} in data source {database} is refused: data sources are read-only "
                              f"on this server ({settings.read_only_note})")


def _split(parts: list[str], source: DataSource) -> tuple[str, str]:
    """(schema, table) of `src.t` or `src.schema.t` in `source`."""
    default = str(getattr(source, "schema", "main"))
    return (parts[1], parts[2]) if len(parts) == 3 else (default, parts[-1])


def _existing(session: SqlSession, source: DataSource, parts: list[str]) -> NativeTable | None:
    with session.duck.cursor() as con:
        scan = source.scan(con, parts[1:])
    return scan if isinstance(scan, NativeTable) else None


def _target(source: Any, schema: str, table: str) -> str:
    alias = str(getattr(source, "alias", source.name))
    return exp.table_(table, db=schema, catalog=alias, quoted=True).sql("duckdb")


def _run(session: SqlSession, sql: str, compiled: Compiled | None = None, *, what: str) -> int | None:
    """Run one write on a cursor (deadline, memory limit, frames registered); rows written.
    A full disk (the source's file system, or its PostgreSQL server's) is the typed 507
    saying nothing of `what` was stored: DuckDB rolls the failed statement back (checked by
    tests/test_server_faults.py), where its raw error named the server's file and read as
    any other failure."""
    plan = compiled or Compiled("")
    plan.sql = sql
    plan.cacheable = False
    plan.query = False
    try:
        table = session.duck.run(plan)
    except duckdb.Error as exc:
        if not says_disk_full(str(exc)):
            raise
        raise InsufficientStorage(f"The disk is full: {what} stored nothing (the write is rolled back "
                                  "whole; the table is as it was). Free some space where the data "
                                  "source keeps its data and run it again") from None
    if table.num_columns and table.num_rows:
        value = table.column(0)[0].as_py()
        return int(value) if isinstance(value, int) else None
    return None


def _writable(session: SqlSession, parts: list[str], verb: str) -> Any:
    """The source attached read-write for this write (a context manager), or the one line
    why it is not written."""
    _check_writable(session, parts[0], verb)
    # whether its engine is ever written (the class's flag), not whether it is attached read-only
    # now: while another write holds it read-write, this one waits for it (DuckSession.writable)
    if not getattr(type(session.duck.source(parts[0])), "read_only", False):
        raise SqlError(f"{verb} in data source {parts[0]} is not supported: its engine is read here, "
                       "never written (duckdb, sqlite and postgres sources are written)")
    return session.duck.writable(parts[0])


def create_table(session: SqlSession, statement: ast.CreateTable, parts: list[str],
                 ctx: dict[str, Any]) -> SqlResult:
    with _writable(session, parts, "CREATE TABLE") as source:
        schema, table = _split(parts, source)
        found = _existing(session, source, parts)
        if found is not None and getattr(statement, "if_not_exists", False):
            return OkResult(None, context=ctx)
        if found is not None and not statement.is_replace:
            raise SqlError(f"Table '{table}' already exists")
        if found is not None:
            schema, table = found.schema, found.table
        verb = "CREATE OR REPLACE TABLE" if statement.is_replace else "CREATE TABLE"
        if statement.from_select is None:
            columns = ", ".join(f"{exp.to_identifier(c.name, quoted=True).sql('duckdb')} "
                                f"{exp.DataType.build(str(c.type or 'TEXT'), dialect='duckdb').sql('duckdb')}"
                                for c in statement.columns or [])
            _run(session, f"{verb} {_target(source, schema, table)} ({columns})",
                 what=f"{verb} {'.'.join(parts)}")
            return OkResult(None, context=ctx)
        compiled = Compiled("")
        select = sqlglot_render.to_duckdb(compile_tree(session, statement.from_select, ctx, compiled))
        count = _run(session, f"{verb} {_target(source, schema, table)} AS {select}", compiled,
                     what=f"{verb} {'.'.join(parts)}")
    session.plans.clear()
    return OkResult(count, context=ctx)


def insert(session: SqlSession, statement: ast.Insert, parts: list[str], ctx: dict[str, Any]) -> SqlResult:
    """INSERT INTO src.t: the rows go in by column name (the SELECT's names, or the column
    list given), as MindsDB inserts a result into a table."""
    import pandas as pd

    with _writable(session, parts, "INSERT") as source:
        found = _existing(session, source, parts)
        if found is None:
            raise UnknownTable(f"Table '{parts[-1]}' not found in database '{parts[0]}'")
        compiled = Compiled("")
        columns = column_names(statement.columns) if statement.columns else []
        if statement.from_select is not None:
            tree = compile_tree(session, statement.from_select, ctx, compiled)
        else:  # no column list: every column, in the table's order (MindsDB's test_insert)
            columns = columns or _column_names(session, source, found)
            _check_widths(statement, columns, found.table)
            frame = pd.DataFrame([[constant(v) for v in values] for values in statement.values or []],
                                 columns=columns)
            select = ast.Select(targets=[ast.Star()], from_table=ast.Identifier(ROWS))
            tree = compile_tree(session, select, ctx, compiled, frames={ROWS: frame})
        names = ""
        if columns:
            names = "(" + ", ".join(exp.to_identifier(c, quoted=True).sql("duckdb") for c in columns) + ") "
        by_name = "" if names else "BY NAME "
        try:
            count = _run(session, f"INSERT INTO {_target(source, found.schema, found.table)} {by_name}{names}"
                                  f"{sqlglot_render.to_duckdb(tree)}", compiled,
                         what=f"INSERT INTO {'.'.join(parts)}")
        except duckdb.BinderException as exc:
            missing = _NO_COLUMN.search(str(exc))
            if missing is None:
                raise
            hint = "; the rows go in by column name: name the SELECT's columns as the table's (AS ...)" \
                if statement.from_select is not None and not statement.columns else ""
            raise SqlError(f"Table '{'.'.join(parts)}' has no column '{missing.group(1)}' (its columns: "
                           f"{', '.join(_column_names(session, source, found))}){hint}") from None
    session.plans.clear()
    return OkResult(count, context=ctx)


def _check_widths(statement: ast.Insert, columns: list[str], table: str) -> None:
    """Each VALUES row gives one value per column it fills (MySQL's rule), else one line
    says how many (a longer or shorter row was a pandas error and a logged traceback)."""
    for values in statement.values or []:
        if len(values) != len(columns):
            hint = "" if statement.columns else \
                f"; name the columns it fills: INSERT INTO {table} (a, b) VALUES (...)"
            raise SqlError(f"INSERT INTO {table} VALUES gives {len(values)} values for "
                           f"{len(columns)} columns ({', '.join(columns)}){hint}")


def _where_and_sets(session: SqlSession, parts: list[str], where: Any, sets: dict[str, Any],
                    ctx: dict[str, Any], compiled: Compiled) -> tuple[exp.Expression, Any, list[Any]]:
    """The target table item, the WHERE and the SET values of an UPDATE or DELETE, compiled
    as `SELECT <values> FROM src.t WHERE ...` is (so subqueries and knowledge bases in them
    are read as in any SELECT)."""
    targets = list(sets.values()) or [ast.Constant(1)]
    select = ast.Select(targets=targets, from_table=ast.Identifier(parts=parts), where=where)
    tree = compile_tree(session, select, ctx, compiled)
    item = (tree.args.get("from_") or tree.args["from"]).this  # sqlglot 30 names it from_
    values = [e.unalias() for e in tree.expressions] if sets else []
    return item, tree.args.get("where"), values


def update(session: SqlSession, statement: ast.Update, parts: list[str], ctx: dict[str, Any]) -> SqlResult:
    """UPDATE src.t SET ... WHERE ..., and MindsDB's UPDATE FROM SELECT: `UPDATE src.t SET c =
    d.x FROM (SELECT ...) AS d WHERE k = d.k`, or `UPDATE src.t ON k1, k2 FROM (SELECT ...)`
    (the SELECT's other columns set in the rows whose keys match). In the FROM forms an
    unqualified name of one of the table's columns is the table's, as MindsDB reads it."""
    with _writable(session, parts, "UPDATE") as source:
        compiled = Compiled("")
        sets, where, source_from = dict(statement.update_columns or {}), statement.where, None
        found: NativeTable | None = None
        if statement.from_select is not None:
            found = _existing(session, source, parts)
            if found is None:
                raise UnknownTable(f"Table '{parts[-1]}' not found in database '{parts[0]}'")
            alias = str(statement.from_select_alias.parts[-1]) if statement.from_select_alias else FROM_ALIAS
            inner = compile_tree(session, statement.from_select, ctx, compiled)
            if statement.keys:
                names = _select_names(session, inner, compiled)
                sets, where = _on_keys([str(k.parts[-1]) for k in statement.keys], names, alias)
            source_from = exp.From(this=exp.Subquery(
                this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
        if not sets:
            raise SqlError("UPDATE needs SET column = value (or ON key columns FROM (SELECT ...))")
        item, where_tree, values = _where_and_sets(session, parts, where, sets, ctx, compiled)
        if source_from is not None and found is not None:
            own = _columns(session, source, found)
            for tree in [where_tree, *values]:
                _qualify(tree, own, item.alias_or_name)
        pairs = [exp.EQ(this=exp.column(name, quoted=True), expression=value)
                 for name, value in zip(sets, values, strict=True)]
        update = exp.Update(this=item, expressions=pairs, where=where_tree, from_=source_from)
        count = _run(session, update.sql("duckdb"), compiled, what=f"UPDATE {'.'.join(parts)}")
    session.plans.clear()
    return OkResult(count, context=ctx)


FROM_ALIAS = "__kbsql_from__"


def _select_names(session: SqlSession, inner: exp.Expression, compiled: Compiled) -> list[str]:
    """The SELECT's column names; with a `*` among them, DuckDB's DESCRIBE of it (nothing
    runs): mindsdb_sdk's `table.update(db.query(...), on=[...])` sends `UPDATE t ON k FROM
    (SELECT * FROM pg (...))`, which MindsDB runs and was refused here for its `*`."""
    names = list(getattr(inner, "named_selects", []))
    if names and "*" not in names:
        return names
    compiled.sql, compiled.cacheable = inner.sql("duckdb"), False
    return [str(name) for name in session.duck.describe(compiled).column("column_name").to_pylist()]


def _on_keys(keys: list[str], names: list[str], alias: str) -> tuple[dict[str, Any], Any]:
    """SET and WHERE of `UPDATE t ON keys FROM (SELECT ...) AS alias`: every other column of
    the SELECT is set from it where all keys are equal."""
    lowered = {n.lower() for n in names}
    missing = [k for k in keys if k.lower() not in lowered]
    if missing:
        raise SqlError(f"UPDATE ... ON {', '.join(keys)}: the SELECT has no column(s) {missing}")
    sets = {n: ast.Identifier(parts=[alias, n]) for n in names if n.lower() not in {k.lower() for k in keys}}
    where: Any = None
    for key in keys:
        equal = ast.BinaryOperation("=", args=[ast.Identifier(key), ast.Identifier(parts=[alias, key])])
        where = equal if where is None else ast.BinaryOperation("and", args=[where, equal])
    return sets, where


def _columns(session: SqlSession, source: Any, found: NativeTable) -> set[str]:
    """The table's column names (lower case)."""
    return {name.lower() for name in _column_names(session, source, found)}


def _column_names(session: SqlSession, source: Any, found: NativeTable) -> list[str]:
    """The table's column names, in the table's order."""
    with session.duck.cursor() as con:
        described = con.execute(f"SELECT * FROM {_target(source, found.schema, found.table)} LIMIT 0")
        names = [str(d[0]) for d in described.description or []]
        described.fetchall()  # an unread result kept the file attached past the write's detach
        return names


def _qualify(tree: Any, columns: set[str], table: str) -> None:
    """Unqualified names of the table's columns, qualified with it (DuckDB would call a name
    both the table and the FROM (SELECT ...) have ambiguous)."""
    if tree is None:
        return
    for column in tree.find_all(exp.Column):
        if not column.table and column.name.lower() in columns:
            column.set("table", exp.to_identifier(table, quoted=True))


def delete(session: SqlSession, statement: ast.Delete, parts: list[str], ctx: dict[str, Any]) -> SqlResult:
    with _writable(session, parts, "DELETE"):
        compiled = Compiled("")
        item, where, _ = _where_and_sets(session, parts, statement.where, {}, ctx, compiled)
        count = _run(session, exp.Delete(this=item, where=where).sql("duckdb"), compiled,
                     what=f"DELETE FROM {'.'.join(parts)}")
    session.plans.clear()
    return OkResult(count, context=ctx)


def drop_table(session: SqlSession, parts: list[str], if_exists: bool) -> None:
    with _writable(session, parts, "DROP TABLE") as source:
        found = _existing(session, source, parts)
        if found is None:
            if if_exists:
                return
            raise UnknownTable(f"Can't drop table '{parts[-1]}': it does not exist in database "
                               f"'{parts[0]}'")
        _run(session, f"DROP TABLE {_target(source, found.schema, found.table)}",
             what=f"DROP TABLE {'.'.join(parts)}")
    session.plans.clear()
