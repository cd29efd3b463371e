"""`POST /api/sql/query/utils/parametrize_constants`: a statement's constants as named parameters.

MindsDB's GUI sends a statement here and gets it back with every constant replaced by a
`:name` parameter, the values listed, and the tables it reads per database (MindsDB's
`api/http/namespaces/sql.py`, `ParametrizeConstants`; its `test_queries.py::
test_parameter_extract` pins the answer). A parameter is named after what the constant
stands for: its target's alias (`1 AS year`), the column it is compared with
(`price = 11`), the column it sets (`SET price = 10`, `INSERT ... (price) VALUES (10)`),
or the alias of the expression around it; else `param`. A name used again gets a number
(`price2`). The statement is rendered back by the reference parser (its own text, as
MindsDB's answer is). Nothing is run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from mindsdb_sql_parser import ast, parse_sql

_SKIPPED = frozenset({"alias", "parentheses"})


class _Namer:
    """Replaces constants with parameters, in order, numbering repeated names."""

    def __init__(self) -> None:
        self.parameters: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.databases: defaultdict[str, set[str]] = defaultdict(set)

    def parameter(self, name: str, value: Any) -> ast.Parameter:
        seen = self.counts.get(name, 1)
        self.counts[name] = seen + 1
        if seen > 1:
            name = f"{name}{seen}"
        self.parameters.append({"name": name, "value": value, "type": type(value).__name__})
        return ast.Parameter(name)

    def walk(self, node: Any, stack: list[Any], default: str, *, table: bool = False,
             target: bool = False) -> Any:
        """`node` with its constants replaced (the replacement, when `node` is one)."""
        if isinstance(node, list):
            return [self.walk(item, stack, default, table=table, target=target) for item in node]
        if not isinstance(node, ast.ASTNode):
            return node
        if table and isinstance(node, ast.Identifier) and len(node.parts) > 1:
            self.databases[node.parts[0]].add(".".join(node.parts[1:]))
        if isinstance(node, ast.Constant):
            if target and node.alias is not None:
                return self.parameter(node.alias.parts[-1], node.value)
            return self.parameter(_name_from(stack) or default, node.value)
        inner = [node, *stack]
        for key, value in list(vars(node).items()):
            if key in _SKIPPED:
                continue
            is_table = key in ("from_table", "table", "left", "right") and \
                isinstance(node, (ast.Select, ast.Join, ast.Insert, ast.Update, ast.Delete))
            is_target = key == "targets" and isinstance(node, ast.Select)
            setattr(node, key, self.walk(value, inner, default, table=is_table, target=is_target))
        return node


def _name_from(stack: list[Any]) -> str | None:
    """The name of a constant from the nodes around it (nearest first): a comparison's
    column, or an enclosing expression's alias."""
    for item in stack:
        if isinstance(item, (ast.BinaryOperation, ast.BetweenOperation)) and \
                str(item.op).lower() not in ("and", "or"):
            for arg in item.args:
                if isinstance(arg, ast.Identifier):
                    return str(arg.parts[-1])
        if getattr(item, "alias", None) is not None:
            return str(item.alias.parts[-1])
    return None


def parametrize_constants(sql: str) -> dict[str, Any]:
    """MindsDB's answer: `query` (the statement with `:name` parameters), `parameters`
    (name, value, type of each) and `databases` (database -> tables it names)."""
    statement = parse_sql(sql)
    namer = _Namer()
    if isinstance(statement, ast.Update):
        for column, value in dict(statement.update_columns).items():
            statement.update_columns[column] = namer.parameter(column, value.value) \
                if isinstance(value, ast.Constant) else namer.walk(value, [], column)
    elif isinstance(statement, ast.Insert) and statement.values:
        statement.values = [[_insert_value(namer, statement, i, value) for i, value in enumerate(row)]
                            for row in statement.values]
    namer.walk(statement, [], "param")
    return {"query": str(statement), "parameters": namer.parameters,
            "databases": {k: sorted(v) for k, v in namer.databases.items()}}


def _insert_value(namer: _Namer, statement: ast.Insert, i: int, value: Any) -> Any:
    """An INSERT value: a constant is named after its column (else the table)."""
    if not isinstance(value, ast.Constant):
        return value
    columns = statement.columns or []
    name = columns[i].name if i < len(columns) else statement.table.parts[-1]
    return namer.parameter(str(name), value.value)
