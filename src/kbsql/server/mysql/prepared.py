"""Prepared statements (MySQL's binary protocol): `?` placeholders bound as SQL literals.

The statement text is kept at COM_STMT_PREPARE; each COM_STMT_EXECUTE sends the values in
binary form, read here, and the statement runs as text with every `?` (outside string
literals, quoted names and comments: `interface.sqltext`) replaced by the literal of its
value, written by kbsql's one quoter (`interface.literals`). A value can never change the
statement around it, and the engine sees the same text a client-side binding (pymysql's)
would send, so both protocols give the same answer.

mysql-mimic's own execute path pastes string values between quotes unescaped and cannot read
date, time or decimal parameters; this replaces it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import struct
from dataclasses import dataclass, field
from typing import Any

from mysql_mimic.types import (
    ColumnType,
    read_double,
    read_float,
    read_int_1,
    read_int_2,
    read_int_4,
    read_int_8,
    read_uint_1,
    read_uint_2,
    read_uint_4,
    read_uint_8,
    read_uint_len,
)

from kbsql.interface.literals import ParameterError, quote_literal
from kbsql.interface.sqltext import segments


class BadParameters(ValueError):
    """The execute packet does not match its statement (a malformed packet)."""


@dataclass
class Prepared:
    stmt_id: int
    sql: str
    placeholders: list[int]
    """Offsets of the `?` placeholders in `sql`."""
    types: list[tuple[int, bool]] = field(default_factory=list)
    """(type, unsigned) of each parameter, as last sent (a client may send them once)."""
    long_data: dict[int, bytearray] = field(default_factory=dict)
    refused: str | None = None
    """Why long data sent for it was dropped (over a bound): its next execute answers this
    (COM_STMT_SEND_LONG_DATA has no answer of its own, as in MySQL)."""

    @property
    def held(self) -> int:
        """Bytes it holds: its text and long data."""
        return len(self.sql) + sum(len(b) for b in self.long_data.values())


def placeholders(sql: str) -> list[int]:
    """Offsets of the `?` placeholders outside literals, quoted names and comments."""
    found = []
    for start, end, is_code in segments(sql):
        if is_code:
            at = sql.find("?", start, end)
            while at >= 0:
                found.append(at)
                at = sql.find("?", at + 1, end)
    return found


def bind(statement: Prepared, values: list[Any]) -> str:
    """The statement's text with each `?` replaced by the literal of its value."""
    out, last = [], 0
    for at, value in zip(statement.placeholders, values, strict=True):
        out.append(statement.sql[last:at])
        try:
            out.append(quote_literal(value))
        except ParameterError as exc:
            raise ParameterError(f"parameter {len(out) // 2 + 1}: {exc}") from None
        last = at + 1
    out.append(statement.sql[last:])
    return "".join(out)


def read_execute(statement: Prepared, reader: io.BytesIO) -> list[Any]:
    """The parameter values of a COM_STMT_EXECUTE, read after its stmt-id, flags and
    iteration count. A short or inconsistent packet raises `BadParameters`."""
    count = len(statement.placeholders)
    if not count:
        return []
    try:
        nulls = reader.read((count + 7) // 8)
        bound = read_uint_1(reader)
        if bound:
            statement.types = []
            for _ in range(count):
                kind = read_uint_1(reader)
                statement.types.append((kind, bool(read_uint_1(reader) & 0x80)))
        elif len(statement.types) != count:
            raise BadParameters("parameter types were never sent")
        values: list[Any] = []
        for i, (kind, unsigned) in enumerate(statement.types):
            if nulls[i // 8] & (1 << (i % 8)):
                values.append(None)
            elif i in statement.long_data:
                values.append(_text(bytes(statement.long_data[i])))
            else:
                values.append(_value(reader, kind, unsigned))
    except (BadParameters, ParameterError):
        raise
    except (IndexError, ValueError, struct.error) as exc:  # a short packet, a bad date
        raise BadParameters(f"the parameters cannot be read: {exc}") from None
    finally:
        statement.long_data.clear()
    if reader.read(1):
        raise BadParameters("the packet is longer than its parameters")
    return values


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ParameterError("a binary parameter is not UTF-8 text; kbsql takes text, numbers, "
                             "dates and NULL") from None


_TEXT_TYPES = {ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING, ColumnType.BLOB,
               ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB, ColumnType.LONG_BLOB, ColumnType.JSON,
               ColumnType.ENUM, ColumnType.SET, ColumnType.BIT}


def _exact(reader: io.BytesIO, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise BadParameters("the packet ends inside a parameter")
    return data


def _value(reader: io.BytesIO, kind: int, unsigned: bool) -> Any:
    if kind in _TEXT_TYPES:
        return _text(_exact(reader, read_uint_len(reader)))
    if kind in (ColumnType.DECIMAL, ColumnType.NEWDECIMAL):
        raw = _exact(reader, read_uint_len(reader))
        try:
            return decimal.Decimal(raw.decode("ascii"))
        except (decimal.InvalidOperation, UnicodeDecodeError):
            raise BadParameters(f"{raw!r} is not a decimal") from None
    readers = {
        ColumnType.TINY: (read_uint_1, read_int_1), ColumnType.BOOL: (read_uint_1, read_uint_1),
        ColumnType.SHORT: (read_uint_2, read_int_2), ColumnType.YEAR: (read_uint_2, read_int_2),
        ColumnType.LONG: (read_uint_4, read_int_4), ColumnType.INT24: (read_uint_4, read_int_4),
        ColumnType.LONGLONG: (read_uint_8, read_int_8),
    }
    if kind in readers:
        return readers[kind][0 if unsigned else 1](reader)
    if kind == ColumnType.FLOAT:
        return read_float(reader)
    if kind == ColumnType.DOUBLE:
        return read_double(reader)
    if kind == ColumnType.NULL:
        return None
    if kind in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP):
        return _datetime(reader, kind == ColumnType.DATE)
    if kind == ColumnType.TIME:
        return _time(reader)
    raise BadParameters(f"parameter type {kind} is not supported")


def _datetime(reader: io.BytesIO, date_only: bool) -> Any:
    size = read_uint_1(reader)
    body = io.BytesIO(_exact(reader, size))
    if size == 0:
        return None  # the zero date '0000-00-00': no Python value, sent as NULL
    year, month, day = read_uint_2(body), read_uint_1(body), read_uint_1(body)
    hour = minute = second = micro = 0
    if size >= 7:
        hour, minute, second = read_uint_1(body), read_uint_1(body), read_uint_1(body)
    if size >= 11:
        micro = read_uint_4(body)
    if date_only and size == 4:
        return dt.date(year, month, day)
    return dt.datetime(year, month, day, hour, minute, second, micro)


def _time(reader: io.BytesIO) -> str:
    size = read_uint_1(reader)
    body = io.BytesIO(_exact(reader, size))
    if size == 0:
        return "00:00:00"
    negative, days = read_uint_1(body), read_uint_4(body)
    hour, minute, second = read_uint_1(body), read_uint_1(body), read_uint_1(body)
    micro = read_uint_4(body) if size >= 12 else 0
    text = f"{'-' if negative else ''}{days * 24 + hour:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{micro:06d}" if micro else text
