"""INSERT INTO a data source's table without a column list, as MindsDB's
tests/unit/executor/test_executor.py::TestComplexQueries::test_insert writes it."""

from __future__ import annotations

from kbsql.engine import Engine
from tests.datasources.makers import ok, rows


def test_insert_values_without_columns_fills_every_column(connected: Engine) -> None:
    """`INSERT INTO src.t VALUES (...)` fills the table's columns in order (it was refused
    as needing its column names); a row of another width is one line naming the columns,
    and the source answers after it (the file stays attached read-only, not held)."""
    assert ok(connected, "INSERT INTO crm.customers VALUES (40, 'Dana', 'US'), (41, 'Eve', NULL)"
              ).affected_rows == 2
    assert rows(connected, "SELECT id, name, country FROM crm.customers WHERE id >= 40 ORDER BY id") == \
        [[40, "Dana", "US"], [41, "Eve", None]]
    ok(connected, "INSERT INTO shop.orders VALUES (5, 40, 9.5, '2024-03-06', '2024-03-06 10:00:00', 'new')")
    assert rows(connected, "SELECT id, customer_id, status FROM shop.orders WHERE id = 5") == [[5, 40, "new"]]
    for table in ("crm.customers", "shop.orders"):
        error = connected.query(f"INSERT INTO {table} VALUES (42, 'Fay')").error_message
        assert error.startswith(f"INSERT INTO {table.split('.')[1]} VALUES gives 2 values for ")
        assert "name the columns it fills" in error and "\n" not in error
    error = connected.query("INSERT INTO crm.customers (id, name) VALUES (42, 'Fay', 'x')").error_message
    assert error == "INSERT INTO customers VALUES gives 3 values for 2 columns (id, name)"
    assert rows(connected, "SELECT count(*) FROM crm.customers") == [[5]]
    assert rows(connected, "SELECT count(*) FROM shop.orders") == [[5]]


def test_insert_select_naming_a_column_the_table_lacks_is_one_line(connected: Engine) -> None:
    """sql/api/insert.mdx: "the destination table must exist and contain all the columns where
    the data is to be inserted". A SELECT whose column the table lacks was DuckDB's binder
    message in three lines ('Binder Error: Table "customers" does not have a column with name
    ...'); it is one line naming the column and the table's columns, and nothing is stored."""
    error = connected.query("INSERT INTO crm.customers (SELECT 50 AS id, 'Gil' AS nick)").error_message
    assert error == ("Table 'crm.customers' has no column 'nick' (its columns: id, name, country); the rows "
                     "go in by column name: name the SELECT's columns as the table's (AS ...)")
    error = connected.query("INSERT INTO crm.customers (id, nick) VALUES (50, 'Gil')").error_message
    assert error == "Table 'crm.customers' has no column 'nick' (its columns: id, name, country)"
    assert rows(connected, "SELECT count(*) FROM crm.customers WHERE id = 50") == [[0]]
    assert ok(connected, "INSERT INTO crm.customers (SELECT 50 AS id, 'Gil' AS name)").affected_rows == 1


def test_a_write_waits_for_another_write_to_the_same_source(connected: Engine) -> None:
    """create/jobs.mdx: two jobs writing to one data source run side by side. A write that
    came while another held the source read-write was refused as "INSERT in data source crm
    is not supported: its engine is read here, never written" (it read the source's state,
    read-write then, as its engine's ability); it waits for the other write, then runs."""
    import threading

    answers: list[object] = []
    with connected.sql.duck.writable("crm"):  # another write, holding the source
        writer = threading.Thread(target=lambda: answers.append(connected.query(
            "INSERT INTO crm.customers (SELECT 60 AS id, 'Hal' AS name)")))
        writer.start()
        writer.join(0.5)
        assert answers == []  # waiting, not refused
    writer.join(30)
    assert getattr(answers[0], "affected_rows", None) == 1, answers
    assert rows(connected, "SELECT name FROM crm.customers WHERE id = 60") == [["Hal"]]


def test_reads_of_a_source_go_on_while_it_is_written(connected: Engine) -> None:
    """create/jobs.mdx: jobs (and users) read and write one data source at once. A write
    re-attaches the source read-write and back; a read in between failed ('Catalog
    "kbsql_ds_1" does not exist!', "Table 'orders' not found in database 'shop'"), and so did
    a write whose detach a read held ('Unique file handle conflict'): 59 of 120 statements of
    three threads here. Statements now wait for the swap (milliseconds), not for the write."""
    import threading

    errors: list[str] = []

    def repeat(query: str, times: int) -> None:
        for _ in range(times):
            answer = connected.query(query)
            if answer.type == "error":
                errors.append(answer.error_message)

    writes = [threading.Thread(target=repeat, args=(
        "INSERT INTO shop.orders (SELECT id + 100 AS id, customer_id, amount, order_date, created_at, status "
        "FROM shop.orders WHERE id = 1)", 15)) for _ in range(2)]
    reads = [threading.Thread(target=repeat, args=("SELECT count(*) FROM shop.orders WHERE id > 0", 40))]
    for thread in writes + reads:
        thread.start()
    for thread in writes + reads:
        thread.join(120)
    assert errors == [], errors[:3]
    assert rows(connected, "SELECT count(*) FROM shop.orders WHERE id = 101") == [[30]]
