"""MindsDB's native query: `SELECT ... FROM pg (<the source's own SQL>) [AS n]`.

Its text runs on the data source as it is, in the source's own dialect (MindsDB's
test_executor.py TestWithNativeQuery; mindsdb_sdk writes one for every `database.query(...)`
fed to a table, view or insert). Here a PostgreSQL source runs it through DuckDB's
`postgres_query` on the source's read-only ATTACH, so its rows stream into the rest of the
query (joins, filters, aggregates) under the statement's deadline and memory limit; a write
in it fails on the read-only transaction rather than changing the source. A DuckDB or SQLite
file source is refused in one line: its SQL could read any file of the server's, outside the
paths this engine confines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast.select.native_query import NativeQuery
from sqlglot import exp

from kbsql.engine.sql import refusals
from kbsql.engine.sql.tables.sqlglot_render import walk

if TYPE_CHECKING:
    from kbsql.engine.catalog import DatasourceRecord
    from kbsql.engine.sql.session import SqlSession

PLACEHOLDER = "__kbsql_native_{}"


def take(session: SqlSession, statement: ast.ASTNode) -> dict[str, exp.Expression]:
    """Each native query of `statement` replaced (in place) by a placeholder table name;
    placeholder -> the FROM item that runs its text on its source (for `_rewrite`). A name
    that is no data source (`read_csv('/etc/passwd')` parses alike) is left: a table function,
    refused as one."""
    items: dict[str, exp.Expression] = {}
    for node in list(walk(statement)):
        for key, value in list(vars(node).items()):
            if not isinstance(value, NativeQuery):
                continue
            record = session.catalog.find_datasource(_source_name(value))
            if record is not None:
                name = PLACEHOLDER.format(len(items))
                items[name] = _item(session, record, value)
                setattr(node, key, ast.Identifier(parts=[name], alias=value.alias))
    return items


def _source_name(native: NativeQuery) -> str:
    integration = native.integration
    return str(integration.parts[-1]) if isinstance(integration, ast.Identifier) else str(integration)


def _item(session: SqlSession, record: DatasourceRecord, native: NativeQuery) -> exp.Expression:
    source = session.duck.source(record.name)
    run = getattr(source, "native_query", None)
    if source is None or run is None:
        raise refusals.native_query(record.name, record.engine)
    item: exp.Expression = run(str(native.query))
    return item

