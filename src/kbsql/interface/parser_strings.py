"""The reference parser's quoted strings, read whole.

mindsdb_sql_parser's `quote_string` production read a string token's escapes first and then
stripped every quote at either end, so a literal ending or starting with a quote lost it
(`'ab'''` read as `ab`, `''''` as an empty string): a silent wrong value in a filter, an
insert, a search text. `read_strings_whole` swaps its two string productions for
`string_value`, once per process (the grammar lives on the parser's class); the places that
parse call it when they load (engine/sql/parse/parsing.py, interface/parametrize.py), and the
fast paths that build the parser's constants themselves read strings with `string_value`.
"""

from __future__ import annotations

from typing import Any


def string_value(token: str, double: bool = False) -> str:
    """A quoted string token's text: its outer quotes taken off, then its escapes read (`''`,
    `\\'`). The parser's `quote_string` read the escapes first and then stripped every quote at
    either end, so `'ab'''` read as `ab`, `''''` as an empty string and `'''a'` as `a`: a
    literal ending or starting with a quote silently lost it."""
    from mindsdb_sql_parser.utils import unquote

    return unquote(token[1:-1], is_double_quoted=double)


def read_strings_whole() -> None:
    """Swap the parser's two string productions for `string_value`, once per process (the
    grammar is built once, on the parser's class). Called where kbsql first parses."""
    from mindsdb_sql_parser.parser import MindsDBParser

    for production in MindsDBParser._grammar.Productions:
        name = getattr(production.func, "__name__", "")
        if name == "quote_string":
            production.func = _quote_string
        elif name == "dquote_string":
            production.func = _dquote_string


def _quote_string(parser: object, p: Any) -> str:
    return string_value(p[0])


def _dquote_string(parser: object, p: Any) -> str:
    return string_value(p[0], double=True)
