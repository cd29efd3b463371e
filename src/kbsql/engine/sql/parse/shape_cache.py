"""A SELECT parsed once per shape: the same text with other string literals skips sly.

A knowledge-base search is typed as `SELECT ... FROM kb WHERE content = '<the question>' ...`:
the same statement each time but for its question. sly spends ~0.4-0.5 ms on such a
statement (issue 37: a fifth of bench_vs_chroma's search through SQL at 100k, 2.3 ms), the
literal being one token among a dozen. So each single-quoted literal is swapped for a mark
(`'__kbsql_lit_N__'`), the marked text (the shape) is parsed once, and a later statement of
the same shape gets a copy of that statement with its own literals put back, each as the
parser's own `Constant` (`values_fastpath.literal_constant`: the parser's `unquote` and
strip). The swap only ever replaces one string token by another, so the parser sees the same
tokens and builds the same statement around them.

A shape is kept only when every mark comes back exactly once, as the value of a `Constant`,
and nowhere else (not in a name, an alias, a variable, a comment, a dict): a literal used
any other way (`INTERVAL '1' DAY`, a string alias) makes the shape uncached and the statement
goes to the full parser, as does any statement that is not a SELECT, any text holding the
mark's prefix or a backslash, a shape sly refuses (the full parser then reports the error on
the real text) and any text over MAX_TEXT. tests/sql/test_shape_cache.py compares both on hostile literals.
"""

from __future__ import annotations

import copy
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from mindsdb_sql_parser import ast, parse_sql

from kbsql.engine.sql.parse.values_fastpath import literal_constant
from kbsql.interface.sqltext import QUOTES, closed, segments

SHAPES = 256
MAX_TEXT = 512
"""A longer statement is parsed every time. A kept shape is its whole parse tree, ~230 bytes per
character of SQL (a 16 KB SELECT kept 3.7 MB: 256 shapes of it, ~0.95 GB for the process's
life); a search typed in SQL is 100-300 characters, so 256 shapes hold at most ~30 MB."""
_PREFIX = "__kbsql_lit_"
_MARK = _PREFIX + "{}__"

_SELECT = re.compile(r"\s*\(*\s*(SELECT|WITH)\b", re.IGNORECASE)


_SEEN = object()  # a shape met once: parsed (and kept) when it comes again


class ShapeCache:
    """shape text -> its parsed statement (marks in place of literals), None for a shape that
    cannot be reused, `_SEEN` for one met once; least recently used dropped past `size`.
    A shape is parsed on its second time, so statements that never repeat (ids or numbers
    varying) cost one scan of their text, not a second parse."""

    def __init__(self, size: int = SHAPES):
        self.size = size
        self._shapes: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def parse(self, query: str) -> ast.ASTNode:
        """The statement `parse_sql(query)` builds (its exception too)."""
        if len(query) > MAX_TEXT or _PREFIX in query or "\\" in query or not _SELECT.match(query):
            return parse_sql(query)  # a backslash: kept out since the first scanner (a regex)
            # backtracked exponentially on an unclosed literal of backslashes (38 of them: 15 s)
        split = _split(query)
        if split is None:
            return parse_sql(query)
        shape, literals = split
        with self._lock:
            first = shape not in self._shapes
            kept = None if first else self._shapes[shape]
            if not first:
                self._shapes.move_to_end(shape)
        if kept is not None and kept is not _SEEN:
            try:
                return _filled(kept, literals)
            except Exception:  # never an error the parser would not give: this shape goes to it
                with self._lock:
                    self._shapes[shape] = None
                return parse_sql(query)
        statement = parse_sql(query)  # the real text first: its errors are the ones to report
        if not first and kept is None:
            return statement  # a shape that cannot be reused
        with self._lock:
            self._shapes[shape] = _SEEN if first else _template(shape, len(literals))
            while len(self._shapes) > self.size:
                self._shapes.popitem(last=False)
        return statement


def _template(shape: str, count: int) -> tuple[ast.ASTNode, list[ast.Constant]] | None:
    """The shape's statement and its `count` mark Constants in order, if each mark is the
    value of exactly one Constant and held nowhere else; else None."""
    try:
        template = parse_sql(shape)
    except Exception:
        return None
    marks = _mark_constants(template, count)
    if marks is None:
        return None
    try:
        copy.deepcopy(template)  # every later statement of the shape is a copy of it
    except Exception:
        return None
    return template, marks


def _split(query: str) -> tuple[str, list[str]] | None:
    """(the text with each single-quoted literal swapped for its mark, the literals' texts),
    or None if the text ends inside a quote or a comment (the full parser says where). The
    literals are found by the one scanner of quoted tokens and comments (`sqltext.segments`,
    the lexer's rules, linear in the text)."""
    pieces: list[str] = []
    literals: list[str] = []
    for start, end, is_code in segments(query):
        piece = query[start:end]
        if not is_code and _unended(query, start, end):
            return None
        if not is_code and piece[0] == "'":
            pieces.append(f"'{_MARK.format(len(literals))}'")
            literals.append(piece)
        else:
            pieces.append(piece)
    return "".join(pieces), literals


def _unended(query: str, start: int, end: int) -> bool:
    """Whether the quoted token or comment at `query[start:end]` runs unclosed to the end."""
    piece = query[start:end]
    if piece[0] in QUOTES:
        return not closed(query, start, end)
    return piece.startswith("/*") and (len(piece) < 4 or not piece.endswith("*/"))


def _strings(item: Any) -> Iterator[tuple[Any, str]]:
    """(holder, text) of every string anywhere in a statement: node attributes, lists,
    tuples, dict keys and values (holder: the node whose attribute it is, else None)."""
    stack: list[tuple[Any, Any]] = [(None, item)]
    while stack:
        holder, value = stack.pop()
        if isinstance(value, str):
            yield holder, value
        elif isinstance(value, ast.ASTNode):
            stack.extend((value, v) for v in vars(value).values())
        elif isinstance(value, (list, tuple)):
            stack.extend((None, v) for v in value)
        elif isinstance(value, dict):
            stack.extend((None, v) for pair in value.items() for v in pair)


def _mark_constants(template: ast.ASTNode, count: int) -> list[ast.Constant] | None:
    """The Constant of each of the `count` marks, in order; None unless each mark is the
    whole value of exactly one Constant and no other string of the statement holds a mark."""
    found: list[list[ast.Constant]] = [[] for _ in range(count)]
    for holder, text in _strings(template):
        if _PREFIX not in text:
            continue
        if not (type(holder) is ast.Constant and holder.value is text):
            return None
        match = re.fullmatch(r"__kbsql_lit_(\d+)__", text)
        if match is None or int(match.group(1)) >= count:
            return None
        found[int(match.group(1))].append(holder)
    if any(len(f) != 1 for f in found):
        return None
    return [f[0] for f in found]


def _filled(template: tuple[ast.ASTNode, list[ast.Constant]], literals: list[str]) -> ast.ASTNode:
    """A copy of the shape's statement whose mark Constants hold the literals' values, made
    as the parser makes them (deepcopy's memo names each mark's copy: no walk)."""
    statement, marks = template
    memo: dict[int, Any] = {}
    copied = copy.deepcopy(statement, memo)
    for mark, literal in zip(marks, literals, strict=True):
        node = literal_constant("string", literal, "", 0, 0)
        assert isinstance(node, ast.Constant)
        memo[id(mark)].value = node.value
    return copied
