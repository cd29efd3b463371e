"""One name resolution per table reference: the router resolves a statement's own table once
(`names.target_of`) and hands the result on, to the knowledge-base handlers (with its record)
or to the SELECT compiler (anything else), which does not resolve it again."""

from __future__ import annotations

import pandas as pd
import pytest

from kbsql.engine.sql.tables import names
from kbsql.interface.results import ErrorResult, OkResult, TableResult

HASH = "{'provider': 'kbsql', 'model_name': 'hash-64'}"


@pytest.fixture
def counted(engine, monkeypatch):
    """The engine with a KB `kb` and a frame `df.items`; counts resolutions and KB lookups."""
    assert isinstance(engine.query(f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {HASH}"), OkResult)
    engine.query("INSERT INTO kb (id, content) VALUES ('1', 'the pump moves water'), "
                 "('2', 'a fan moves air')")
    engine.register_dataframe("items", pd.DataFrame({"id": ["1", "2"], "price": [3.5, 7.0]}))
    calls = {"resolve": 0, "find_knowledge_base": 0}
    real_resolve = names.resolve
    real_find = engine.catalog.find_knowledge_base

    def resolve(*args, **kwargs):
        calls["resolve"] += 1
        return real_resolve(*args, **kwargs)

    def find(*args, **kwargs):
        calls["find_knowledge_base"] += 1
        return real_find(*args, **kwargs)

    monkeypatch.setattr(names, "resolve", resolve)
    monkeypatch.setattr(engine.catalog, "find_knowledge_base", find)

    def run(query: str):
        calls.update(resolve=0, find_knowledge_base=0)
        result = engine.query(query)
        assert not isinstance(result, ErrorResult), result.error_message
        return result, dict(calls)

    return run


@pytest.mark.parametrize("query, tables", [
    ("SELECT * FROM kb", 1),
    ("SELECT * FROM mindsdb.kb WHERE content = 'water'", 1),
    ("SELECT count(*) AS n FROM kb", 1),
    ("SELECT * FROM df.items", 1),
    ("SELECT i.price, k.chunk_content FROM df.items i JOIN kb k ON k.id = i.id", 2),
    ("DESCRIBE kb", 1),
    ("DESCRIBE df.items", 1),
    ("DELETE FROM kb WHERE id = '2'", 1),
])
def test_each_table_is_resolved_once(counted, query, tables):
    result, calls = counted(query)
    assert calls["resolve"] == tables, calls
    if not query.startswith("DELETE"):  # (a write reads its record back once it is stored)
        assert calls["find_knowledge_base"] <= tables, calls  # no second lookup of a name
    if isinstance(result, TableResult):
        assert len(result.column_names) > 0


def test_the_resolution_decides_the_route(counted):
    kb, _ = counted("SELECT id FROM kb WHERE content = 'water'")  # routed to the KB search
    assert kb.rows()[0] == ["1"]
    table, _ = counted("SELECT id FROM df.items ORDER BY id")  # routed to DuckDB
    assert table.rows() == [["1"], ["2"]]
    inserted, calls = counted("INSERT INTO kb (id, content) VALUES ('3', 'a valve stops water')")
    assert isinstance(inserted, OkResult) and calls["resolve"] == 1
    both, _ = counted("WITH kb AS (SELECT 'x' AS id) SELECT id FROM kb")  # a CTE, not the KB
    assert both.rows() == [["x"]]
