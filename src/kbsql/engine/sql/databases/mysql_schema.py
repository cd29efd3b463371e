"""MySQL's `information_schema` tables (`SCHEMATA`, `TABLES`, `COLUMNS`, `ENGINES`, ...), on
every door: MindsDB answers them over HTTP `/api/sql/query`, its SDKs and its MySQL door
alike (`mindsdb/api/executor/datahub/datanodes/system_tables.py`), so JDBC and ODBC drivers,
DBeaver, Tableau and SQLAlchemy's dialect read the same rows whichever way they connect.

Built from the catalog on each query (they are small). `COLUMNS` describes only the tables
the statement names (`TABLE_SCHEMA = ...`, `TABLE_NAME = ...` or `IN (...)`), else those of
the projects and uploaded files, never every data source's tables (MindsDB's scope rule too:
listing every remote table's columns may be slow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import expressions as exp

from kbsql.engine.datasources.scans import NativeTable
from kbsql.engine.knowledge.ingest import INTERNAL_KEYS
from kbsql.engine.knowledge.search import SearchRequest
from kbsql.engine.sql.tables.names import Resolutions, resolve
from kbsql.engine.sql.tables.sqlglot_render import conjuncts
from kbsql.interface.column_types import data_type_of, mysql_sizes, mysql_type, with_own_type
from kbsql.interface.mysql_charsets import CHARACTER_SETS, COLLATIONS, ENGINES

if TYPE_CHECKING:
    from kbsql.engine.catalog import KbRecord
    from kbsql.engine.sql.session import SqlSession

INFO = "information_schema"
COLLATION = "utf8mb4_0900_ai_ci"

COLUMNS: dict[str, list[str]] = {
    "schemata": ["CATALOG_NAME", "SCHEMA_NAME", "DEFAULT_CHARACTER_SET_NAME", "DEFAULT_COLLATION_NAME",
                 "SQL_PATH"],
    "columns": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION",
                "COLUMN_DEFAULT", "IS_NULLABLE", "DATA_TYPE", "CHARACTER_MAXIMUM_LENGTH",
                "CHARACTER_OCTET_LENGTH", "NUMERIC_PRECISION", "NUMERIC_SCALE", "DATETIME_PRECISION",
                "CHARACTER_SET_NAME", "COLLATION_NAME", "COLUMN_TYPE", "COLUMN_KEY", "EXTRA", "PRIVILEGES",
                "COLUMN_COMMENT", "GENERATION_EXPRESSION", "SRS_ID", "ORIGINAL_TYPE"],
    "engines": ["ENGINE", "SUPPORT", "COMMENT", "TRANSACTIONS", "XA", "SAVEPOINTS"],
    "character_sets": ["CHARACTER_SET_NAME", "DEFAULT_COLLATE_NAME", "DESCRIPTION", "MAXLEN"],
    "collations": ["COLLATION_NAME", "CHARACTER_SET_NAME", "ID", "IS_DEFAULT", "IS_COMPILED", "SORTLEN",
                   "PAD_ATTRIBUTE"],
    "routines": ["SPECIFIC_NAME", "ROUTINE_CATALOG", "ROUTINE_SCHEMA", "ROUTINE_NAME", "ROUTINE_TYPE",
                 "DATA_TYPE", "ROUTINE_DEFINITION", "EXTERNAL_LANGUAGE", "SQL_DATA_ACCESS", "CREATED",
                 "LAST_ALTERED", "ROUTINE_COMMENT", "DEFINER"],
    "parameters": ["SPECIFIC_CATALOG", "SPECIFIC_SCHEMA", "SPECIFIC_NAME", "ORDINAL_POSITION",
                   "PARAMETER_MODE", "PARAMETER_NAME", "DATA_TYPE", "ROUTINE_TYPE"],
    "key_column_usage": ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_CATALOG",
                         "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION",
                         "POSITION_IN_UNIQUE_CONSTRAINT", "REFERENCED_TABLE_SCHEMA",
                         "REFERENCED_TABLE_NAME", "REFERENCED_COLUMN_NAME"],
    "table_constraints": ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_SCHEMA",
                          "TABLE_NAME", "CONSTRAINT_TYPE", "ENFORCED"],
    "referential_constraints": ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME",
                                "UNIQUE_CONSTRAINT_CATALOG", "UNIQUE_CONSTRAINT_SCHEMA",
                                "UNIQUE_CONSTRAINT_NAME", "MATCH_OPTION", "UPDATE_RULE", "DELETE_RULE",
                                "TABLE_NAME", "REFERENCED_TABLE_NAME"],
    "statistics": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "NON_UNIQUE", "INDEX_SCHEMA",
                   "INDEX_NAME", "SEQ_IN_INDEX", "COLUMN_NAME", "COLLATION", "CARDINALITY", "SUB_PART",
                   "PACKED", "NULLABLE", "INDEX_TYPE", "COMMENT", "INDEX_COMMENT", "IS_VISIBLE",
                   "EXPRESSION"],
    "triggers": ["TRIGGER_CATALOG", "TRIGGER_SCHEMA", "TRIGGER_NAME", "EVENT_MANIPULATION",
                 "EVENT_OBJECT_SCHEMA", "EVENT_OBJECT_TABLE", "ACTION_STATEMENT", "ACTION_TIMING"],
    "events": ["EVENT_CATALOG", "EVENT_SCHEMA", "EVENT_NAME", "DEFINER", "TIME_ZONE", "EVENT_BODY",
               "EVENT_DEFINITION", "EVENT_TYPE", "STATUS"],
    "plugins": ["PLUGIN_NAME", "PLUGIN_VERSION", "PLUGIN_STATUS", "PLUGIN_TYPE", "PLUGIN_LIBRARY",
                "PLUGIN_LICENSE"],
}
TABLE_COLUMNS = ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "ENGINE", "VERSION",
                 "ROW_FORMAT", "TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH", "MAX_DATA_LENGTH",
                 "INDEX_LENGTH", "DATA_FREE", "AUTO_INCREMENT", "CREATE_TIME", "UPDATE_TIME", "CHECK_TIME",
                 "TABLE_COLLATION", "CHECKSUM", "CREATE_OPTIONS", "TABLE_COMMENT"]
"""`information_schema.TABLES` in MySQL's (and MindsDB's) columns."""
INTEGER_COLUMNS = {"ORDINAL_POSITION", "MAXLEN", "ID", "SORTLEN", "TABLE_ROWS", "NON_UNIQUE",
                   "SEQ_IN_INDEX", "CARDINALITY", "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH",
                   "NUMERIC_PRECISION", "NUMERIC_SCALE", "DATETIME_PRECISION",
                   "POSITION_IN_UNIQUE_CONSTRAINT", "VERSION", "AVG_ROW_LENGTH", "DATA_LENGTH",
                   "MAX_DATA_LENGTH", "INDEX_LENGTH", "DATA_FREE", "AUTO_INCREMENT", "CHECKSUM"}
FILES_DATABASES = ("df", "files")
TEXTS = ("text", "varchar")


def arrow(names: list[str], rows: list[list[Any]]) -> pa.Table:
    """Rows as Arrow: the integer columns MySQL's are, text for the rest."""
    return pa.table({c: pa.array([r[i] for r in rows], pa.int64() if c in INTEGER_COLUMNS else pa.string())
                     for i, c in enumerate(names)})


def table_row(schema: str, name: str, kind: str) -> list[Any]:
    """One `information_schema.TABLES` row in MySQL's columns (sizes unknown: NULL)."""
    return ["def", schema, name, kind, None, None, None, None, None, None, None, None, None, None, None, None,
            None, COLLATION, None, "", ""]


def schemata(databases: pa.Table) -> pa.Table:
    names = databases.column("NAME").to_pylist()
    return arrow(COLUMNS["schemata"], [["def", n, "utf8mb4", COLLATION, None] for n in names])


def scope(table: exp.Table) -> tuple[set[str] | None, set[str] | None]:
    """The schemas and table names the statement's WHERE restricts `table` (the COLUMNS table
    in it) to, lower case; None where it does not: `TABLE_SCHEMA = 'x'`, `TABLE_NAME IN ('a',
    'b')`. Only the WHERE's top-level AND terms on this table's own columns restrict: under an
    OR or a NOT, or on a joined table, a condition does not bound the rows the statement needs
    (reading it there answered fewer rows than asked for)."""
    select = table.find_ancestor(exp.Select)
    where = select.args.get("where") if select is not None else None
    terms = conjuncts(where.this if where is not None else None)
    alias = table.alias_or_name.lower()
    found: dict[str, set[str]] = {}
    for cond in terms:
        if not isinstance(cond, (exp.EQ, exp.In, exp.Like)):
            continue
        column = cond.this if isinstance(cond.this, exp.Column) else None
        if column is None or column.name.upper() not in ("TABLE_SCHEMA", "TABLE_NAME") or \
                (column.table and column.table.lower() != alias):
            continue
        key = column.name.upper()
        values = [cond.expression] if not isinstance(cond, exp.In) else list(cond.expressions)
        literals = [v.name.lower() for v in values if isinstance(v, exp.Literal) and v.is_string]
        if len(literals) != len(values) or (isinstance(cond, exp.Like) and any("%" in v or "_" in v
                                                                                for v in literals)):
            continue  # not a fixed set of names: no bound from this term
        found[key] = found[key] & set(literals) if key in found else set(literals)
    return found.get("TABLE_SCHEMA"), found.get("TABLE_NAME")


def _wanted(tables: pa.Table, schemas: set[str] | None,
            names: set[str] | None) -> list[tuple[str, str, str]]:
    wanted = []
    for schema, table, kind in zip(*(tables.column(c).to_pylist() for c in
                                     ("TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE")), strict=True):
        if schema.lower() == INFO or kind.upper() == "AGENT":
            continue
        if (schemas is not None and schema.lower() not in schemas) or \
                (names is not None and table.lower() not in names):
            continue
        if schemas is None and names is None and kind.upper() == "BASE TABLE" and \
                schema.lower() not in FILES_DATABASES:
            continue  # a data source's tables only when named: listing them all may be slow
        wanted.append((schema, table, kind.upper()))
    return wanted


Describe = Callable[["SqlSession", list[str], dict[str, Any]], pa.Table]
"""select.describe_sql: a table's column names and engine types (passed in: select.py reads
information_schema through this module)."""


def own_types_of(session: SqlSession, parts: list[str], ctx: dict[str, Any],
                 resolutions: Resolutions) -> dict[str, tuple[str, int | None]]:
    """The source's own column types of a data-source table, when its source can tell them
    (`own_types`: PostgreSQL's `character varying(100)`, which DuckDB reads as VARCHAR);
    empty for anything else."""
    found = resolutions.get(tuple(parts)) or resolve(session, parts, ctx["db"])
    if found.kind != "data" or not isinstance(found.scan, NativeTable):
        return {}
    source = session.duck.source(found.database)
    own_types = getattr(source, "own_types", None)
    if own_types is None:
        return {}
    with session.duck.cursor() as con:
        return dict(own_types(con, found.scan))


def kb_columns(session: SqlSession, record: KbRecord) -> list[tuple[str, str]]:
    """(name, engine type) of the columns a SELECT on a knowledge base can name, metadata
    columns included (declared or seen in its rows): its SHOW COLUMNS and COLUMNS rows."""
    names = [("id", "VARCHAR"), ("chunk_id", "VARCHAR"), ("chunk_content", "VARCHAR"), ("metadata", "JSON"),
             ("relevance", "DOUBLE"), ("distance", "DOUBLE")]
    keys = record.metadata_columns
    if keys is None:  # inferred metadata: the keys its rows hold
        rows = session.kbs.service.search(record, SearchRequest(limit=1000))
        keys = sorted({k for r in rows for k in (r[3] or {})} - set(INTERNAL_KEYS))
    return names + [(k, "VARCHAR") for k in keys]


def _described(session: SqlSession, schema: str, table: str, kind: str, ctx: dict[str, Any],
               describe: Describe) -> list[tuple[str, str, str]]:
    """(name, MySQL column type, the source's own type) of each column of one table; the
    own type is DuckDB's in lower case where the source cannot tell (as DESCRIBE's
    ORIGINAL_TYPE)."""
    own: dict[str, tuple[str, int | None]] = {}
    if kind == "KNOWLEDGE BASE":
        pairs = kb_columns(session, next(kb for kb in session.catalog.knowledge_bases()
                                         if kb.project_name == schema and kb.name == table))
    else:
        described = describe(session, [schema, table], ctx)
        pairs = list(zip(described.column(0).to_pylist(), described.column(1).to_pylist(), strict=True))
        own = own_types_of(session, [schema, table], ctx, {})
    rows = []
    for name, kind in pairs:
        column_type = mysql_type(with_own_type(kind, own.get(name)))[1]
        rows.append((name, column_type, own[name][0].lower() if name in own else kind.lower()))
    return rows


def columns(session: SqlSession, tables: pa.Table, table: exp.Table,
            ctx: dict[str, Any], describe: Describe) -> pa.Table:
    """`information_schema.COLUMNS` of the tables the statement around `table` names."""
    schemas, names = scope(table)
    rows: list[list[Any]] = []
    for schema, table, kind in _wanted(tables, schemas, names):
        try:
            described = _described(session, schema, table, kind, ctx, describe)
        except Exception:  # dropped meanwhile, or a data source that cannot answer
            continue
        for position, (column, column_type, own) in enumerate(described, start=1):
            data_type = data_type_of(column_type)
            text = data_type in TEXTS
            rows.append(["def", schema, table, column, position, None, "YES", data_type,
                         *mysql_sizes(column_type), "utf8mb4" if text else None, COLLATION if text else None,
                         column_type, "", "", "select", "", "", None, own])  # MindsDB's ORIGINAL_TYPE
    return arrow(COLUMNS["columns"], rows)


def constant(name: str) -> pa.Table:
    """The tables whose rows do not depend on the catalog (empty where kbsql has none)."""
    rows = {"engines": ENGINES, "character_sets": CHARACTER_SETS, "collations": COLLATIONS}.get(name, ())
    return arrow(COLUMNS[name], [list(r) for r in rows])
