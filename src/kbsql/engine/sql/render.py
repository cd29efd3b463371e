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

from kbsql.interface.errors import SqlError

_TOKEN = "__kbsql_literal_{}__"


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
    swapped: list[tuple[ast.Constant, str]] = []
    for node in walk(statement):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            swapped.append((node, node.value))
    try:
        for i, (node, _) in enumerate(swapped):
            node.value = _TOKEN.format(i)
        text = statement.to_string()
    finally:
        for node, value in swapped:
            node.value = value
    return text, [value for _, value in swapped]


_seen: set[str] = set()


def _tree(text: str) -> exp.Expression:
    """A tree the caller may change. A text seen once is parsed fresh (no copy to pay); a
    text seen again (the same query shape with other string values) comes from the cache
    as a copy, which is cheaper than parsing."""
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


def to_tree(statement: ast.ASTNode) -> exp.Expression:
    """A fresh (mutable) sqlglot tree of `statement` with its literal values in place."""
    text, values = text_of(statement)
    tree = _tree(text)
    if values:  # literals, and strings sqlglot parsed further (a JSON path after ->>)
        by_token = {_TOKEN.format(i): value for i, value in enumerate(values)}
        for node in tree.walk():
            for key, arg in node.args.items():
                if isinstance(arg, str) and arg in by_token:
                    node.set(key, by_token[arg])
    return tree


def to_duckdb(tree: exp.Expression) -> str:
    return tree.sql(dialect="duckdb", identify=True)
