"""LIKE with an escape character, in time that grows with the text, not exponentially.

DuckDB matches `like_escape(x, pattern, escape)` (and `not_like_escape`, `ilike_escape`,
`not_ilike_escape`) by backtracking: `like_escape(repeat('a', 80), repeat('%a', 6) || '%b',
'!')` took 15 s, one more `a` per few hundred ms, and nothing interrupts it (a served
statement ran on past its 3 s timeout: redteam2). Plain LIKE has no such cost. So a call
whose pattern and escape are constants is rewritten to what means the same: plain LIKE when
the pattern uses no escape, else an RE2 full match (`%` -> `.*`, `_` -> `.`, escaped and other
characters literal), linear in the text. A pattern or escape that is not a constant is
refused in one line: its cost cannot be known before it runs.
"""

from __future__ import annotations

import re

from sqlglot import exp

from kbsql.engine.sql.refusals import unsupported

_CALLS = {"like_escape": (False, False), "not_like_escape": (True, False),
          "ilike_escape": (False, True), "not_ilike_escape": (True, True)}


def bound_like_escapes(tree: exp.Expression) -> None:
    """Rewrite every escape-LIKE call of the tree in place (see the module's docstring)."""
    for call in list(tree.find_all(exp.Anonymous)):
        kind = _CALLS.get(str(call.this).lower())
        if kind is None:
            continue
        if len(call.expressions) != 3:
            continue  # DuckDB's own arity error says it
        text, pattern, escape = call.expressions
        if not (_is_string(pattern) and _is_string(escape)):
            raise unsupported(f"{str(call.this).lower()} with a pattern or escape that is not a constant "
                              "string (its matching time can grow exponentially with the text); write "
                              "the pattern as a literal")
        negated, folded = kind
        call.replace(_match(text.copy(), pattern.name, escape.name, negated, folded))


def _is_string(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _match(text: exp.Expression, pattern: str, escape: str, negated: bool, folded: bool) -> exp.Expression:
    if len(escape) > 1:
        raise unsupported(f"an escape of {len(escape)} characters in LIKE (one character, or none)")
    if not escape or escape not in pattern:
        kind = exp.ILike if folded else exp.Like
        like: exp.Expression = kind(this=text, expression=exp.Literal.string(pattern))
    else:
        like = exp.Anonymous(this="regexp_full_match", expressions=[
            text, exp.Literal.string(_regex(pattern, escape, folded))])
    return exp.Not(this=exp.Paren(this=like)) if negated else like


def _regex(pattern: str, escape: str, folded: bool) -> str:
    out = ["(?s" + ("i)" if folded else ")")]
    chars = iter(pattern)
    for char in chars:
        if char == escape:
            following = next(chars, None)
            if following is None:
                raise unsupported("a LIKE pattern ending in its escape character")
            out.append(re.escape(following))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return "".join(out)
