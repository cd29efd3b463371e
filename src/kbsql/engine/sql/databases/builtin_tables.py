"""Tables of the built-in databases in SQL: CREATE [OR REPLACE] TABLE, DROP TABLE and
INSERT INTO on `files` (uploaded files, as MindsDB's file handler answers them) and `df`
(registered DataFrames).

- `CREATE TABLE files.x (SELECT ...)` stores the rows as a file; `CREATE TABLE files.x
  (a INT, b TEXT)` an empty one; OR REPLACE replaces a table of that name, else a name in
  use is an error ("Table 'x' already exists");
- `DROP TABLE [IF EXISTS] files.x` removes it;
- `INSERT INTO files.x (a, b) VALUES ... | SELECT ...` appends rows (the table is written
  again with them, as MindsDB's handler does); `df.x` is replaced by registering it again.

- `UPDATE files.x SET ... WHERE ...` and `DELETE FROM files.x WHERE ...` write the table
  again with the rows changed (or left out).

The same statements on a connected data source (duckdb, sqlite, postgres) are written into
it (source_writes.py). A table of a project (knowledge base, agent) is dropped with DROP
KNOWLEDGE_BASE / DROP AGENT: refused here in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.datasources.frame_store import FRAMES_SOURCE
from kbsql.engine.datasources.upload_store import UPLOADS_SOURCE
from kbsql.engine.sql.databases import source_writes
from kbsql.engine.sql.databases.database_statements import refuse_write
from kbsql.engine.sql.kb.kb_conditions import constant
from kbsql.engine.sql.kb.kb_write import column_names
from kbsql.engine.sql.tables.names import find_project, table_parts
from kbsql.engine.sql.tables.select import select_frame
from kbsql.interface.errors import Conflict, NotFound, SqlError, UnknownDatabase, UnknownTable
from kbsql.interface.results import OkResult, SqlResult

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Routed

WRITABLE = (UPLOADS_SOURCE, FRAMES_SOURCE)


def _split(session: SqlSession, identifier: Any, ctx: dict[str, Any], verb: str) -> tuple[str, str]:
    """(built-in database, table) of a table name; anything else is refused in one line."""
    parts = table_parts(identifier)
    database, name = (parts[0], parts[1]) if len(parts) == 2 else (ctx["db"], parts[-1])
    if len(parts) > 2:
        raise SqlError(f"A table name here is <database>.<table>, got {'.'.join(parts)}")
    lowered = database.lower()
    if lowered in WRITABLE:
        return lowered, name
    if find_project(session, database) is not None:
        raise SqlError(f"{verb} TABLE does not apply to project {database}: use DROP KNOWLEDGE_BASE or "
                       "DROP AGENT for its tables" if verb == "DROP" else
                       f"{verb} TABLE does not apply to project {database}: tables are made in 'files' "
                       "(uploaded files), 'df' (registered DataFrames) or a connected data source")
    raise UnknownDatabase(f"Cannot {verb.lower()} a table in database '{database}': the database "
                          "does not exist")


def source_parts(session: SqlSession, identifier: Any, ctx: dict[str, Any]) -> list[str] | None:
    """[source, (schema,) table] when `identifier` names a table of a connected data source
    (written by source_writes), else None."""
    if not isinstance(identifier, ast.Identifier):
        return None
    parts = table_parts(identifier)
    if len(parts) == 1:
        parts = [ctx["db"], *parts]
    if not 2 <= len(parts) <= 3 or parts[0].lower() in WRITABLE or \
            session.catalog.find_datasource(parts[0]) is None:
        return None
    return parts


def create_table(session: SqlSession, statement: ast.CreateTable, ctx: dict[str, Any],
                 routed: Routed | None = None) -> SqlResult:
    parts = source_parts(session, statement.name, ctx)
    if parts is not None:
        return source_writes.create_table(session, statement, parts, ctx)
    database, name = _split(session, statement.name, ctx, "CREATE")
    if statement.from_select is not None:
        frame = select_frame(session, statement.from_select, ctx)
    else:
        import pandas as pd

        frame = pd.DataFrame({c.name: pd.Series(dtype=object) for c in statement.columns or []})
    exists = _exists(session, database, name)
    if exists and getattr(statement, "if_not_exists", False):
        return OkResult(None, context=ctx)
    if exists and not statement.is_replace:
        raise SqlError(f"Table '{name}' already exists")
    _store(session, database, name, frame, replace=True)
    return OkResult(len(frame), context=ctx)


def drop_table(session: SqlSession, statement: ast.DropTables, ctx: dict[str, Any],
               routed: Routed | None = None) -> SqlResult:
    for table in statement.tables:
        parts = source_parts(session, table, ctx)
        if parts is not None:
            source_writes.drop_table(session, parts, bool(statement.if_exists))
            continue
        database, name = _split(session, table, ctx, "DROP")
        if database == UPLOADS_SOURCE:
            try:
                session.uploads.delete(name)
            except NotFound as exc:
                if not statement.if_exists:
                    raise UnknownTable(f"Can't delete table '{name}': {exc.detail}") from None
        elif not session.frames.unregister(name) and not statement.if_exists:
            raise UnknownTable(f"Can't delete table '{name}': table df.{name} does not exist")
    session.plans.clear()
    return OkResult(None, context=ctx)


def insert_or_refuse(session: SqlSession, statement: ast.Insert, ctx: dict[str, Any],
                     routed: Routed) -> SqlResult:
    """An INSERT whose table is not a knowledge base: into `files.x` or a data source's
    table, else refused."""
    parts = source_parts(session, statement.table, ctx)
    if parts is not None:
        return source_writes.insert(session, statement, parts, ctx)
    appended = insert_rows(session, statement, ctx)
    if appended is not None:
        return appended
    return refuse_write(session, statement, ctx, routed)


def insert_rows(session: SqlSession, statement: ast.Insert, ctx: dict[str, Any]) -> SqlResult | None:
    """INSERT INTO files.x: the rows appended (as MindsDB's file handler); None when the
    table is elsewhere (a registered DataFrame is replaced by registering it again)."""
    parts = table_parts(statement.table)
    if len(parts) != 2 or parts[0].lower() != UPLOADS_SOURCE:
        return None
    import pandas as pd

    database, name = parts[0].lower(), parts[1]
    current = _table(session, database, name)
    if current is None:
        raise UnknownTable(f"Table '{name}' not found in database '{database}'")
    if statement.from_select is not None:
        rows = select_frame(session, statement.from_select, ctx)
        if statement.columns:
            rows.columns = column_names(statement.columns)
    else:
        names = column_names(statement.columns) if statement.columns else list(current.column_names)
        rows = pd.DataFrame([[constant(v) for v in values] for values in statement.values or []],
                            columns=names)
    unknown = [c for c in rows.columns if c not in current.column_names]
    if unknown:
        raise SqlError(f"Table {database}.{name} has no column(s) {unknown}: its columns are "
                       f"{list(current.column_names)}")
    _check_grown(session, f"{database}.{name}", current.nbytes + int(rows.memory_usage(deep=True).sum()))
    merged = pd.concat([current.to_pandas(), rows], ignore_index=True)
    _store(session, database, name, merged, replace=True)
    return OkResult(len(rows), context=ctx)


def _check_grown(session: SqlSession, table: str, size: int) -> None:
    """An INSERT writes the whole table again from memory (~3x its size at the peak), and
    each INSERT's rows are under the result cap, so inserts grew a table without end: at
    10M rows (1.3 GB of Parquet) inserting one row took the server to 3.2 GB for 8 s. A
    table SQL writes is at most what one statement may return (`result_cap`)."""
    cap = session.duck.result_cap
    if size > cap:
        mb = 2**20
        raise SqlError(f"INSERT INTO {table} would make it ~{size // mb} MB, over {cap // mb} MB, the "
                       "most a table written by SQL may be (as one statement's result: a sixteenth "
                       f"of the SQL memory limit, {session.duck.settings.limit_note}): nothing was "
                       "inserted")


def _exists(session: SqlSession, database: str, name: str) -> bool:
    if database == UPLOADS_SOURCE:
        return session.uploads.find(name) is not None
    return session.frames.exists(name)


def _table(session: SqlSession, database: str, name: str) -> Any:
    return session.uploads.table(name) if database == UPLOADS_SOURCE else session.frames.table(name)


def _store(session: SqlSession, database: str, name: str, frame: pd.DataFrame, replace: bool) -> None:
    if database == UPLOADS_SOURCE:
        try:
            session.uploads.save(name, {"main": frame}, replace=replace)
        except Conflict:
            raise SqlError(f"Table '{name}' already exists") from None
    else:
        session.frames.register(name, frame)
    session.plans.clear()


def change_or_refuse(session: SqlSession, statement: ast.Update | ast.Delete, ctx: dict[str, Any],
                     routed: Routed) -> SqlResult:
    """UPDATE or DELETE whose table is not a knowledge base: a data source's table or
    `files.x`, else refused in one line."""
    parts = source_parts(session, statement.table, ctx)
    if parts is not None:
        if isinstance(statement, ast.Update):
            return source_writes.update(session, statement, parts, ctx)
        return source_writes.delete(session, statement, parts, ctx)
    parts = table_parts(statement.table) if isinstance(statement.table, ast.Identifier) else []
    if len(parts) == 2 and parts[0].lower() == UPLOADS_SOURCE:
        return _change_file(session, statement, parts[1], ctx)
    return refuse_write(session, statement, ctx, routed)


def _change_file(session: SqlSession, statement: ast.Update | ast.Delete, name: str,
                 ctx: dict[str, Any]) -> SqlResult:
    """files.x written again: without the rows the WHERE matches (DELETE), or with the SET
    values in them (UPDATE); the answer counts the rows matched."""
    current = _table(session, UPLOADS_SOURCE, name)
    if current is None:
        raise UnknownTable(f"Table '{name}' not found in database '{UPLOADS_SOURCE}'")
    if getattr(statement, "from_select", None) is not None:
        raise SqlError(f"UPDATE ... FROM (SELECT ...) writes connected data sources, not {UPLOADS_SOURCE}."
                       f"{name}: use CREATE OR REPLACE TABLE {UPLOADS_SOURCE}.{name} (SELECT ...)")
    table = ast.Identifier(parts=[UPLOADS_SOURCE, name])
    where = statement.where
    matched = ast.Select(targets=[ast.Function("count", args=[ast.Star()])], from_table=table, where=where)
    count = int(select_frame(session, matched, ctx).iloc[0, 0])
    if isinstance(statement, ast.Delete):
        kept = None if where is None else ast.UnaryOperation(
            "not", args=[ast.Function("coalesce", args=[where, ast.Constant(False)])])
        rows = select_frame(session, ast.Select(targets=[ast.Star()], from_table=table, where=kept), ctx)
    else:
        sets = dict(statement.update_columns or {})
        unknown = [c for c in sets if c not in current.column_names]
        if unknown:
            raise SqlError(f"Table {UPLOADS_SOURCE}.{name} has no column(s) {unknown}: its columns are "
                           f"{list(current.column_names)}")
        targets = [ast.Identifier(c) if c not in sets else
                   ast.Case(rules=[[where, sets[c]]], default=ast.Identifier(c), alias=ast.Identifier(c))
                   if where is not None else _aliased(sets[c], c) for c in current.column_names]
        rows = select_frame(session, ast.Select(targets=targets, from_table=table), ctx)
    _store(session, UPLOADS_SOURCE, name, rows, replace=True)
    return OkResult(count, context=ctx)


def _aliased(node: Any, name: str) -> Any:
    node.alias = ast.Identifier(name)
    return node
