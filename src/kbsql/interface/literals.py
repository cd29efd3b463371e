"""SQL literals of the reference dialect: one Python value as one constant.

This is kbsql's one SQL literal quoter. The client binds `:name` placeholders with it
(`kbsql.client.params`), the notebook's KB browser and the offline agent write their search
text with it: each value becomes a literal that the reference dialect's lexer
(mindsdb_sql_parser) reads as exactly one constant, so a value holding quotes, comments or
whole statements can never change the statement around it. It lives in `interface/` so the
engine can use it without depending on the client.

Why each rule exists (the lexer is MySQL-like, not standard SQL):
- quotes are doubled (`''`), and a backslash run that would pair with a quote or with the
  closing quote gets one more backslash, because the lexer treats `\\x` as one escaped pair
  and the decoder drops the backslash of `\\'` and `\\"` (details in `_literal_in`);
- a value that starts or ends with `'` goes in double quotes (the parser strips the
  delimiter from both ends), and one that starts or ends with both kinds becomes a `||`
  concatenation, so every string reads back exactly;
- floats are written without an exponent (the lexer reads `1e5` as `1` followed by an alias);
- negative numbers are parenthesised so `a -:v` can never become the comment `a --5`.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
from collections.abc import Mapping
from typing import Any

from kbsql.interface.errors import KbsqlError


class ParameterError(KbsqlError, ValueError):
    """A placeholder has no value, or a value has no SQL literal form."""


def _literal_in(text: str, quote: str) -> str:
    """`text` as one `quote`-delimited literal that the dialect's parser reads back exactly.

    The parser lexes `\\x` as one escaped pair and a doubled quote as a quote, then decodes
    the token with three global replacements (`\\"` -> `"`, `\\'` -> `'`, doubled quote ->
    quote) and strips the delimiter from both ends. So a backslash run directly before either
    quote kind loses one backslash on decoding (we write one more), a run before our own
    quote must leave that quote lexed as part of the string (odd runs pair with a single
    quote, even runs are followed by a doubled one), and a run at the very end must not
    escape the closing quote. Plain backslashes (`C:\\path`, `\\n`) are kept as they are.
    """
    other = "'" if quote == '"' else '"'
    out: list[str] = [quote]
    run = 0
    for ch in text:
        if ch == "\\":
            run += 1
            continue
        if ch == quote:
            if run == 0:
                out.append(quote * 2)
            elif run % 2:
                out.append("\\" * (run + 1) + quote * 2)
            else:
                out.append("\\" * (run + 1) + quote)
        elif ch == other:
            out.append("\\" * (run + 1 if run else 0) + other)
        else:
            out.append("\\" * run + ch)
        run = 0
    if run:  # before the closing quote
        out.append("\\" * (run + 1) + ("" if run % 2 else quote))
    out.append(quote)
    return "".join(out)


def _single_literal(text: str) -> str | None:
    """One string literal for `text`, or None when no single literal can carry it: the
    parser strips the delimiter from both ends of the decoded text, so a value may not start
    or end with the quote that delimits it."""
    for quote in ("'", '"'):
        if not text.startswith(quote) and not text.endswith(quote):
            return _literal_in(text, quote)
    return None


def _quote_string(text: str) -> str:
    """A string literal, or a `||` concatenation of literals for the rare value that starts
    or ends with both quote kinds (e.g. `'x"`): each end run of quotes goes in a literal
    delimited by the other quote kind."""
    single = _single_literal(text)
    if single is not None:
        return single
    body = text.strip("'\"")
    start = len(text) - len(text.lstrip("'\""))
    head, tail = text[:start], text[start + len(body):]
    pieces = [m.group() for m in re.finditer(r"'+|\"+", head)]
    pieces += [body] if body else []
    pieces += [m.group() for m in re.finditer(r"'+|\"+", tail)]
    return "(" + " || ".join(_single_literal(p) or "" for p in pieces) + ")"


def _key_string(text: str) -> str:
    """A string inside an object (`{'key': 'value'}`): it must be one literal."""
    single = _single_literal(text)
    if single is None:
        raise ParameterError(f"{text!r} starts or ends with both quote kinds and cannot be "
                             "written inside an object literal")
    return single


def _number(value: int | float | decimal.Decimal) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NULL"
        if math.isinf(value):
            raise ParameterError(f"{value!r} has no SQL literal form")
        text = format(decimal.Decimal(repr(value)), "f")
    elif isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ParameterError(f"{value!r} has no SQL literal form")
        text = format(value, "f")
    else:
        text = str(int(value))
    return f"({text})" if text.startswith("-") else text


def quote_literal(value: Any) -> str:
    """The SQL literal for one Python value.

    None/NaN/NA -> NULL, bool -> TRUE/FALSE, numbers as plain decimals, str (and dates,
    times, UUIDs) -> a quoted string, list/tuple/set -> `(a, b, ...)` for `IN`, dict -> the
    dialect's `{'key': value}` object (as used in `USING` clauses).
    """
    if value is None:
        return "NULL"
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # numpy scalars -> Python scalars
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float | decimal.Decimal):
        return _number(value)
    if isinstance(value, str):
        return _quote_string(value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        if str(value) in ("NaT",):
            return "NULL"
        return _quote_string(value.isoformat(sep=" ") if isinstance(value, _dt.datetime)
                             else value.isoformat())
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key_string(str(k))}: "
                          f"{_key_string(v) if isinstance(v, str) else quote_literal(v)}"
                          for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list | tuple | set | frozenset):
        literals = [quote_literal(v) for v in value]
        return "(" + (", ".join(literals) if literals else "NULL") + ")"
    if isinstance(value, bytes | bytearray):
        raise ParameterError("bytes have no SQL literal form; decode them to str first")
    if repr(value) in ("<NA>", "NaT"):  # pandas.NA / NaT without importing pandas
        return "NULL"
    if type(value).__name__ == "UUID":
        return _quote_string(str(value))
    raise ParameterError(f"a {type(value).__name__} has no SQL literal form; pass str, a number, "
                         "bool, None, a date, a list or a dict")


def quote_identifier(name: str) -> str:
    """A name as one SQL identifier of the reference dialect: in backticks, a backtick inside
    doubled (the literals' twin, for the statements the server and the engine write
    themselves: a table, project or job named by a user)."""
    return "`" + name.replace("`", "``") + "`"
