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
error here before). The rewrite runs on the parser's tree before rendering, where LENGTH is
still told apart from CHAR_LENGTH, and is idempotent (a kept statement may be seen twice).
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser import ast

_PARTS = {"dayofyear": "doy", "dayofmonth": "day", "day": "day"}


def adapt_mysql_functions(statement: ast.ASTNode) -> None:
    """Rewrite, in place, every call under `statement` that MySQL answers differently."""
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
        part = ast.Function("date_part", args=[ast.Constant("dow"), _as_date(args[0])])
        return ast.BinaryOperation("+", args=[part, ast.Constant(1)], alias=node.alias, parentheses=True)
    elif name in _PARTS and len(args) == 1:
        node.op, node.args = "date_part", [ast.Constant(_PARTS[name]), _as_date(args[0])]
    elif name == "dayname" and len(args) == 1:
        node.args = [_as_date(args[0])]
    return node


def _as_date(arg: ast.ASTNode) -> ast.ASTNode:
    if isinstance(arg, ast.TypeCast) and str(arg.type_name).lower() == "date":
        return arg
    return ast.TypeCast("date", arg)
