"""Knowledge bases and tables together: fill a KB from a table, join a search with tables."""

from __future__ import annotations

import pandas as pd
import pytest

from kbsql.engine import Engine
from tests.datasources.makers import ok, rows


@pytest.fixture
def filled(connected: Engine) -> Engine:
    ok(connected, "CREATE KNOWLEDGE_BASE products_kb USING content_columns = ['description'], "
                  "metadata_columns = ['category'], id_column = 'id'")
    inserted = ok(connected, "INSERT INTO products_kb SELECT id, description, category FROM crm.products")
    assert inserted.affected_rows == 4
    connected.register_dataframe("stock", pd.DataFrame({"product_id": [1, 2, 3, 4],
                                                        "units": [5, 0, 12, 3]}))
    return connected


def test_fill_from_a_table_and_search(filled: Engine) -> None:
    got = rows(filled, "SELECT id, metadata FROM products_kb WHERE content = 'camping in the rain' "
                       "LIMIT 2")
    assert {r[0] for r in got} == {"1", "3"}  # the two outdoor products
    assert all(r[1]["category"] == "outdoor" for r in got)


def test_search_joined_with_a_table(filled: Engine) -> None:
    got = rows(filled, """
        SELECT k.id, s.units, k.relevance
        FROM products_kb AS k JOIN df.stock AS s ON s.product_id = CAST(k.id AS INT)
        WHERE k.content = 'coffee maker' AND s.units >= 0
        ORDER BY k.relevance DESC LIMIT 1""")
    assert got[0][:2] == ["2", 0] and 0 < got[0][2] <= 1
    # metadata filters of the knowledge base go to its search; JSON metadata is queryable
    got = rows(filled, """
        SELECT k.id, k.metadata->>'category' AS category, s.units
        FROM df.stock s JOIN products_kb k ON s.product_id = CAST(k.id AS INT)
        WHERE k.content = 'cooking' AND k.category = 'kitchen' ORDER BY k.id""")
    assert got == [["2", "kitchen", 0], ["4", "kitchen", 3]]


def test_search_in_a_subquery(filled: Engine) -> None:
    got = rows(filled, """
        SELECT name FROM crm.customers
        WHERE id / 10 IN (SELECT CAST(id AS INT) FROM products_kb WHERE content = 'tent' LIMIT 1)""")
    assert got == [["Chen"]]  # product 3 -> customer 30


def test_kb_stays_intact_after_a_failed_join(filled: Engine) -> None:
    bad = filled.query("SELECT k.id FROM products_kb k JOIN df.stock s ON s.nope = k.id "
                       "WHERE k.content = 'tent'", {})
    assert bad.type == "error" and "nope" in bad.error_message
    assert len(rows(filled, "SELECT id FROM products_kb")) == 4
