"""Bound parameters: `:name` placeholders replaced by safely quoted SQL literals.

The service takes SQL text only (the contract has no parameter field), so binding happens
on the client: each value becomes a literal that the reference dialect's lexer
(mindsdb_sql_parser) reads as exactly one constant. A value holding quotes, comments or
whole statements can therefore never change the statement around it.

Why each rule exists (the lexer is MySQL-like, not standard SQL):
- quotes are doubled (`''`), and a backslash run that would pair with a quote or with the
  closing quote gets one more backslash, because the lexer treats `\\x` as one escaped pair
  and the decoder drops the backslash of `\\'` and `\\"` (details in `_literal_in`);
- a value that starts or ends with `'` goes in double quotes (the parser strips the
  delimiter from both ends), and one that starts or ends with both kinds becomes a `||`
  concatenation, so every string reads back exactly;
- floats are written without an exponent (the lexer reads `1e5` as `1` followed by an alias);
- negative numbers are parenthesised so `a -:v` can never become the comment `a --5`.

Placeholders are found outside string literals, quoted identifiers and comments; `::` casts
and a colon right after an identifier or a closing quote (`{"k":true}` in a USING clause)
are not placeholders.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kbsql.interface.errors import KbsqlError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_BEFORE_PLACEHOLDER = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:'\"`)]")


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


def _skip_quoted(sql: str, i: int, quote: str) -> int:
    """Index just past the quoted token starting at `i` (lexer rules: `\\x` pairs, doubled quote)."""
    n = len(sql)
    j = i + 1
    while j < n:
        ch = sql[j]
        if ch == "\\" and quote != "`":
            j += 2
            continue
        if ch == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _scan(sql: str) -> Iterable[tuple[int, int, str]]:
    """Yield (start, end, name) of every `:name` placeholder outside literals and comments."""
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            i = _skip_quoted(sql, i, ch)
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch == ":":
            if sql.startswith("::", i):
                i += 2
                continue
            match = _NAME.match(sql, i + 1)
            prev = sql[i - 1] if i else " "
            if match and prev not in _NOT_BEFORE_PLACEHOLDER:
                yield i, match.end(), match.group()
                i = match.end()
            else:
                i += 1
        else:
            i += 1


def placeholders(sql: str) -> list[str]:
    """The distinct placeholder names in `sql`, in order of first use."""
    return list(dict.fromkeys(name for _, _, name in _scan(sql)))


def bind(sql: str, params: Mapping[str, Any]) -> str:
    """Replace every `:name` with `quote_literal(params[name])`; a missing name is an error."""
    out: list[str] = []
    last = 0
    for start, end, name in _scan(sql):
        if name not in params:
            raise ParameterError(f"No value for the parameter :{name}")
        out.append(sql[last:start])
        out.append(quote_literal(params[name]))
        last = end
    out.append(sql[last:])
    return "".join(out)


_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote_name(name: str) -> str:
    """A name as an SQL identifier: bare when plain, else in backticks (doubled inside)."""
    return name if _PLAIN_NAME.match(name) else "`" + name.replace("`", "``") + "`"
