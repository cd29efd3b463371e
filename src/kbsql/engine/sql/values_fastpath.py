"""A fast path for `INSERT INTO name (cols) VALUES (...), (...)`: the VALUES list without sly.

mindsdb_sql_parser (sly) spends ~0.1 ms per VALUES row tokenising and reducing a large
INSERT: half the time of an in-process insert with a cheap embedder. Here the statement's
head (`INSERT INTO name (cols) VALUES`) is still parsed by mindsdb_sql_parser, with one
placeholder row, and only the rows are scanned by one compiled regex that uses the
parser's own token patterns and value conversions, so the `ast.Insert` is the one the
full parser would build.

Anything outside the plain literal subset (expressions, functions, parameters, double-
quoted strings, `- -1`, a number glued to a name, ...) makes `parse_insert_values` return
None and the caller falls back to the full parser: the fast path never guesses.
tests/sql/test_values_fastpath.py compares both on hostile strings.
"""

from __future__ import annotations

import re

from mindsdb_sql_parser import ast, parse_sql
from mindsdb_sql_parser.utils import unquote

MIN_LENGTH = 2_000  # below this the full parser costs well under a millisecond

# The statement's head, up to and including VALUES. Deliberately narrow: no quotes, comments
# or parentheses inside the table name or the column list (those go to the full parser).
_HEAD = re.compile(
    r"\A\s*INSERT\s+INTO\s+[A-Za-z_`][\w$`.\s]*?\(\s*[\w$`,\s]*\)\s*VALUES\b", re.IGNORECASE)

# One token of the VALUES list with the whitespace before it, with the patterns of
# mindsdb_sql_parser.lexer.MindsDBLexer (its flags: IGNORECASE; the whitespace it ignores).
_TOKEN = re.compile(r"""[\ \t\r\n]*(?:
    (?P<skip>/\*[\s\S]*?\*/|--[^\n]*)
  | (?P<string>'(?:\\.|[^'])*(?:''(?:\\.|[^'])*)*')
  | (?P<float>\d+\.\d+)
  | (?P<integer>\d+)
  | (?P<null>\bNULL\b) | (?P<true>\bTRUE\b) | (?P<false>\bFALSE\b)
  | (?P<punct>[(),;-])
)""", re.IGNORECASE | re.VERBOSE)

# after a number the lexer would glue letters, digits, `$`, `_` or `.` into another token
_GLUED = re.compile(r"[\w$.`]")


class _Fallback(Exception):
    """The text is outside the fast path's subset: use the full parser."""


def parse_insert_values(query: str) -> ast.Insert | None:
    """The `ast.Insert` mindsdb_sql_parser would build for `query`, or None when the
    fast path does not apply (then parse the text with `parse_sql`)."""
    if len(query) < MIN_LENGTH:
        return None
    head = _HEAD.match(query)
    if head is None:
        return None
    try:
        rows = _rows(query, head.end())
    except _Fallback:
        return None
    try:
        statement = parse_sql(query[:head.end()] + " (NULL)")
    except Exception:
        return None  # let the full parser report the error on the whole text
    if not isinstance(statement, ast.Insert) or statement.values is None or statement.from_select:
        return None
    statement.values = rows
    return statement


def _rows(text: str, pos: int) -> list[list[ast.ASTNode]]:
    tokens = _tokens(text, pos)
    rows: list[list[ast.ASTNode]] = []
    i, n = 0, len(tokens)
    while True:
        if i >= n or tokens[i] != "(":
            raise _Fallback
        i += 1
        row: list[ast.ASTNode] = []
        while True:
            if i >= n:
                raise _Fallback
            token = tokens[i]
            if token == "-":  # `MINUS constant`: only before a number
                i += 1
                number = tokens[i] if i < n else None
                if not isinstance(number, ast.Constant) or isinstance(number.value, (str, bool)):
                    raise _Fallback
                row.append(ast.Constant(-number.value))
            elif isinstance(token, ast.Constant):
                row.append(token)
            else:
                raise _Fallback
            i += 1
            if i < n and tokens[i] == ",":
                i += 1
                continue
            if i < n and tokens[i] == ")":
                i += 1
                break
            raise _Fallback
        rows.append(row)
        if i < n and tokens[i] == ",":
            i += 1
            continue
        while i < n and tokens[i] == ";":  # trailing semicolons are dropped by parse_sql
            i += 1
        if i != n:
            raise _Fallback
        return rows


def _tokens(text: str, pos: int) -> list[object]:
    """Constants as the parser builds them; punctuation as one-character strings."""
    out: list[object] = []
    end = len(text.rstrip(" \t\r\n"))
    match = _TOKEN.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise _Fallback
        kind = m.lastgroup
        value = m.group(kind)  # type: ignore[arg-type]
        pos = m.end()
        if kind == "skip":
            continue
        if kind == "string":  # the parser's quote_string + constant rules
            out.append(ast.Constant(value=str(unquote(value).strip("'"))))
        elif kind in ("integer", "float"):
            if pos < end and _GLUED.match(text, pos):
                raise _Fallback
            out.append(ast.Constant(value=int(value) if kind == "integer" else float(value)))
        elif kind == "null":
            out.append(ast.NullConstant())
        elif kind == "true":
            out.append(ast.Constant(value=True))
        elif kind == "false":
            out.append(ast.Constant(value=False))
        else:
            out.append(value)
    return out
