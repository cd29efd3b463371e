"""Which clauses of a UNION / INTERSECT / EXCEPT part were written inside its parentheses.

mindsdb_sql_parser drops a part's parentheses: `(SELECT ... LIMIT 5) UNION (SELECT ... LIMIT 5)`
and `SELECT ... LIMIT 5 UNION SELECT ... LIMIT 5` are the same tree, and so is a LIMIT written
after the last part (`... UNION SELECT ... LIMIT 5`), which the parser hangs on that part. Its
rendering, `A LIMIT 5 UNION B LIMIT 5`, is read by DuckDB as one LIMIT of the whole union: the
first query answered 5 rows of its first part where MySQL and MindsDB answer 10 (MindsDB's
flows/test_mysql_api_extended.py::test_union_operator), without a word.

So the parser's rule for a parenthesized SELECT is wrapped, once (`install`), to note on the
SELECT the clauses written inside its parentheses (`MARK`), and `enclosed_parts` sets, for one
rendering, the parentheses the last part's own clauses need (a part before the last keeps its
clauses unparenthesized: DuckDB reads `A LIMIT 1 UNION B` so, and a WITH the parser hangs on
that part must stay outside any parentheses, for the other parts to read its CTEs):
- the last part keeps a LIMIT or OFFSET written inside its parentheses; a LIMIT or ORDER BY
  after its closing parenthesis, or after an unparenthesized last part, is the whole union's,
  as MySQL reads it (MindsDB's planner gives it to the last part alone; `A UNION B ORDER BY 1`
  sorting the whole answer is what a MySQL client expects);
- a last part with a LIMIT inside its parentheses and an OFFSET after them (`(B LIMIT 2)
  OFFSET 3`: the parser puts both on the part) is refused in one line rather than read one
  way silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mindsdb_sql_parser import ast

from kbsql.interface.errors import SqlError

CLAUSES = ("order_by", "limit", "offset")
MARK = "kbsql_enclosed"
"""The attribute naming the clauses a SELECT had when its closing parenthesis was read (a tuple
of names, not nodes: the walkers of the tree must not meet a node twice)."""
_RULE = "select -> LPAREN select RPAREN"
_installed = False
_missing = False  # the parser has no such rule (another version): parts' own clauses refused


def install() -> None:
    """Wrap the parser's `( select )` rule (sly keeps one production list per parser class);
    a parser without that rule parses as before, and `_needing_parentheses` refuses what it
    cannot tell apart.
    Called by `parsing.parse` before each statement, so on the first: importing the parser
    takes ~0.25 s, which a process that never parses SQL (a client) does not pay. Two threads
    meeting here first wrap the rule twice, which marks the same clauses twice: no harm."""
    global _installed, _missing
    if _installed or _missing:
        return
    from mindsdb_sql_parser.parser import MindsDBParser

    for production in MindsDBParser._grammar.Productions:
        if str(production) != _RULE:
            continue
        rule = production.func

        def enclosed(parser: Any, p: Any, rule: Any = rule) -> Any:
            select = rule(parser, p)
            setattr(select, MARK, tuple(c for c in CLAUSES if getattr(select, c, None) is not None))
            return select

        production.func = enclosed
        _installed = True
        return
    # Another parser version: every other statement still parses; a UNION whose parts have
    # their own ORDER BY / LIMIT / OFFSET is refused (never read one way silently).
    _missing = True


def _clauses(part: ast.ASTNode) -> tuple[str, ...]:
    return tuple(c for c in CLAUSES if getattr(part, c, None) is not None)


SET_OPERATIONS = (ast.Union, ast.Intersect, ast.Except)


def _needing_parentheses(operations: list[ast.ASTNode]) -> Iterator[ast.ASTNode]:
    """The last parts of these set operations whose LIMIT or OFFSET is their own."""
    for node in operations:
        right = node.right
        if _missing and isinstance(right, ast.Select) and {"limit", "offset"} & set(_clauses(right)):
            raise SqlError("A UNION whose last part has a LIMIT or OFFSET is not supported with this "
                           "version of mindsdb_sql_parser (whether it is the part's or the whole "
                           "UNION's cannot be told): wrap it in a subquery "
                           "(SELECT * FROM (...) AS u LIMIT ...)")
        if not isinstance(right, ast.Select) or right.parentheses:
            continue
        enclosed = set(getattr(right, MARK, ()))
        if not enclosed & {"limit", "offset"}:
            continue
        if set(_clauses(right)) != enclosed:
            raise SqlError("A UNION's last part has a LIMIT inside its parentheses and an OFFSET "
                           "after them: wrap the UNION in a subquery "
                           "(SELECT * FROM (...) AS u LIMIT ... OFFSET ...)")
        yield right


@contextmanager
def enclosed_parts(operations: list[ast.ASTNode]) -> Iterator[None]:
    """While a statement is rendered: the parts of its set operations (`operations`, the
    `SET_OPERATIONS` nodes the caller's walk of the tree met) that own an ORDER BY, LIMIT or
    OFFSET are written in parentheses (put back after: the tree is the caller's)."""
    parts = list(_needing_parentheses(operations))
    for part in parts:
        part.parentheses = True
    try:
        yield
    finally:
        for part in parts:
            part.parentheses = False
