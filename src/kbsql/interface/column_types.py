"""Column types in MindsDB's MySQL shapes: one mapping for both doors.

MindsDB answers `SHOW [FULL] COLUMNS` (over HTTP and over its MySQL door alike) from its
`information_schema.COLUMNS`: `Type` is MySQL's `COLUMN_TYPE` (`int`, `double`,
`decimal(18,3)`, `text`, ...), never the storage engine's own type name
(`mindsdb/api/executor/command_executor.py`, `answer_show_columns`). The engine computes
that text here from its DuckDB type; the MySQL door reads it back (`DATA_TYPE` is its head)
to build `information_schema.COLUMNS`, so the two doors cannot disagree. It lives in
`interface/` because the engine and the server both use it and neither may import the other.
"""

from __future__ import annotations

import re

# engine (DuckDB) type names -> MySQL DATA_TYPE and COLUMN_TYPE
_TYPES = (
    (re.compile(r"^(TINYINT|INT1)$"), "tinyint", "tinyint"),
    (re.compile(r"^(SMALLINT|INT2|SHORT|UTINYINT)$"), "smallint", "smallint"),
    (re.compile(r"^(INTEGER|INT|INT4|SIGNED|USMALLINT)$"), "int", "int"),
    (re.compile(r"^(BIGINT|INT8|LONG|UINTEGER)$"), "bigint", "bigint"),
    (re.compile(r"^(HUGEINT|UBIGINT|UHUGEINT)$"), "decimal", "decimal(38,0)"),
    (re.compile(r"^(DOUBLE|FLOAT8|REAL|FLOAT4|FLOAT)$"), "double", "double"),
    (re.compile(r"^(DECIMAL|NUMERIC)(\(\d+,\s*\d+\))?$"), "decimal", None),
    (re.compile(r"^BOOL(EAN)?$"), "tinyint", "tinyint(1)"),
    (re.compile(r"^DATE$"), "date", "date"),
    (re.compile(r"^TIMESTAMP( WITH TIME ZONE)?|^TIMESTAMPTZ$|^TIMESTAMP_(S|MS|NS)$|^DATETIME$"),
     "datetime", "datetime"),
    (re.compile(r"^TIME$"), "time", "time"),
    (re.compile(r"^(BLOB|BYTEA|BINARY|VARBINARY)$"), "blob", "blob"),
    (re.compile(r"^JSON$|\[\]$|^(STRUCT|MAP|LIST|UNION)\b"), "json", "json"),
    (re.compile(r"^VARCHAR\(\d+\)$"), "varchar", None),
)

VARCHAR_DEFAULT = 1024
"""MindsDB's CHARACTER_MAXIMUM_LENGTH of a varchar without one (`MYSQL_DATA_TYPE_COLUMNS_DEFAULT`)."""


def with_own_type(engine_type: str, own: tuple[str, int | None] | None) -> str:
    """The engine type of a data-source column, sharpened by the source's own type where
    DuckDB's reading loses what MindsDB's MySQL shape shows (its postgres handler's map):
    `character varying(n)` is `VARCHAR(n)` (MySQL `varchar(n)`, not `text`), `json` and
    `jsonb` are `JSON`. Any other column keeps the engine's type."""
    if own is None:
        return engine_type
    name, length = own[0].lower(), own[1]
    if name in ("character varying", "varchar"):
        return f"VARCHAR({length or VARCHAR_DEFAULT})"
    if name in ("json", "jsonb"):
        return "JSON"
    return engine_type


OWN_TYPE_KEY = b"kbsql.own_type"
"""Arrow field metadata: the source's own type name of a result column that is a source's
column as stored (engine/sql/tables/source_columns.py); the MySQL door maps it."""

_OWN_WIRE = (("text", frozenset({"text", "character", "char", "bpchar", "money"})),
             ("json", frozenset({"json", "jsonb"})), ("binary", frozenset({"bytea"})))


def own_wire_type(own_type: str | None) -> str | None:
    """MindsDB's MySQL result type of a source column with this own type, where it is not
    what the engine's type gives: `text` (TEXT; `character(n)` and `money` too), `json`
    (JSON) or `binary` (BINARY, for `bytea`), as its postgres handler maps them
    (`_map_type`); None for any other type, which keeps the engine type's mapping."""
    name = (own_type or "").lower()
    return next((wire for wire, names in _OWN_WIRE if name in names), None)


SHOW_COLUMNS = ("Field", "Type", "Null", "Key", "Default", "Extra")
SHOW_FULL_COLUMNS = (*SHOW_COLUMNS, "Collation", "Privileges", "Comment")
"""MindsDB's `SHOW FULL COLUMNS` order: its three extra columns come last (MySQL's own
order puts `Collation` third; kbsql's MySQL door keeps MySQL's, the HTTP door MindsDB's)."""


def mysql_type(engine_type: str | None) -> tuple[str, str]:
    """(DATA_TYPE, COLUMN_TYPE) of an engine column type; text for anything else."""
    name = (engine_type or "").strip().upper()
    for pattern, data_type, column_type in _TYPES:
        if pattern.search(name):
            return data_type, column_type or name.lower().replace(" ", "")
    return "text", "text"


def data_type_of(column_type: str) -> str:
    """MySQL's DATA_TYPE of a COLUMN_TYPE this module wrote (`decimal(18,3)` -> `decimal`)."""
    return column_type.split("(", 1)[0].strip().lower() or "text"


def show_columns_rows(columns: list[tuple[str, str]], full: bool) -> list[list[object]]:
    """MindsDB's `SHOW [FULL] COLUMNS` rows of (name, engine type) pairs: `Type` is the
    MySQL column type, every column nullable, no key, default or extra (what MindsDB's
    information_schema holds for a data source's columns)."""
    rows: list[list[object]] = []
    for name, engine_type in columns:
        row: list[object] = [name, mysql_type(engine_type)[1], "YES", None, None, None]
        rows.append([*row, None, "select", None] if full else row)
    return rows


_PRECISION = (("tinyint", 3, 0), ("smallint", 5, 0), ("int", 10, 0), ("bigint", 19, 0), ("double", 22, None))
_LENGTHS = (("text", 65535), ("blob", 65535))
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")
_VARCHAR = re.compile(r"^varchar\((\d+)\)$")


def mysql_sizes(column_type: str) -> tuple[int | None, int | None, int | None, int | None, int | None]:
    """(CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE,
    DATETIME_PRECISION) of a column type, MySQL's defaults as MindsDB fills them
    (`MYSQL_DATA_TYPE_COLUMNS_DEFAULT`): JDBC and ODBC drivers size their buffers by them."""
    data_type = data_type_of(column_type)
    decimal = _DECIMAL.match(column_type)
    if decimal is not None:
        return None, None, int(decimal.group(1)), int(decimal.group(2)), None
    varchar = _VARCHAR.match(column_type)
    if varchar is not None:  # MindsDB's octet length: four bytes a character (utf8mb4)
        return int(varchar.group(1)), 4 * int(varchar.group(1)), None, None, None
    for name, precision, scale in _PRECISION:
        if name == data_type:
            return None, None, precision, scale, None
    for name, length in _LENGTHS:
        if name == data_type:
            return length, length, None, None, None
    if data_type in ("datetime", "time"):
        return None, None, None, None, 0
    return None, None, None, None, None
