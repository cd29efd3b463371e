"""MindsDB's native query, `SELECT ... FROM source (its own SQL)` (its executor test
test_executor.py::TestWithNativeQuery), on a DuckDB file source: refused in one line as the
feature it is (a postgres source runs it: tests/datasources/test_postgres_source.py)."""

from __future__ import annotations

from tests.dialect.conftest import Doc


def test_a_native_query_is_refused_as_one(doc: Doc) -> None:
    """It read as a table function ("Table functions are not allowed in queries:
    SAMPLE_DATA(SELECT ...)"); a SELECT or a view over one now names native queries and the
    way to write it here. A function that is no data source keeps the table-function words."""
    for statement in ("SELECT max(order_id) FROM sample_data (SELECT * FROM orders) GROUP BY product",
                      "CREATE VIEW nq (SELECT * FROM sample_data (SELECT * FROM orders))",
                      "CREATE VIEW nq FROM sample_data (SELECT * FROM orders)"):
        error = doc.error(statement)
        assert error.startswith("not supported by the local engine: native queries (sample_data (...)) on a "
                                "duckdb data source (they run on postgres sources)"), error
        assert "sample_data.<table>" in error
    assert doc.error("SELECT * FROM read_csv('/etc/passwd')").startswith("Table functions are not allowed")
    assert [r["n"] for r in doc.rows("SELECT count(*) AS n FROM sample_data.orders")] == [3]
