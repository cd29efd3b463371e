"""A fast path for long `IN (literal, literal, ...)` lists: the list without sly.

mindsdb_sql_parser builds an IN list with `enumeration + [expr]`, one new list per item, so
its cost grows with the square of the item count, on top of sly's ~0.1 ms per token: on
this (shared, loaded) machine 10k ids took 0.75 s, 40k 7.6 s, 80k 18.5 s, and 150k pasted
ids held a worker for minutes. Users paste long id lists, so this shape is made fast and
exact: every `IN (` list of plain literals (at least `MIN_ITEMS` of them) is read by the
VALUES fast path's token regex (the parser's own patterns and conversions) and swapped for
a two-item placeholder list; the short text is parsed by mindsdb_sql_parser; then each
placeholder `Tuple` is found where the full parser puts the list (the right side of an
IN / NOT IN `BinaryOperation`) and given the real items. The statement is the one the full
parser would build (tests/sql/test_in_fastpath.py compares both on hostile literals).

Anything else (expressions or parameters in the list, double-quoted strings, a placeholder
that does not come back exactly once where expected, a syntax error in the short text)
makes `parse_in_lists` return None: the caller then uses the full parser, never a guess.
"""

from __future__ import annotations

import re

from mindsdb_sql_parser import ast, parse_sql

from kbsql.engine.sql.parse.values_fastpath import Fallback, lexed, literal_constant
from kbsql.engine.sql.tables.sqlglot_render import walk

MIN_LENGTH = 2_000  # below this the full parser costs well under a millisecond
MIN_ITEMS = 50  # shorter lists cost the full parser little; they stay with it

_PREFIX = "__kbsql_in_"
_MARK = _PREFIX + "{}__"

# What the parser's lexer skips as a whole outside an IN list (strings, quoted identifiers,
# comments, with mindsdb_sql_parser.lexer's patterns), the start of an IN list, or anything
# else up to the next candidate.
_SCAN = re.compile(r"""
    (?P<skip>'(?:\\.|[^'])*(?:''(?:\\.|[^'])*)*'
           | "(?:\\.|[^"])*(?:""(?:\\.|[^"])*)*"
           | `[^`]+` | /\*[\s\S]*?(?:\*/|\Z) | --[^\n]*)
  | (?P<open>IN[ \t\r\n]*\()
  | (?P<word>[\w$]+)
  | (?P<other>[^'"`/\-\w$]+ | [/\-])
""", re.IGNORECASE | re.VERBOSE)


def parse_in_lists(query: str) -> ast.ASTNode | None:
    """The statement mindsdb_sql_parser would build for `query`, or None when no long IN
    list of literals was found or anything looks unusual (then parse with `parse_sql`)."""
    if len(query) < MIN_LENGTH or _PREFIX in query:
        return None
    pieces: list[str] = []
    lists: list[list[ast.ASTNode]] = []
    pos, start, n = 0, 0, len(query)
    while pos < n:
        m = _SCAN.match(query, pos)
        if m is None:  # an unterminated string or comment: the full parser says where
            return None
        if m.lastgroup != "open":
            pos = m.end()
            continue
        try:
            items, end = literal_list(query, m.end())
        except Fallback:
            pos = m.end()
            continue
        if len(items) < MIN_ITEMS:
            pos = end
            continue
        mark = _MARK.format(len(lists))
        pieces.append(query[start:m.end()] + f"'{mark}', '{mark}')")
        lists.append(items)
        pos = start = end
    if not lists:
        return None
    pieces.append(query[start:])
    try:
        statement = parse_sql("".join(pieces))
    except Exception:
        return None  # the full parser reports the error on the whole text
    if not _put_back(statement, lists):
        return None
    return statement


def literal_list(text: str, pos: int) -> tuple[list[ast.ASTNode], int]:
    """The constants of a list whose `(` ends before `pos`, and the position after its `)`,
    as the parser would build them; `Fallback` if it holds anything but plain literals."""
    items: list[ast.ASTNode] = []
    n = len(text)
    tokens = lexed(text, pos, n)
    expect_item = True
    for kind, value, pos in tokens:
        if expect_item:
            negative = value == "-"  # `MINUS constant`: only before a number
            if negative:
                kind, value, pos = next(tokens, ("", "", pos))
                if kind not in ("integer", "float"):
                    raise Fallback
            node = literal_constant(kind, value, text, pos, n, negative)
            if node is None:
                raise Fallback
            items.append(node)
            expect_item = False
        elif value == ",":
            expect_item = True
        elif value == ")":
            return items, pos
        else:
            raise Fallback
    raise Fallback  # the text ended inside the list


def _put_back(statement: ast.ASTNode, lists: list[list[ast.ASTNode]]) -> bool:
    """Give each placeholder Tuple its items; False unless each one is found exactly once,
    as the right side of an IN or NOT IN."""
    marks = {_MARK.format(i): i for i in range(len(lists))}
    placed: dict[int, ast.Tuple] = {}
    for node in walk(statement):
        if not isinstance(node, ast.BinaryOperation) or len(node.args) != 2:
            continue
        op = " ".join(str(node.op).lower().split())
        right = node.args[1]
        if op not in ("in", "not in") or not isinstance(right, ast.Tuple) or len(right.items) != 2:
            continue
        first, second = right.items
        if not (isinstance(first, ast.Constant) and isinstance(second, ast.Constant)):
            continue
        index = marks.get(first.value) if isinstance(first.value, str) else None
        if index is None or second.value != first.value or index in placed:
            return False
        placed[index] = right
    if len(placed) != len(lists):
        return False
    # every mark constant must be one of the placed tuples' two items, nowhere else
    marked = sum(1 for node in walk(statement)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in marks)
    if marked != 2 * len(lists):
        return False
    for index, tuple_node in placed.items():
        tuple_node.items = lists[index]
    return True
