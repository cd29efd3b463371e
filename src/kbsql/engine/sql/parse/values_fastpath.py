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
from collections.abc import Iterator

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


class Fallback(Exception):
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
    except Fallback:
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
            raise Fallback
        i += 1
        row: list[ast.ASTNode] = []
        while True:
            if i >= n:
                raise Fallback
            token = tokens[i]
            if token == "-":  # `MINUS constant`: only before a number
                i += 1
                number = tokens[i] if i < n else None
                if not isinstance(number, ast.Constant) or isinstance(number.value, (str, bool)):
                    raise Fallback
                row.append(ast.Constant(-number.value))
            elif isinstance(token, ast.Constant):
                row.append(token)
            else:
                raise Fallback
            i += 1
            if i < n and tokens[i] == ",":
                i += 1
                continue
            if i < n and tokens[i] == ")":
                i += 1
                break
            raise Fallback
        rows.append(row)
        if i < n and tokens[i] == ",":
            i += 1
            continue
        while i < n and tokens[i] == ";":  # trailing semicolons are dropped by parse_sql
            i += 1
        if i != n:
            raise Fallback
        return rows


def _tokens(text: str, pos: int) -> list[object]:
    """Constants as the parser builds them; punctuation as one-character strings."""
    out: list[object] = []
    end = len(text.rstrip(" \t\r\n"))
    for kind, value, after in lexed(text, pos, end):
        node = literal_constant(kind, value, text, after, end)
        out.append(value if node is None else node)
    return out


def lexed(text: str, pos: int, end: int) -> Iterator[tuple[str, str, int]]:
    """(kind, text, end) of each token of `_TOKEN` from `pos` to `end`, blanks and comments
    skipped; `Fallback` at anything outside the fast paths' subset. The IN-list fast path
    reads its lists with it too."""
    match = _TOKEN.match
    while pos < end:
        m = match(text, pos)
        if m is None or m.lastgroup is None:
            raise Fallback
        kind = m.lastgroup
        pos = m.end()
        if kind != "skip":
            yield kind, m.group(kind), pos


def literal_constant(kind: str | None, value: str, text: str, pos: int, end: int,
                     negative: bool = False) -> ast.ASTNode | None:
    """The parser's `constant` rules (and `quote_string` for strings) for one token of
    `_TOKEN` ending at `pos`; None when the token is punctuation. The IN-list fast path
    builds its constants here too, so both give the parser's own nodes."""
    if kind == "string":
        return ast.Constant(value=str(unquote(value).strip("'")))
    if kind in ("integer", "float"):
        if pos < end and _GLUED.match(text, pos):  # `1abc` is one name to the lexer
            raise Fallback
        number: int | float = int(value) if kind == "integer" else float(value)
        return ast.Constant(value=-number if negative else number)
    if kind == "null":
        return ast.NullConstant()
    if kind in ("true", "false"):
        return ast.Constant(value=kind == "true")
    return None
