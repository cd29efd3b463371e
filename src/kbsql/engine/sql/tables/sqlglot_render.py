"""From a parsed statement (mindsdb_sql_parser AST) to a DuckDB query tree (sqlglot).

Why two libraries: mindsdb_sql_parser understands the reference dialect (and is what the
rest of the engine routes on), sqlglot renders DuckDB SQL with every identifier quoted and
every string literal escaped. The bridge is the parser's own renderer, with one guard:
string constants are swapped for placeholder tokens before rendering and put back as
sqlglot literals after parsing, so no user value is ever re-lexed from text (the parser's
renderer escapes quotes with backslashes, which DuckDB does not read). Identifiers come
back through sqlglot's tokenizer, which accepts the parser's backtick quoting, and leave
double-quoted with embedded quotes doubled. No user text reaches DuckDB unquoted.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import sqlglot
from mindsdb_sql_parser import ast
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from kbsql.engine.sql.parse.union_parts import SET_OPERATIONS, enclosed_parts
from kbsql.interface.errors import SqlError

_TOKEN = "__kbsql_literal_{}__"
LIST_MIN_ITEMS = 50
"""A tuple of this many plain literals (a pasted `IN (id, ...)` list) skips the text round
trip: its items are built as the sqlglot nodes that reading the parser's rendering gives
(tests/sql/test_in_fastpath.py compares the DuckDB SQL of both ways). Measured for 150k ids
under cProfile: `to_tree` 15.3 s through the text, 3.6 s building the nodes."""


class ParserDialect(DuckDB):
    """DuckDB's grammar, reading the backtick identifiers the parser's renderer writes."""

    class Tokenizer(DuckDB.Tokenizer):
        IDENTIFIERS = ['"', "`"]


def walk(node: Any) -> Iterator[ast.ASTNode]:
    """Every AST node under `node` (the parser ships no traversal helper)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.ASTNode):
            yield item
            stack.extend(v for k, v in vars(item).items() if k != "parentheses")
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def text_of(statement: ast.ASTNode) -> tuple[str, list[str]]:
    """The statement's text with string constants as tokens, and the constants in order."""
    text, values, _ = _text_and_lists(statement, long_lists=False)
    return text, values


def _text_and_lists(statement: ast.ASTNode, long_lists: bool = True
                    ) -> tuple[str, list[str], dict[str, list[ast.ASTNode]]]:
    """`text_of`, and the long literal lists (`LIST_MIN_ITEMS`+) left out of the text: each
    is rendered as a one-item list of a token (the map's key), built by `to_tree`."""
    lists = [node for node in walk(statement) if _is_literal_list(node)] if long_lists else []
    items = {id(node): node.items for node in lists}
    for node in lists:
        node.items = [ast.Constant("")]
    placeholders = {id(node.items[0]): items[id(node)] for node in lists}
    try:
        swapped: list[tuple[ast.Constant, str]] = []
        operations: list[ast.ASTNode] = []  # UNION ...: their parts' own LIMITs (union_parts)
        for node in walk(statement):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                swapped.append((node, node.value))
            elif isinstance(node, SET_OPERATIONS):
                operations.append(node)
        try:
            for i, (node, _) in enumerate(swapped):
                node.value = _TOKEN.format(i)
            with enclosed_parts(operations):
                text = statement.to_string()
        finally:
            for node, value in swapped:
                node.value = value
    finally:
        for node in lists:
            node.items = items[id(node)]
    by_token = {_TOKEN.format(i): placeholders[id(node)] for i, (node, _) in enumerate(swapped)
                if id(node) in placeholders}
    return text, [value for _, value in swapped], by_token


_seen: set[str] = set()
CACHED_TEXT_MAX = 64 * 1024


def _tree(text: str) -> exp.Expression:
    """A tree the caller may change. A text seen once is parsed fresh (no copy to pay); a
    text seen again (the same query shape with other string values) comes from the cache
    as a copy, which is cheaper than parsing. A long text (over `CACHED_TEXT_MAX`) is
    never kept: the tree of a 30k-column SELECT (229 KB, 60k tokens) takes 30 MB, and the
    cache holds 512 trees."""
    if len(text) > CACHED_TEXT_MAX:
        return _parse.__wrapped__(text)
    if text in _seen:
        return _parse(text).copy()
    if len(_seen) > 4096:
        _seen.clear()
    _seen.add(text)
    return _parse.__wrapped__(text)


@lru_cache(maxsize=512)
def _parse(text: str) -> exp.Expression:
    try:
        return sqlglot.parse_one(text, read=ParserDialect)
    except sqlglot.errors.ParseError as exc:
        where = ""
        if exc.errors:
            first = exc.errors[0]
            where = f" ({first.get('description')} at column {first.get('col')})"
        raise SqlError(f"Cannot run this statement on tables: {text}{where}") from exc


def to_tree(statement: ast.ASTNode, long_lists: bool = True) -> exp.Expression:
    """A fresh (mutable) sqlglot tree of `statement` with its literal values in place
    (`long_lists`: build long literal lists directly, see `LIST_MIN_ITEMS`)."""
    text, values, lists = _text_and_lists(statement, long_lists)
    tree = _tree(text)
    # a long list's place is found while every string is still a token (so unique) and
    # filled after the tokens are swapped back (so no value of the list is taken for one)
    places: list[tuple[exp.Expression, list[ast.ASTNode]]] = []
    for literal in tree.find_all(exp.Literal) if lists else ():
        items = lists.pop(literal.this, None) if literal.is_string else None
        if items is not None:
            places.append((literal.parent, items))
    if lists or any(not isinstance(parent, (exp.In, exp.Tuple)) or len(parent.expressions) != 1
                    for parent, _ in places):
        return to_tree(statement, long_lists=False)  # sqlglot read `(token)` otherwise
    if values:  # literals, and strings sqlglot parsed further (a JSON path after ->>, a
        # date part it reads as a unit and upper-cases: date_trunc('month', d), date_diff)
        by_token = {_TOKEN.format(i): value for i, value in enumerate(values)}
        _json_paths(tree, by_token)
        for node in tree.walk():
            for key, arg in node.args.items():
                if isinstance(arg, str) and arg.lower() in by_token:
                    node.set(key, by_token[arg.lower()])
    for parent, items in places:
        parent.set("expressions", [_literal(item) for item in items])
    return tree


def _json_paths(tree: exp.Expression, by_token: dict[str, Any]) -> None:
    """A JSON path given as a string (json_extract(j, '$.a.b'), j ->> '$.a'): sqlglot read the
    placeholder standing for it as one key, so the path went to DuckDB as the key '$.a.b'
    (`j -> '$."$.a.b"'`) and answered NULL without a word. A path starting with '$' is read as
    the path it is, one starting with '/' (a JSON pointer) is given as written; any other
    string stays one key, as DuckDB reads it."""
    for path in list(tree.find_all(exp.JSONPath)):
        keys = path.expressions
        if len(keys) != 2 or not isinstance(keys[0], exp.JSONPathRoot) or \
                not isinstance(keys[1], exp.JSONPathKey) or not isinstance(keys[1].this, str):
            continue
        value = by_token.get(keys[1].this.lower())
        if isinstance(value, str) and value.startswith("$"):
            path.replace(_DUCKDB.to_json_path(exp.Literal.string(value)))
        elif isinstance(value, str) and value.startswith("/"):
            path.replace(exp.Literal.string(value))


_DUCKDB = DuckDB()


def _is_literal_list(node: ast.ASTNode) -> bool:
    return isinstance(node, ast.Tuple) and len(node.items) >= LIST_MIN_ITEMS and \
        all(_plain(item) for item in node.items)


def _plain(item: Any) -> bool:
    if type(item) is ast.NullConstant:
        return True
    return type(item) is ast.Constant and type(item.value) in (int, float, str, bool) and \
        (type(item.value) is not str or item.with_quotes)


def _literal(item: ast.ASTNode) -> exp.Expression:
    """The node sqlglot builds when it reads the parser's rendering of `item`."""
    if type(item) is ast.NullConstant:
        return exp.Null()
    value = item.value  # type: ignore[attr-defined]
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    text = str(value)
    if text.startswith("-"):
        return exp.Neg(this=exp.Literal.number(text[1:]))
    return exp.Literal.number(text)


def conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    """The AND-ed terms of a condition (itself when it is no AND; none for None). sqlglot's
    `flatten` alone would take a comparison's own operands for terms."""
    if condition is None:
        return []
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def to_duckdb(tree: exp.Expression) -> str:
    return tree.sql(dialect="duckdb", identify=True)
