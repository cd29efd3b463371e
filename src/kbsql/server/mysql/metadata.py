"""What SQL tools read about the schema, in MySQL's shapes, built from the engine's answers.

JDBC and ODBC drivers, Tableau, DBeaver and SQLAlchemy's dialect ask `information_schema`
(`SCHEMATA`, `TABLES`, `COLUMNS`, ...) with MySQL's column names, `SHOW [FULL] COLUMNS` for
`Field, Type, Null, Key, Default, Extra`, and `SHOW CREATE TABLE` for a definition to parse.
The engine's own `information_schema` (DATABASES, TABLES, KNOWLEDGE_BASES, AGENTS, QUERIES)
answers first, as over HTTP; these views answer what it does not know, from the engine's own
`information_schema.databases`, `information_schema.tables` and `SHOW COLUMNS`, as MindsDB's
MySQL door does (`mindsdb/api/executor/datahub/datanodes/system_tables.py`).

The client's statement runs on these small tables in DuckDB after sqlglot translates it from
MySQL; `LIKE` there is case-insensitive, as in MySQL. `COLUMNS` describes only the tables the
statement names (`TABLE_SCHEMA = ...`, `TABLE_NAME = ...` or `IN (...)`), else those of the
projects and uploaded files, never every data source's tables (MindsDB's scope rule too).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import expressions as exp

from kbsql.interface.api import ServiceApi
from kbsql.interface.column_types import data_type_of, mysql_sizes
from kbsql.interface.results import ErrorResult, TableResult
from kbsql.server.mysql.local_sql import run_local
from kbsql.server.mysql.resultsets import Rows, arrow_rows

INFO = "information_schema"

TABLES: dict[str, list[str]] = {
    "schemata": ["CATALOG_NAME", "SCHEMA_NAME", "DEFAULT_CHARACTER_SET_NAME", "DEFAULT_COLLATION_NAME",
                 "SQL_PATH"],
    "tables": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "ENGINE", "VERSION",
               "ROW_FORMAT", "TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH", "MAX_DATA_LENGTH",
               "INDEX_LENGTH", "DATA_FREE", "AUTO_INCREMENT", "CREATE_TIME", "UPDATE_TIME", "CHECK_TIME",
               "TABLE_COLLATION", "CHECKSUM", "CREATE_OPTIONS", "TABLE_COMMENT"],
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
    "views": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "VIEW_DEFINITION", "CHECK_OPTION",
              "IS_UPDATABLE", "DEFINER", "SECURITY_TYPE", "CHARACTER_SET_CLIENT", "COLLATION_CONNECTION"],
    "triggers": ["TRIGGER_CATALOG", "TRIGGER_SCHEMA", "TRIGGER_NAME", "EVENT_MANIPULATION",
                 "EVENT_OBJECT_SCHEMA", "EVENT_OBJECT_TABLE", "ACTION_STATEMENT", "ACTION_TIMING"],
    "events": ["EVENT_CATALOG", "EVENT_SCHEMA", "EVENT_NAME", "DEFINER", "TIME_ZONE", "EVENT_BODY",
               "EVENT_DEFINITION", "EVENT_TYPE", "STATUS"],
    "plugins": ["PLUGIN_NAME", "PLUGIN_VERSION", "PLUGIN_STATUS", "PLUGIN_TYPE", "PLUGIN_LIBRARY",
                "PLUGIN_LICENSE"],
}
INTEGER_COLUMNS = {"ORDINAL_POSITION", "MAXLEN", "ID", "SORTLEN", "TABLE_ROWS", "NON_UNIQUE",
                   "SEQ_IN_INDEX", "CARDINALITY", "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH",
                   "NUMERIC_PRECISION", "NUMERIC_SCALE", "DATETIME_PRECISION",
                   "POSITION_IN_UNIQUE_CONSTRAINT"}
ENGINES = [["InnoDB", "DEFAULT", "Supports transactions, row-level locking, and foreign keys", "YES", "YES",
            "YES"]]
CHARACTER_SETS = [["utf8mb4", "utf8mb4_general_ci", "UTF-8 Unicode", 4],
                  ["utf8mb3", "utf8mb3_general_ci", "UTF-8 Unicode", 3]]
COLLATIONS = [["utf8mb4_general_ci", "utf8mb4", 45, "Yes", "Yes", 1, "PAD SPACE"],
              ["utf8mb4_0900_ai_ci", "utf8mb4", 255, "", "Yes", 0, "NO PAD"],
              ["utf8mb4_bin", "utf8mb4", 46, "", "Yes", 1, "PAD SPACE"],
              ["utf8mb3_general_ci", "utf8mb3", 33, "Yes", "Yes", 1, "PAD SPACE"]]
FILES_DATABASES = ("df", "files")
TEXTS = ("text", "varchar")

def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class Refused(LookupError):
    """The engine answered a metadata read with an SQL error (a table that does not exist):
    the door sends that answer's message with its kind's code."""

    def __init__(self, result: ErrorResult):
        super().__init__(result.error_message)
        self.result = result


class EngineCatalog:
    """The engine's databases, tables and columns, read through `ServiceApi.query` (each at
    most once per statement)."""

    def __init__(self, api: ServiceApi, db: str):
        self.api = api
        self.db = db
        self._tables: list[tuple[str, str, str]] | None = None

    def _rows(self, sql: str) -> list[list[Any]]:
        result = self.api.query(sql, {"db": self.db})
        if isinstance(result, ErrorResult):
            raise Refused(result)
        return result.data if isinstance(result, TableResult) else []

    def databases(self) -> list[tuple[str, str]]:
        return [(str(r[0]), str(r[1])) for r in
                self._rows("SELECT NAME, TYPE FROM information_schema.databases")]

    def tables(self) -> list[tuple[str, str, str]]:
        if self._tables is None:
            self._tables = [(str(r[0]), str(r[1]), str(r[2])) for r in self._rows(
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.tables")]
        return self._tables

    def columns(self, schema: str, table: str) -> list[tuple[str, str]]:
        """(name, MySQL column type) of each column, as the engine's SHOW COLUMNS answers them
        (interface/column_types.py); the engine's error when the table is unknown."""
        rows = self._rows(f"SHOW COLUMNS FROM {quote_name(schema)}.{quote_name(table)}")
        return [(str(r[0]), str(r[1])) for r in rows]

    def own_types(self, schema: str, table: str) -> dict[str, str]:
        """A data-source table's column types in the source's own words (DESCRIBE's
        ORIGINAL_TYPE): MindsDB's ORIGINAL_TYPE (`integer` beside MySQL's `int`, PostgreSQL's
        `character varying` beside `varchar`)."""
        rows = self._rows(f"DESCRIBE {quote_name(schema)}.{quote_name(table)}")
        return {str(r[0]): str(r[2] if len(r) > 2 else r[1]).lower() for r in rows}


def _schemata(catalog: EngineCatalog) -> list[list[Any]]:
    return [["def", name, "utf8mb4", "utf8mb4_0900_ai_ci", None] for name, _ in catalog.databases()]


def _tables(catalog: EngineCatalog) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for schema, name, kind in catalog.tables():
        if schema.lower() == INFO:
            kind = "SYSTEM VIEW"
        rows.append(["def", schema, name, kind, None, None, None, None, None, None, None, None, None, None,
                     None, None, None, "utf8mb4_0900_ai_ci", None, "", ""])
    known = {r[2].lower() for r in rows if r[1].lower() == INFO}
    rows += [["def", INFO, name.upper(), "SYSTEM VIEW", None, None, None, None, None, None, None, None, None,
              None, None, None, None, "utf8mb4_0900_ai_ci", None, "", ""]
             for name in TABLES if name not in known]
    return rows


def _columns(catalog: EngineCatalog, scope: tuple[set[str] | None, set[str] | None]) -> list[list[Any]]:
    schemas, names = scope
    rows: list[list[Any]] = []
    wanted = []
    for schema, table, kind in catalog.tables():
        if schema.lower() == INFO or kind.upper() == "AGENT":
            continue
        if schemas is not None and schema.lower() not in schemas:
            continue
        if names is not None and table.lower() not in names:
            continue
        if schemas is None and names is None and kind.upper() == "BASE TABLE" and \
                schema.lower() not in FILES_DATABASES:
            continue  # a data source's tables only when named: listing them all may be slow
        wanted.append((schema, table, kind.upper() == "BASE TABLE"))
    for schema, table, of_source in wanted:
        try:
            columns = catalog.columns(schema, table)
            own = catalog.own_types(schema, table) if of_source else {}
        except LookupError:  # dropped meanwhile, or a data source that cannot answer
            continue
        for position, (column, column_type) in enumerate(columns, start=1):
            data_type = data_type_of(column_type)
            rows.append(["def", schema, table, column, position, None, "YES", data_type,
                         *mysql_sizes(column_type), "utf8mb4" if data_type in TEXTS else None,
                         "utf8mb4_0900_ai_ci" if data_type in TEXTS else None, column_type, "", "",
                         "select", "", "", None, own.get(column, column_type)])  # MindsDB's ORIGINAL_TYPE
    return rows


def _arrow(name: str, rows: list[list[Any]]) -> pa.Table:
    columns = TABLES.get(name) or []
    return pa.table({c: pa.array([r[i] for r in rows], pa.int64() if c in INTEGER_COLUMNS else pa.string())
                     for i, c in enumerate(columns)})


def _scope(tree: exp.Expression) -> tuple[set[str] | None, set[str] | None]:
    """The schemas and table names a statement's conditions name (lower case), None where it
    names none: `TABLE_SCHEMA = 'x'`, `TABLE_NAME IN ('a', 'b')`."""
    found: dict[str, set[str]] = {}
    for node in tree.find_all(exp.EQ, exp.In, exp.Like):
        column = node.this if isinstance(node.this, exp.Column) else None
        if column is None:
            continue
        key = column.name.upper()
        if key not in ("TABLE_SCHEMA", "TABLE_NAME"):
            continue
        values = [node.expression] if not isinstance(node, exp.In) else list(node.expressions)
        literals = [v.name.lower() for v in values if isinstance(v, exp.Literal) and v.is_string]
        if len(literals) != len(values) or (isinstance(node, exp.Like) and any("%" in v or "_" in v
                                                                                for v in literals)):
            return (None, None) if key == "TABLE_SCHEMA" else (found.get("TABLE_SCHEMA"), None)
        found.setdefault(key, set()).update(literals)
    return found.get("TABLE_SCHEMA"), found.get("TABLE_NAME")


def info_schema_tables(tree: exp.Expression) -> list[str] | None:
    """The information_schema tables a statement reads (lower case), or None when it reads
    anything else too."""
    names = []
    for table in tree.find_all(exp.Table):
        if table.db.lower() != INFO:
            if table.name and not table.db and table.name.lower().startswith("__is_"):
                continue
            return None
        names.append(table.name.lower())
    return names or None


def answer_info_schema(api: ServiceApi, db: str, sql: str) -> Rows | None:
    """The statement over the MySQL-shaped information_schema, or None when it reads a table
    outside it (or one this door does not have)."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.ParseError:
        return None
    names = info_schema_tables(tree)
    if names is None or any(n not in TABLES for n in names):
        return None
    catalog = EngineCatalog(api, db)
    tables: dict[str, pa.Table] = {}
    for name in set(names):
        tables[f"__is_{name}"] = _arrow(name, _build(name, catalog, tree))
    for table in tree.find_all(exp.Table):
        if table.db.lower() == INFO:
            alias = table.args.get("alias")
            table.replace(exp.Table(this=exp.to_identifier(f"__is_{table.name.lower()}", quoted=True),
                                    alias=alias or exp.TableAlias(this=exp.to_identifier(table.name))))
    return arrow_rows(run_local(tree, tables))


def _build(name: str, catalog: EngineCatalog, tree: exp.Expression) -> list[list[Any]]:
    if name == "schemata":
        return _schemata(catalog)
    if name == "tables":
        return _tables(catalog)
    if name == "columns":
        return _columns(catalog, _scope(tree))
    if name == "engines":
        return ENGINES
    if name == "character_sets":
        return CHARACTER_SETS
    if name == "collations":
        return COLLATIONS
    return []


def show_columns(api: ServiceApi, db: str, table: str, schema: str | None, full: bool) -> list[list[Any]]:
    """`SHOW [FULL] COLUMNS` rows (MySQL's and MindsDB's shape) of one table; `Refused` with
    the engine's answer when it does not exist."""
    if schema is None and "." in table and not table.startswith("`"):
        schema, table = table.split(".", 1)
    columns = EngineCatalog(api, db).columns(schema or db, table)
    if full:
        return [[name, kind, None, "YES", "", None, "", "select", ""] for name, kind in columns]
    return [[name, kind, "YES", "", None, ""] for name, kind in columns]


SHOW_COLUMNS = ["Field", "Type", "Null", "Key", "Default", "Extra"]
SHOW_FULL_COLUMNS = ["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"]
"""MySQL's own order, kept on this door (MindsDB's puts the three FULL columns last)."""


def create_table(api: ServiceApi, db: str, table: str, schema: str | None) -> str:
    """A CREATE TABLE text of a table's columns (what SQLAlchemy's reflection parses)."""
    if schema is None and "." in table:
        schema, table = table.split(".", 1)
    columns = EngineCatalog(api, db).columns(schema or db, table)
    lines = [f"  {quote_name(name)} {kind} DEFAULT NULL" for name, kind in columns]
    body = ",\n".join(lines)
    return f"CREATE TABLE {quote_name(table)} (\n{body}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


def filtered(names: list[str], rows: Iterable[list[Any]], like: str | None, where: str | None,
             integers: Iterable[str] = ()) -> Rows:
    """A SHOW answer with its `LIKE` (on the first column) or `WHERE` applied."""
    rows = list(rows)
    ints = set(integers)
    table = pa.table({n: pa.array([r[i] for r in rows], pa.int64() if n in ints else pa.string())
                      for i, n in enumerate(names)})
    if like is None and where is None:
        return arrow_rows(table)
    condition = f"`{names[0]}` LIKE {like}" if like is not None else where
    return arrow_rows(run_local(f"SELECT * FROM __show__ WHERE {condition}", {"__show__": table}))
