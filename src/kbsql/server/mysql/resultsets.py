"""Answers of the MySQL door, and SQL results as MySQL columns and rows.

A table result of the engine is Arrow-backed (`TableResult.arrow`): its rows go out batch by
batch, each batch converted to Python values and encoded as packets in a worker thread, so a
large result is never held twice (Arrow plus all its rows as Python objects or bytes) and the
event loop never spends long on one client's rows. Rows read from JSON (a result without
Arrow) are typed from their values.

Types follow what a MySQL client can use: integers as TINY/SHORT/LONG/LONGLONG, floats as
DOUBLE (4-byte ones as FLOAT, as MindsDB sends a PostgreSQL real; NaN as NULL, as the HTTP
answer has it), decimals as NEWDECIMAL, dates as DATE, timestamps as DATETIME (a time-zoned
one as its UTC wall time, as MindsDB sends a PostgreSQL timestamptz: the session's time_zone
is UTC and cannot be set otherwise, so the text names the same instant either way, and
information_schema already calls such a column datetime), times as TIME, text as VAR_STRING,
bytes as BLOB, and JSON objects (a knowledge base's `metadata`), lists and structs as JSON
text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from mysql_mimic.charset import CharacterSet
from mysql_mimic.packets import make_binary_resultrow, make_text_resultset_row
from mysql_mimic.results import ResultColumn
from mysql_mimic.types import ColumnType

from kbsql.interface.column_types import OWN_TYPE_KEY, own_wire_type
from kbsql.interface.results import TableResult

BATCH_ROWS = 1000
PYTHON_VALUE_BYTES = 64
"""What one value of a result held as Python objects is counted as (an object and its slot)."""
"""Rows converted and written at a time: small enough that a batch of long texts stays a few MB."""


@dataclass
class Ok:
    """A statement without rows."""

    affected_rows: int = 0


@dataclass
class Failed:
    """An error packet: the engine's one line, with the MySQL code a client acts on."""

    message: str
    code: int = 1105


@dataclass
class Rows:
    """A result set: its columns and its rows, encoded packet by packet (`Encoded`)."""

    columns: list[ResultColumn]
    batches: Iterator[list[Sequence[Any]]]
    held: int = 0
    """Bytes of the result the batches are drawn from (kept until the last is sent)."""

    def encoded(self, binary: bool) -> Encoded:
        return Encoded(self.columns, self.batches, binary, held=self.held)


@dataclass
class Encoded:
    """Rows as packet payloads, one batch per `next_batch` call (call it in a worker thread).
    A value that cannot be converted raises `Unsendable` with the one line to answer."""

    columns: list[ResultColumn]
    batches: Iterator[list[Sequence[Any]]]
    binary: bool
    first: list[bytes] | None = field(default=None)
    held: int = 0

    def next_batch(self) -> list[bytes] | None:
        """The next batch's packets, or None once the rows are done."""
        if self.first is not None:
            first, self.first = self.first, None
            return first
        try:
            rows = next(self.batches, None)
            if rows is None:
                return None
            columns = self.columns
            if self.binary:
                return [make_binary_resultrow(row, columns) for row in rows]
            return [make_text_resultset_row(row, columns) for row in rows]
        except Exception as exc:  # a value of a type or size a column cannot carry: the user's to see
            raise Unsendable(f"The result cannot be sent over MySQL: {type(exc).__name__}: {exc}") from exc

    def prefetch(self) -> Encoded:
        """Encode the first batch now (in the thread that ran the statement: a small result
        then needs no second hop to a worker)."""
        self.first = self.next_batch() or []
        return self


class Unsendable(Exception):
    """A batch of rows could not be converted or encoded; the message is the answer."""


Answer = Ok | Failed | Rows


# --- column types -------------------------------------------------------------------------

def _column(name: str, kind: ColumnType, charset: CharacterSet = CharacterSet.utf8mb4) -> ResultColumn:
    if kind == ColumnType.TIME:
        return ResultColumn(name, kind, charset, text_encoder=_time_text, binary_encoder=_time_binary)
    if kind == ColumnType.TINY:  # mysql-mimic's own binary TINY sends bool(value)
        return ResultColumn(name, kind, charset, binary_encoder=_tiny_binary)
    return ResultColumn(name, kind, charset)


def _tiny_binary(column: ResultColumn, value: Any) -> bytes:
    return struct.pack("<b", int(value))


def _time_text(column: ResultColumn, value: Any) -> bytes:
    return _time_string(value).encode()


def _time_binary(column: ResultColumn, value: Any) -> bytes:
    return ResultColumn("", ColumnType.TIME).binary_encode(_as_timedelta(value))


def _as_timedelta(value: Any) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    return dt.timedelta(hours=value.hour, minutes=value.minute, seconds=value.second,
                        microseconds=value.microsecond)


def _time_string(value: Any) -> str:
    """MySQL's TIME text: `[-]HH:MM:SS[.ffffff]`, hours past 24 for a long duration."""
    delta = _as_timedelta(value)
    sign = "-" if delta < dt.timedelta(0) else ""
    micros = abs(delta) // dt.timedelta(microseconds=1)
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    text = f"{sign}{hours:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{micro:06d}" if micro else text


_INTEGERS = {8: ColumnType.TINY, 16: ColumnType.SHORT, 32: ColumnType.LONG, 64: ColumnType.LONGLONG}


def arrow_column_type(kind: pa.DataType) -> ColumnType:
    """The MySQL type of an Arrow column (JSON for anything nested)."""
    if pa.types.is_dictionary(kind):
        return arrow_column_type(kind.value_type)
    if pa.types.is_boolean(kind):
        return ColumnType.TINY
    if pa.types.is_signed_integer(kind):
        return _INTEGERS[kind.bit_width]
    if pa.types.is_unsigned_integer(kind):  # one size up, signed; a UBIGINT may not fit one
        return _INTEGERS[kind.bit_width * 2] if kind.bit_width < 64 else ColumnType.NEWDECIMAL
    if pa.types.is_floating(kind):  # a 4-byte float (PostgreSQL's real) as MindsDB's FLOAT
        return ColumnType.FLOAT if kind.bit_width == 32 else ColumnType.DOUBLE
    if pa.types.is_decimal(kind):
        return ColumnType.NEWDECIMAL
    if pa.types.is_date(kind):
        return ColumnType.DATE
    if pa.types.is_timestamp(kind):
        return ColumnType.DATETIME
    if pa.types.is_time(kind) or pa.types.is_duration(kind):
        return ColumnType.TIME
    if pa.types.is_null(kind):
        return ColumnType.NULL
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return ColumnType.BLOB
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return ColumnType.VAR_STRING
    if pa.types.is_nested(kind) or pa.types.is_union(kind):
        return ColumnType.JSON
    return ColumnType.VAR_STRING  # anything else goes as its text


def python_column_type(values: Sequence[Any]) -> ColumnType:
    """The MySQL type of a column of Python values, from its first non-null value."""
    value = next((v for v in values if v is not None), None)
    if value is None:
        return ColumnType.NULL
    if isinstance(value, bool):
        return ColumnType.TINY
    if isinstance(value, int):
        return ColumnType.LONGLONG
    if isinstance(value, float):
        return ColumnType.DOUBLE
    if isinstance(value, decimal.Decimal):
        return ColumnType.NEWDECIMAL
    if isinstance(value, dt.datetime):
        return ColumnType.DATETIME
    if isinstance(value, dt.date):
        return ColumnType.DATE
    if isinstance(value, dt.time | dt.timedelta):
        return ColumnType.TIME
    if isinstance(value, bytes | bytearray):
        return ColumnType.BLOB
    if isinstance(value, dict | list | tuple):
        return ColumnType.JSON
    return ColumnType.VAR_STRING


# --- values ------------------------------------------------------------------------------

def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, ensure_ascii=False)


def _utc_naive(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _python_value(kind: ColumnType, value: Any) -> Any:
    """A Python value as the encoder of `kind` takes it."""
    if value is None:
        return None
    if kind == ColumnType.JSON:
        return value if isinstance(value, str) else _json_text(value)
    if kind in (ColumnType.DOUBLE, ColumnType.FLOAT) and isinstance(value, float) and value != value:
        return None  # NaN: null, as in the HTTP answer
    if kind == ColumnType.NEWDECIMAL and isinstance(value, decimal.Decimal):
        return format(value, "f")
    if kind in (ColumnType.DATETIME, ColumnType.TIMESTAMP):
        return _utc_naive(value)
    if kind == ColumnType.VAR_STRING and not isinstance(value, str):
        return str(value)
    return value


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _arrow_values(column: pa.Array, kind: ColumnType) -> list[Any]:
    """One batch of one Arrow column as Python values the encoders take (column-wise)."""
    arrow_type = column.type
    if pa.types.is_dictionary(arrow_type):
        column = column.cast(arrow_type.value_type)
        arrow_type = column.type
    if kind == ColumnType.JSON and not _is_text(arrow_type) and not pa.types.is_binary(arrow_type):
        return [_json_text(v) for v in column.to_pylist()]
    if pa.types.is_floating(arrow_type):
        column = pc.if_else(pc.is_nan(column), pa.scalar(None, arrow_type), column)
    elif pa.types.is_timestamp(arrow_type):
        if arrow_type.tz:  # UTC wall time, without the zone
            column = column.cast(pa.timestamp(arrow_type.unit))
        if arrow_type.unit == "ns":  # Python datetimes hold microseconds
            column = pc.cast(column, pa.timestamp("us"), safe=False)
    elif pa.types.is_decimal(arrow_type) or (pa.types.is_unsigned_integer(arrow_type)
                                             and arrow_type.bit_width == 64):
        column = pc.cast(column, pa.string())
    elif pa.types.is_duration(arrow_type) and arrow_type.unit == "ns":
        column = pc.cast(column, pa.duration("us"), safe=False)
    elif pa.types.is_interval(arrow_type):
        return [None if v is None else _interval_text(v) for v in column.to_pylist()]
    elif kind == ColumnType.VAR_STRING and not _is_text(arrow_type):
        column = pc.cast(column, pa.string())
    return column.to_pylist()


def _interval_text(value: Any) -> str:
    """An interval as DuckDB writes it: `1 month 2 days 03:04:05`."""
    months, days, nanos = value.months, value.days, value.nanoseconds
    parts = [f"{n} {unit}{'s' if abs(n) != 1 else ''}" for n, unit in ((months, "month"), (days, "day")) if n]
    if nanos or not parts:
        parts.append(_time_string(dt.timedelta(microseconds=nanos // 1000)))
    return " ".join(parts)


def _arrow_batches(table: pa.Table, kinds: list[ColumnType],
                   python: Mapping[int, list[Any]]) -> Iterator[list[Sequence[Any]]]:
    start = 0
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        count = batch.num_rows
        columns: list[list[Any]] = []
        for i, kind in enumerate(kinds):
            array = batch.column(i)
            held = python.get(i)
            if held is not None and not _is_text(array.type):
                columns.append([_json_text(v) for v in held[start:start + count]])
            else:
                columns.append(_arrow_values(array, kind))
        start += count
        if count:
            yield list(zip(*columns, strict=True)) if columns else [() for _ in range(count)]


def _python_batches(rows: list[list[Any]], kinds: list[ColumnType]) -> Iterator[list[Sequence[Any]]]:
    for start in range(0, len(rows), BATCH_ROWS):
        yield [[_python_value(kind, value) for kind, value in zip(kinds, row, strict=True)]
               for row in rows[start:start + BATCH_ROWS]]


def table_rows(result: TableResult) -> Rows:
    """A table result as MySQL columns and lazily converted batches of rows."""
    names = [str(n) for n in result.column_names]
    table = result.arrow
    if table is not None:
        python = result.python_columns
        kinds = [ColumnType.JSON if i in python else arrow_column_type(table.field(i).type)
                 for i in range(table.num_columns)]
        owned = [_own_kind(table.field(i)) for i in range(table.num_columns)]
        kinds = [kind if own is None else own[0] for kind, own in zip(kinds, owned, strict=True)]
        kinds = [_typed(kind) for kind in kinds]
        for i, own in enumerate(owned):
            if own is not None and own[0] == ColumnType.JSON and _is_text(table.field(i).type):
                table = table.set_column(i, table.field(i).with_type(pa.binary()),
                                         pc.cast(table.column(i), pa.binary()))
        batches = _arrow_batches(table, kinds, python)
        return Rows(columns_of(names, kinds, [None if own is None else own[1] for own in owned]), batches,
                    table.nbytes)
    data = result.data
    kinds = [_typed(python_column_type([row[i] for row in data])) if data else ColumnType.VAR_STRING
             for i in range(len(names))]
    return Rows(columns_of(names, kinds), _python_batches(data, kinds),
                PYTHON_VALUE_BYTES * len(data) * len(names))


def _typed(kind: ColumnType) -> ColumnType:
    """A column the engine could not type (no rows, or NULLs only, built in Python: a knowledge
    base's or agent's answer) goes as text, as MindsDB sends its object columns: MySQL's NULL
    type leaves a client that keeps a column's type (JDBC, Metabase) nothing to read the next
    answer by. A typed NULL (`NULL::INTEGER`, a source's empty column) keeps its type."""
    return ColumnType.VAR_STRING if kind == ColumnType.NULL else kind


def arrow_rows(table: pa.Table) -> Rows:
    """An Arrow table the door made itself (information_schema, SHOW answers)."""
    kinds = [_typed(arrow_column_type(table.field(i).type)) for i in range(table.num_columns)]
    return Rows(columns_of(table.column_names, kinds), _arrow_batches(table, kinds, {}))


def columns_of(names: Sequence[str], kinds: Sequence[ColumnType],
               charsets: Sequence[CharacterSet | None] | None = None) -> list[ResultColumn]:
    """Result columns; a BLOB is binary unless `charsets` says otherwise (a source's `text`)."""
    charsets = charsets or [None] * len(kinds)
    return [_column(name, kind, charset if charset is not None else
                    CharacterSet.binary if kind == ColumnType.BLOB else CharacterSet.utf8mb4)
            for name, kind, charset in zip(names, kinds, charsets, strict=True)]


_OWN_KINDS = {"text": (ColumnType.BLOB, CharacterSet.utf8mb4),
              "json": (ColumnType.JSON, CharacterSet.binary),
              "binary": (ColumnType.STRING, CharacterSet.binary)}
"""MindsDB's wire types of a source's own types (`column_types.own_wire_type`): TEXT is a
BLOB with a text character set; BINARY holds bytes; JSON goes as MySQL sends a JSON column
(binary character set: a driver's binary protocol hands bytes, as MindsDB's test expects).
A knowledge base's `metadata` and DuckDB's own JSON keep a text character set (kbsql's
text and binary protocols answer them alike)."""


def _own_kind(field: pa.Field) -> tuple[ColumnType, CharacterSet] | None:
    """The MySQL type of a column the engine marked with its source's own type, if that
    type maps to another wire type than the Arrow type's (`column_types.OWN_TYPE_KEY`)."""
    own = (field.metadata or {}).get(OWN_TYPE_KEY)
    return None if own is None else _OWN_KINDS.get(own_wire_type(own.decode()) or "")


def local_rows(names: Sequence[str], rows: Sequence[Sequence[Any]],
               kinds: Sequence[ColumnType] | None = None) -> Rows:
    """Rows the door answers itself (variables, SHOW ENGINES, ...), typed from their values
    unless `kinds` are given."""
    table = [list(r) for r in rows]
    kinds = list(kinds) if kinds is not None else \
        [python_column_type([row[i] for row in table]) for i in range(len(names))]
    if not table:  # an empty answer still names its columns: text unless told otherwise
        kinds = [ColumnType.VAR_STRING if k == ColumnType.NULL else k for k in kinds]
    return Rows(columns_of(names, kinds), _python_batches(table, kinds))
