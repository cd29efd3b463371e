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


def statements(sql: str) -> list[str]:
    """The statements of `sql`, split at each `;` that is code (not inside a literal, a
    quoted name or a comment) and outside parentheses, each stripped; a part holding only
    comments and blanks is no statement. What a `%%kbsql` cell of several statements runs
    one by one, and a job's statements (MindsDB's split_sql splits at `;` outside quotes, so
    a `;` in a comment split a statement there). Parentheses hold a `;` the parser reads as
    part of one statement: a job's body (`CREATE JOB j (INSERT ...; INSERT ...)`), a view's
    or a native query (`SELECT * FROM pg (...; ...)`)."""
    cuts, depth = [], 0
    for begin, end, is_code in segments(sql):
        for i in range(begin, end) if is_code else ():
            if sql[i] == "(":
                depth += 1
            elif sql[i] == ")":
                depth = max(depth - 1, 0)  # a stray `)` is the parser's to report
            elif sql[i] == ";" and depth == 0:
                cuts.append(i)
    parts, start = [], 0
    for cut in [*cuts, len(sql)]:
        part = sql[start:cut]
        if _any_code(part):
            parts.append(part.strip())
        start = cut + 1
    return parts


def _any_code(text: str) -> bool:
    """Whether `text` holds anything but comments and blanks (a literal counts)."""
    return any(text[begin:end].strip() if is_code else not text.startswith(("--", "/*"), begin)
               for begin, end, is_code in segments(text))
