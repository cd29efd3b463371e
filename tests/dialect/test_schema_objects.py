"""MindsDB's executor test test_schema.py (tests/unit/executor/): what information_schema,
SHOW and DESCRIBE say about a project's objects, embedded and over HTTP."""

from __future__ import annotations

from tests.dialect.conftest import Doc


def test_information_schema_views_lists_the_views(doc: Doc) -> None:
    """test_schema: `select * from information_schema.VIEWS` has a row per view, NAME /
    PROJECT / QUERY as MindsDB's ViewsTable (it answered MySQL's columns and no row)."""
    doc.sql("CREATE VIEW v1 (SELECT * FROM sample_data.orders)")
    rows = doc.rows("SELECT * FROM information_schema.VIEWS")
    mine = [r for r in rows if r["PROJECT"] == doc.project]
    assert mine == [{"NAME": "v1", "PROJECT": doc.project, "QUERY": "SELECT * FROM sample_data.orders"}]
    assert doc.rows(f"SHOW VIEWS FROM {doc.project}") == mine
