"""Bound parameters: `:name` placeholders replaced by safely quoted SQL literals.

The service takes SQL text only (the contract has no parameter field), so binding happens
on the client: each value becomes a literal by the one quoter, `kbsql.interface.literals`
(its docstring says why each quoting rule exists), which the reference dialect's lexer reads
as exactly one constant.

Placeholders are found outside string literals, quoted identifiers and comments; `::` casts
and a colon right after an identifier or a closing quote (`{"k":true}` in a USING clause)
are not placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kbsql.interface.literals import ParameterError, quote_literal

__all__ = ["ParameterError", "bind", "placeholders", "quote_literal"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_BEFORE_PLACEHOLDER = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:'\"`)]")


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
