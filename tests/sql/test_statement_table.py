"""SQL statements dispatch through one table (`engine/sql/statements.py`): a statement kind
the table lists runs its handler, one it does not is refused in one line, and adding a
statement is one handler plus one entry."""

from __future__ import annotations

import pandas as pd
from mindsdb_sql_parser import ast

from kbsql.engine.sql import statements
from kbsql.engine.sql.kb import kb_rows
from kbsql.interface.results import ErrorResult, OkResult, TableResult


def test_a_new_statement_is_one_entry(engine, monkeypatch) -> None:
    before = engine.query("SHOW PLUGINS")
    assert isinstance(before, ErrorResult)
    assert before.error_message.startswith("not supported by the local engine: Show statements")
    seen = []

    def show_plugins(session, statement, ctx, routed):
        seen.append((statement.category, routed.target))
        return OkResult(7, context=ctx)

    monkeypatch.setitem(statements.HANDLERS, (ast.Show, "PLUGINS", ""), show_plugins)
    answer = engine.query("SHOW PLUGINS")
    assert isinstance(answer, OkResult) and answer.affected_rows == 7
    assert seen == [("PLUGINS", None)]


def test_a_table_select_never_asks_the_knowledge_base_handlers(engine, monkeypatch) -> None:
    """The old second router was asked before every statement; now a table SELECT goes
    straight to the SELECT compiler."""
    def refuse(*args, **kwargs):
        raise AssertionError("a knowledge-base handler was asked")

    monkeypatch.setitem(statements.HANDLERS, (ast.Select, "", "kb"), refuse)
    monkeypatch.setattr(kb_rows, "select", refuse)
    engine.register_dataframe("items", pd.DataFrame({"id": [1, 2], "price": [3.5, 7.0]}))
    answer = engine.query("SELECT sum(price) AS total FROM df.items")
    assert isinstance(answer, TableResult) and answer.data == [[10.5]]


def test_the_own_table_picks_the_entry(engine) -> None:
    """One class, several handlers: a SELECT of a knowledge base searches it, of
    information_schema.knowledge_bases lists them; DESCRIBE of a knowledge base answers its
    row; UPDATE of a knowledge base changes its chunks (MindsDB's update_query), of anything
    else is refused in one line."""
    model = "{'provider': 'kbsql', 'model_name': 'hash-64'}"
    assert isinstance(engine.query(f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {model}"), OkResult)
    engine.query("INSERT INTO kb (id, content) VALUES ('1', 'pumps move water')")
    found = engine.query("SELECT id, chunk_content FROM kb WHERE content = 'water'")
    assert isinstance(found, TableResult) and found.data == [["1", "pumps move water"]]
    described = engine.query("DESCRIBE kb")
    assert isinstance(described, TableResult) and described.column_names[0] == "NAME"
    assert described.data[0][0] == "kb"
    listed = engine.query("SELECT NAME FROM information_schema.knowledge_bases")
    assert isinstance(listed, TableResult) and listed.data == [["kb"]]
    updated = engine.query("UPDATE kb SET content = 'pumps move oil' WHERE id = '1'")
    assert isinstance(updated, OkResult) and updated.affected_rows == 1
    assert engine.query("SELECT chunk_content FROM kb").data == [["pumps move oil"]]
    engine.register_dataframe("items", pd.DataFrame({"id": [1]}))
    refused = engine.query("UPDATE df.items SET id = 2")
    assert isinstance(refused, ErrorResult) and "UPDATE of data-source tables" in refused.error_message
