"""Bound parameters: `:name` placeholders replaced by safely quoted SQL literals.

The service takes SQL text only (the contract has no parameter field), so binding happens
on the client: each value becomes a literal by the one quoter, `kbsql.interface.literals`
(its docstring says why each quoting rule exists), which the reference dialect's lexer reads
as exactly one constant.

Placeholders are found outside string literals, quoted identifiers and comments
(`interface.sqltext`, the scanner the engine's `@variables` use too); `::` casts
and a colon right after an identifier or a closing quote (`{"k":true}` in a USING clause)
are not placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kbsql.interface.literals import ParameterError, quote_identifier, quote_literal
from kbsql.interface.sqltext import segments

__all__ = ["ParameterError", "bind", "placeholders", "quote_literal"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_BEFORE_PLACEHOLDER = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:'\"`)]")


def _scan(sql: str) -> Iterable[tuple[int, int, str]]:
    """Yield (start, end, name) of every `:name` placeholder outside literals and comments."""
    for first, last, is_code in segments(sql):
        if not is_code:
            continue
        i = sql.find(":", first, last)
        while i >= 0:
            if sql.startswith("::", i):  # a cast
                i = sql.find(":", i + 2, last)
                continue
            match = _NAME.match(sql, i + 1, last)
            prev = sql[i - 1] if i else " "
            if match and prev not in _NOT_BEFORE_PLACEHOLDER:
                yield i, match.end(), match.group()
                i = sql.find(":", match.end(), last)
            else:
                i = sql.find(":", i + 1, last)


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
    return name if _PLAIN_NAME.match(name) else quote_identifier(name)
