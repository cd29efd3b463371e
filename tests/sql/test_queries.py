"""SELECT over data-source tables: joins across sources, aggregates, subqueries, CTEs."""

from __future__ import annotations

import pandas as pd

from kbsql.engine import Engine
from tests.datasources.makers import ok, rows


def test_join_across_three_sources_with_aggregate(connected: Engine) -> None:
    got = rows(connected, """
        SELECT c.name, r.region, count(*) AS n, sum(o.amount) AS spent
        FROM shop.orders AS o
        JOIN crm.customers AS c ON c.id = o.customer_id
        LEFT JOIN fs.regions AS r ON r.country = c.country
        GROUP BY c.name, r.region
        ORDER BY spent DESC
        LIMIT 2""")
    assert got == [["Bob's shop", "EU", 1, 100.0], ["Ann", "EU", 2, 25.0]]


def test_unaliased_tables_keep_their_names(connected: Engine) -> None:
    got = rows(connected, "SELECT customers.name FROM crm.customers JOIN shop.orders "
                          "ON orders.customer_id = customers.id WHERE orders.id = 3")
    assert got == [["Bob's shop"]]
    # fully qualified column names work too
    assert rows(connected, "SELECT shop.orders.id FROM shop.orders WHERE shop.orders.status = 'new'") \
        == [[1]]


def test_subqueries_ctes_and_unions(connected: Engine) -> None:
    assert rows(connected, """
        WITH per_customer AS (
            SELECT customer_id, sum(amount) AS total FROM shop.orders GROUP BY customer_id)
        SELECT name FROM crm.customers
        WHERE id IN (SELECT customer_id FROM per_customer WHERE total > 20)
        ORDER BY name""") == [["Ann"], ["Bob's shop"]]
    assert rows(connected, "SELECT count(*) FROM (SELECT DISTINCT order_date FROM shop.orders) AS d") \
        == [[3]]
    assert rows(connected, "SELECT country FROM crm.customers WHERE country IS NOT NULL "
                           "UNION SELECT country FROM fs.regions ORDER BY 1") == [["DE"], ["FR"], ["US"]]


def test_strings_with_quotes_and_backslashes_are_values(connected: Engine) -> None:
    assert rows(connected, "SELECT id FROM crm.customers WHERE name = 'Bob\\'s shop'") == [[20]]
    assert rows(connected, "SELECT 'C:\\path', 'it\\'s', 'a\"b' ") == [["C:\\path", "it's", 'a"b']]


def test_current_project_and_plain_select(engine: Engine) -> None:
    result = ok(engine, "SELECT 1 AS one, 'x' AS two, NULL AS three")
    assert result.column_names == ["one", "two", "three"]
    assert result.data == [[1, "x", None]]
    assert result.context == {"show_secrets": False, "db": "mindsdb"}


def test_repeated_query_sees_changes(engine: Engine) -> None:
    """The compiled-query cache never serves a dropped or replaced table."""
    query = "SELECT count(*) FROM df.t"
    engine.register_dataframe("t", pd.DataFrame({"a": [1, 2]}))
    assert rows(engine, query) == [[2]]
    assert rows(engine, query) == [[2]]
    engine.register_dataframe("t", pd.DataFrame({"a": [1, 2, 3]}))
    assert rows(engine, query) == [[3]]
    engine.unregister_dataframe("t")
    assert engine.query(query).type == "error"


def test_select_frame_for_insert_select(connected: Engine) -> None:
    from mindsdb_sql_parser import parse_sql

    frame = connected.sql.select_frame(
        parse_sql("SELECT id, description FROM crm.products WHERE category = 'outdoor' ORDER BY id"),
        {"db": "mindsdb"})
    assert isinstance(frame, pd.DataFrame)
    assert frame["id"].tolist() == [1, 3]


def test_json_faithful_types_embedded_and_http(client) -> None:
    """Dates and timestamps as ISO strings, decimals as numbers, NaN and NULL as null,
    the same through the engine and over the wire; columns named as written."""
    client.register("typed", pd.DataFrame({"f": [1.5, float("nan")]}))
    result = client.sql("SELECT CAST('2024-02-29' AS DATE) AS d, "
                        "CAST('2024-02-29 13:14:15.5' AS TIMESTAMP) AS ts, "
                        "CAST(12.34 AS DECIMAL(10, 2)) AS dec, max(f) AS fmax, min(f) AS fmin, "
                        "NULL AS nothing, count(*) FROM df.typed WHERE f IS NULL OR f > 0")
    assert result.column_names == ["d", "ts", "dec", "fmax", "fmin", "nothing", "count(*)"]
    assert result.data == [["2024-02-29", "2024-02-29 13:14:15.500000", 12.34, 1.5, 1.5, None, 2]]
    nan_row = client.sql("SELECT f FROM df.typed ORDER BY f NULLS FIRST LIMIT 1")
    assert nan_row.data == [[None]]


def test_json_paths_given_as_strings_are_read_as_paths(engine: Engine) -> None:
    """functions/standard-functions.mdx: every DuckDB function is supported, its JSON ones
    too. A path given as a string (json_extract(j, '$.a.b'), j ->> '$.a') went to DuckDB as
    one key named '$.a.b' (`j -> '$."$.a.b"'`: sqlglot read the literal's placeholder as a
    key) and answered NULL, silently. Each answers as DuckDB does; a string that is not a
    path ('a.b') stays one key, a JSON pointer ('/a/b') is given as written."""
    document = '{"a": {"b": 2}, "a.b": 3, "l": [5, 6], "x y": 9}'
    engine.register_dataframe("docs", pd.DataFrame({"j": [document]}))
    got = rows(engine, "SELECT json_extract(j, '$.a.b') AS a, json_extract_string(j, '$.a.b') AS b, "
                       "json_extract(j, 'a.b') AS c, json_extract(j, '$.l[1]') AS d, "
                       "json_extract(j, '/a/b') AS e, j ->> '$.a.b' AS f, "
                       "json_extract_string(j, '$.\"x y\"') AS g FROM df.docs")
    assert got == [["2", "2", "3", "6", "2", "2", "9"]]
