"""Knowledge-base statements in SQL (placeholder until the knowledge-base data path lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.interface.results import SqlResult

if TYPE_CHECKING:
    from kbsql.engine.engine import Engine


def handle(engine: Engine, statement: ast.ASTNode, ctx: dict[str, Any]) -> SqlResult | None:
    """Execute `statement` if it is about a knowledge base; None when it is not."""
    return None
