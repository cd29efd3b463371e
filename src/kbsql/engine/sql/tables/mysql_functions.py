"""MySQL functions whose name DuckDB also has, with another answer, read as MySQL's (and
MindsDB's executor, mysql_to_duckdb_functions.py) read them.

Why: a statement here runs on DuckDB, and these calls run there without an error while
answering something else than in MindsDB, a silent wrong result:
- `LENGTH(s)` counts bytes in MySQL ('海豚': 6), characters in DuckDB (2): `strlen(s)`
  (CHAR_LENGTH keeps counting characters);
- `CHAR(77, 78, 79)` is 'MNO' in MySQL; DuckDB's CHR takes one code and the rendering kept
  only the first ('M'): `concat(chr(77), chr(78), chr(79))`;
- `DAYOFWEEK(d)` is 1 (Sunday) .. 7 in MySQL, 0 .. 6 in DuckDB: `date_part('dow', d) + 1`.
DAYOFWEEK, DAYOFYEAR, DAYOFMONTH, DAY and DAYNAME read their argument as a date, as MindsDB
casts it (a text column holding '2009-10-30 22:23:11' is a date there, a DuckDB binder
error here before).

MySQL functions DuckDB lacks or reads otherwise (a DuckDB error before, in several lines)
are written with DuckDB's: FORMAT(x, d), REGEXP_SUBSTR, SUBSTRING_INDEX, CURDATE, CURTIME,
TIMESTAMPDIFF (whole units, as MySQL counts them), EXTRACT from text (and YEAR_MONTH,
DAY_MINUTE), GET_FORMAT, DATE_FORMAT (its specifiers as strftime's), FROM_UNIXTIME (UTC),
FROM_DAYS, DATEDIFF, ADDDATE / DATE_ADD / DATE_SUB of an interval, ADDTIME of a constant
'D HH:MM:SS' and CONVERT_TZ (dates_mysql.py).

MySQL's `GROUP BY ... WITH ROLLUP` is DuckDB's `GROUP BY ROLLUP (...)` (`_rollup`).

The rewrite runs on the parser's tree before rendering, where LENGTH is still told apart
from CHAR_LENGTH, and is idempotent (a kept statement may be seen twice).
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast

from kbsql.engine.sql.refusals import unsupported
from kbsql.engine.sql.tables.dates_mysql import DATE_FUNCTIONS, as_date

_PARTS = {"dayofyear": "doy", "dayofmonth": "day", "day": "day"}
_NAMES = {"length", "char", "dayofweek", "dayname", "format", "regexp_substr", "substring_index", "sha2",
          "unhex", *_PARTS, *DATE_FUNCTIONS}
"""The calls `_adapted` rewrites: a statement holding none (nor a GROUP BY) is left at once."""


def adapt_mysql_functions(statement: ast.ASTNode) -> None:
    """Rewrite, in place, every call under `statement` that MySQL answers differently; an
    unaliased column keeps the name the user wrote (`length(x)`, not `strlen(x)`)."""
    if not _needs_rewrite(statement):  # most statements: one walk that stops at the first hit
        return
    targets = getattr(statement, "targets", None) or []
    written = [t.to_string() for t in targets]
    _rewrite_calls(statement)
    for select in (n for n in _nodes(statement) if isinstance(n, ast.Select) and n.group_by):
        _rollup(select)
    for target, text in zip(targets, written, strict=True):
        if getattr(target, "alias", None) is None and not isinstance(target, (ast.Identifier, ast.Star)) \
                and target.to_string() != text:
            target.alias = ast.Identifier(parts=[text])


def _needs_rewrite(statement: ast.ASTNode) -> bool:
    """Whether `statement` holds a call `_adapted` rewrites or a GROUP BY ... WITH ROLLUP.
    Measured on a knowledge-base search typed in SQL (17 nodes; load 5.4 on 2 shared cores):
    adapt_mysql_functions 17.6 us with this check, 86 us when every statement was walked,
    rewritten and its columns named again; the search itself takes ~2 ms."""
    stack: list[Any] = [statement]
    while stack:
        node = stack.pop()
        if type(node) is ast.Function and isinstance(node.op, str) and node.op.lower() in _NAMES:
            return True
        if type(node) is ast.Select and node.group_by and getattr(node.group_by[-1], "with_rollup", False):
            return True
        for value in node.__dict__.values():
            if isinstance(value, ast.ASTNode):
                stack.append(value)
            elif type(value) is list:
                stack.extend(v for v in value if isinstance(v, ast.ASTNode))
    return False


def _rollup(select: ast.Select) -> None:
    """MySQL's `GROUP BY a, b WITH ROLLUP` (the parser marks its last item) as DuckDB's
    `GROUP BY ROLLUP (a, b)`: DuckDB's parser refused the MySQL form (MindsDB's
    test_query_df_with_rollup)."""
    last = select.group_by[-1]
    if getattr(last, "with_rollup", False):
        last.with_rollup = False
        select.group_by = [ast.Function("rollup", args=list(select.group_by))]


def _nodes(statement: ast.ASTNode) -> list[ast.ASTNode]:
    found, stack = [], [statement]
    while stack:
        node = stack.pop()
        found.append(node)
        for value in vars(node).values():
            items = value if isinstance(value, list) else [value]
            stack.extend(v for v in items if isinstance(v, ast.ASTNode))
    return found


def _rewrite_calls(statement: ast.ASTNode) -> None:
    stack: list[Any] = [statement]
    while stack:
        node = stack.pop()
        for key, value in vars(node).items():
            if isinstance(value, ast.ASTNode):
                new = _adapted(value)
                if new is not value:
                    setattr(node, key, new)
                stack.append(new)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.ASTNode):
                        value[i] = _adapted(item)
                        stack.append(value[i])


def _adapted(node: ast.ASTNode) -> ast.ASTNode:
    if not isinstance(node, ast.Function) or not isinstance(node.op, str):
        return node
    name, args = node.op.lower(), node.args or []
    if name == "length" and len(args) == 1:
        node.op = "strlen"
    elif name == "char" and args:
        node.op, node.args = "concat", [ast.Function("chr", args=[a]) for a in args]
    elif name == "dayofweek" and len(args) == 1:
        part = ast.Function("date_part", args=[ast.Constant("dow"), as_date(args[0])])
        return ast.BinaryOperation("+", args=[part, ast.Constant(1)], alias=node.alias, parentheses=True)
    elif name in _PARTS and len(args) == 1:
        node.op, node.args = "date_part", [ast.Constant(_PARTS[name]), as_date(args[0])]
    elif name == "dayname" and len(args) == 1:
        node.args = [as_date(args[0])]
    elif name == "format" and len(args) in (2, 3) and _is_int(args[1]):
        return _format(node, args)
    elif name == "regexp_substr" and 2 <= len(args) <= 4:
        return _regexp_substr(node, args)
    elif name == "substring_index" and len(args) == 3 and _is_int(args[2]):
        count = int(args[2].value)
        parts = ast.Function("string_split", args=args[:2])
        span = [ast.Constant(1), ast.Constant(count)] if count >= 0 else \
            [ast.Constant(count), ast.Constant(-1)]
        node.op, node.args = "array_to_string", [ast.Function("list_slice", args=[parts, *span]), args[1]]
    elif name == "sha2" and len(args) == 2:
        return _sha2(node, args)
    elif name == "unhex" and len(args) == 1:
        return _unhex(node, args[0])
    elif name in DATE_FUNCTIONS:
        adapted = DATE_FUNCTIONS[name](node, [_adapted(a) for a in args])
        if adapted is not node and adapted is not None:
            adapted.alias = node.alias
            return adapted
    return node


def _format(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode:
    """MySQL's FORMAT(x, d): x rounded half away from zero to d places, with thousands commas.
    DuckDB's format('{:,.2f}', x) alone rounds half to even (FORMAT(2.5, 0) answered '2',
    MySQL '3'), and a number written as text was DuckDB's format string ('12332.5' answered
    as is, MySQL '12,333'), both without a word. A locale (third argument) is refused, as
    MindsDB's executor refuses it; text that is not a number keeps DuckDB's FORMAT('{}', ...)."""
    value = args[0]
    if _is_text(value):
        try:
            float(str(value.value))
        except ValueError:
            return node  # DuckDB's own format(pattern, ...)
        value = ast.TypeCast("double", value)
    if len(args) == 3:
        raise unsupported("FORMAT with a locale (FORMAT(x, d) writes commas and a point)")
    places = max(int(args[1].value), 0)  # MySQL reads a negative count as 0
    rounded = ast.Function("round", args=[value, ast.Constant(places)])
    return ast.Function("format", args=[ast.Constant(f"{{:,.{places}f}}"), rounded], alias=node.alias)


def _regexp_substr(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode:
    """MySQL's REGEXP_SUBSTR(s, pattern[, pos[, occurrence]]): the occurrence-th match in s
    from character pos, NULL when there is none. DuckDB's regexp_extract answers '' for no
    match (a silent '' where MySQL answers NULL: `REGEXP_SUBSTR(...) IS NULL` was false) and
    has no pos or occurrence (a DuckDB catalog error before): the matches' list is read at
    the occurrence, out of range NULL."""
    text = args[0]
    if len(args) >= 3 and not _is_int(args[2], 1):
        text = ast.Function("substr", args=[args[0], args[2]])
    matches = ast.Function("regexp_extract_all", args=[text, args[1]])
    occurrence = args[3] if len(args) == 4 else ast.Constant(1)
    return ast.Function("list_extract", args=[matches, occurrence], alias=node.alias)


def _unhex(node: ast.Function, text: ast.ASTNode) -> ast.ASTNode:
    """MySQL's UNHEX answers NULL for text that is not hex digits ('GG'); DuckDB's unhex
    stopped the statement ("Invalid input for hex digit: G")."""
    digits = ast.Function("regexp_full_match",
                          args=[ast.TypeCast("varchar", text), ast.Constant("[0-9A-Fa-f]*")])
    return ast.Case(rules=[[digits, ast.Function("unhex", args=[text])]], default=ast.NullConstant(),
                    alias=node.alias)


def _sha2(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode:
    """MySQL's SHA2(s, 256) (or 0) is DuckDB's sha256(s); another length MySQL knows (224, 384,
    512) is refused, as MindsDB's executor refuses it: sqlglot rendered every SHA2 as sha256,
    so SHA2('abc', 224) answered the SHA-256 digest without a word (DuckDB has no other SHA-2).
    A length MySQL does not know answers NULL, as MySQL."""
    bits = args[1]
    if not _is_int(bits):
        raise unsupported("SHA2 with a length that is not a number written in the statement "
                          "(SHA2(s, 256) is computed here)")
    if int(bits.value) in (0, 256):
        return ast.Function("sha256", args=[args[0]], alias=node.alias)
    if int(bits.value) in (224, 384, 512):
        raise unsupported(f"SHA2 of {bits.value} bits (SHA-256 only: SHA2(s, 256))")
    return ast.TypeCast("varchar", ast.NullConstant(), alias=node.alias)


def _is_int(node: ast.ASTNode, value: int | None = None) -> bool:
    if not isinstance(node, ast.Constant) or not isinstance(node.value, int) or isinstance(node.value, bool):
        return False
    return value is None or node.value == value


def _is_text(node: ast.ASTNode) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
