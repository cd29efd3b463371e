"""Two write statements MindsDB documents that its own parser cannot read.

mindsdb_sql_parser reads `CREATE TABLE ds.t (SELECT ...)` only when the parenthesised query
is one plain SELECT, and `UPDATE ds.t ON k FROM (SELECT ...)` only when the subquery has no
alias. MindsDB's documentation writes both more freely (docs/mindsdb_sql/sql/create/table.mdx:
"CREATE TABLE integration_name.table_name (SELECT ...)", any query; sql/api/update.mdx: the
FROM subquery "aliased as prediction_data"), and users save a UNION of two searches or
alias the subquery out of habit. Only when the parser has refused a statement, these shapes
are read here from the parser's own pieces (the name through a `SELECT * FROM name`, the
query through `parse_sql`), so a name or value is never re-tokenized by anything but the
parser: `None` means "not one of these", and the parser's own error stands.
"""

from __future__ import annotations

import re

from mindsdb_sql_parser import ast, parse_sql

_NAME = r"(?:`[^`]+`|\"[^\"]+\"|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|\"[^\"]+\"|[\w$]+))*"
_CREATE = re.compile(rf"^\s*create\s+(?P<replace>or\s+replace\s+)?table\s+(?P<exists>if\s+not\s+exists\s+)?"
                     rf"(?P<name>{_NAME})\s*(?P<body>\(.*\))\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_UPDATE_ON = re.compile(rf"^\s*update\s+{_NAME}\s+on\s+.*\bfrom\s*\(", re.IGNORECASE | re.DOTALL)
_ALIAS = re.compile(r"\)\s*(?:as\s+)?(?P<alias>`[^`]+`|[A-Za-z_][\w$]*)\s*;?\s*$", re.IGNORECASE)
QUERIES = (ast.Select, ast.Union, ast.Intersect, ast.Except)


def _identifier(name: str) -> ast.Identifier:
    """`name` (`ds.t`, `` `my ds`.t ``) as the parser reads it in a FROM."""
    return parse_sql(f"SELECT * FROM {name}").from_table


def _create_table(query: str) -> ast.CreateTable | None:
    match = _CREATE.match(query)
    if match is None:
        return None
    inner = match["body"].strip()[1:-1]
    try:
        select = parse_sql(inner)
    except Exception:  # the parser's first error is the one to show
        return None
    if not isinstance(select, QUERIES):
        return None
    return ast.CreateTable(name=_identifier(match["name"]), from_select=select,
                           is_replace=bool(match["replace"]), if_not_exists=bool(match["exists"]))


def _update_on(query: str) -> ast.Update | None:
    alias = _ALIAS.search(query) if _UPDATE_ON.match(query) else None
    if alias is None:
        return None
    try:
        statement = parse_sql(query[:alias.start() + 1])
    except Exception:  # the parser's first error is the one to show
        return None
    if not isinstance(statement, ast.Update) or statement.from_select is None:
        return None
    statement.from_select_alias = ast.Identifier(alias["alias"].strip("`"))
    return statement


def parse_write_shape(query: str) -> ast.ASTNode | None:
    """The statement, when the parser refused one of the two documented shapes above."""
    return _create_table(query) or _update_on(query)
