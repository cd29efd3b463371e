"""Where code is in SQL text: the one scanner of quoted tokens and comments.

Two passes read statement text before the parser does: the client's `:name` binding
(`client.params`) and the engine's `@variable` / `from_env()` expansion
(`engine.sql.variables`). Both must leave text inside string literals, quoted identifiers
and comments alone, by the same rules as the reference dialect's lexer
(mindsdb_sql_parser): `'...'`, `"..."` and backtick names, where a doubled quote stays
inside and, outside backticks, a backslash escapes the next character; `-- ...` to the end
of the line and `/* ... */`. An unterminated token runs to the end of the text (the parser
then reports it). `#` is not a comment there (the lexer refuses it), so it is code here.
"""

from __future__ import annotations

from collections.abc import Iterator

QUOTES = "'\"`"


def _quoted_end(sql: str, i: int) -> int:
    """Index just past the quoted token starting at `i`."""
    quote, n = sql[i], len(sql)
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


def segments(sql: str) -> Iterator[tuple[int, int, bool]]:
    """(start, end, is_code) spans covering `sql` in order; literals, quoted names and
    comments are the spans that are not code."""
    i, start, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in QUOTES:
            end = _quoted_end(sql, i)
        elif sql.startswith("--", i):
            newline = sql.find("\n", i)
            end = n if newline < 0 else newline
        elif sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            end = n if close < 0 else close + 2
        else:
            i += 1
            continue
        if start < i:
            yield start, i, True
        yield i, end, False
        i = start = end
    if start < n:
        yield start, n, True


def closed(sql: str, start: int, end: int) -> bool:
    """Whether the quoted token `segments` gave as `sql[start:end]` ends with its closing
    quote: one that runs to the end of the text may not (`'abc`, `'abc\\'`, `'abc''`). Read
    again with one more character after it, a closed token still ends where it did."""
    return end < len(sql) or _quoted_end(sql + " ", start) == end
