"""What clients send before (and around) the user's statements, over the text and the binary
(prepared statement) protocol: variables, SET, transactions, the SHOW statements MindsDB
answers over MySQL, and information_schema lookups as drivers, Tableau and SQLAlchemy send
them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mysql.connector
import pytest

from kbsql.server.process import ServerProcess

JDBC_PROBE = (  # what MySQL Connector/J 8 sends right after logging in
    "/* mysql-connector-java-8.0.33 */SELECT  @@session.auto_increment_increment AS "
    "auto_increment_increment, @@character_set_client AS character_set_client, "
    "@@character_set_connection AS character_set_connection, @@character_set_results AS "
    "character_set_results, @@character_set_server AS character_set_server, @@collation_server AS "
    "collation_server, @@collation_connection AS collation_connection, @@init_connect AS init_connect, "
    "@@interactive_timeout AS interactive_timeout, @@license AS license, @@lower_case_table_names AS "
    "lower_case_table_names, @@max_allowed_packet AS max_allowed_packet, @@net_write_timeout AS "
    "net_write_timeout, @@performance_schema AS performance_schema, @@query_cache_size AS "
    "query_cache_size, @@query_cache_type AS query_cache_type, @@sql_mode AS sql_mode, "
    "@@system_time_zone AS system_time_zone, @@time_zone AS time_zone, @@transaction_isolation AS "
    "transaction_isolation, @@wait_timeout AS wait_timeout")
JDBC_TABLES = (  # Connector/J 8's DatabaseMetaData.getTables (a HAVING on an alias, no GROUP BY)
    "SELECT TABLE_SCHEMA AS TABLE_CAT, NULL AS TABLE_SCHEM, TABLE_NAME, CASE WHEN TABLE_TYPE='BASE TABLE' "
    "THEN CASE WHEN TABLE_SCHEMA = 'mysql' OR TABLE_SCHEMA = 'performance_schema' THEN 'SYSTEM TABLE' "
    "ELSE 'TABLE' END WHEN TABLE_TYPE='TEMPORARY' THEN 'LOCAL_TEMPORARY' ELSE TABLE_TYPE END AS TABLE_TYPE, "
    "TABLE_COMMENT AS REMARKS, NULL AS TYPE_CAT, NULL AS TYPE_SCHEM, NULL AS TYPE_NAME, NULL AS "
    "SELF_REFERENCING_COL_NAME, NULL AS REF_GENERATION FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA "
    "LIKE ? AND TABLE_NAME LIKE ? HAVING TABLE_TYPE IN ('TABLE','VIEW','SYSTEM TABLE','SYSTEM VIEW',"
    "'LOCAL_TEMPORARY') ORDER BY TABLE_TYPE, TABLE_SCHEMA, TABLE_NAME")
JDBC_COLUMNS = (  # and getColumns, shortened
    "SELECT TABLE_SCHEMA AS TABLE_CAT, NULL AS TABLE_SCHEM, TABLE_NAME, COLUMN_NAME, CASE data_type "
    "WHEN 'int' THEN 4 WHEN 'double' THEN 8 WHEN 'decimal' THEN 3 ELSE 12 END AS DATA_TYPE, "
    "UPPER(CASE WHEN LOCATE('unsigned', COLUMN_TYPE) != 0 AND LOCATE('unsigned', DATA_TYPE) = 0 THEN "
    "CONCAT(DATA_TYPE, ' unsigned') ELSE DATA_TYPE END) AS TYPE_NAME, IF(IS_NULLABLE='YES', 1, 0) AS "
    "NULLABLE, ORDINAL_POSITION FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA LIKE ? AND TABLE_NAME "
    "LIKE ? AND COLUMN_NAME LIKE ? ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION")


@pytest.fixture(params=["text", "binary"])
def run(door: ServerProcess, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Run a statement over one protocol; (column names, rows) or the error raised."""
    conn = mysql.connector.connect(host="127.0.0.1", port=door.mysql_port, user="mindsdb", password="",
                                   database="mindsdb", use_pure=True, connection_timeout=10)
    prepared = request.param == "binary"

    def execute(query: str, args: tuple = ()) -> tuple[list[str], list[tuple]]:
        cursor = conn.cursor(prepared=prepared)
        if args and not prepared:  # the text protocol's client binds %s itself
            query = query.replace("?", "%s")
        try:
            cursor.execute(query, args)
            if not cursor.with_rows:
                return [], []
            return [d[0] for d in cursor.description], [tuple(r) for r in cursor.fetchall()]
        finally:
            cursor.close()

    yield execute
    conn.close()


def test_version_and_information_functions(run: Any) -> None:
    names, rows = run("select @@version_comment limit 1")
    assert names == ["@@version_comment"] and rows[0][0].startswith("kbsql ")
    assert run("SELECT @@version_comment LIMIT 0") == (["@@version_comment"], [])
    names, rows = run("SELECT DATABASE(), USER(), VERSION(), CONNECTION_ID() AS id")
    assert names == ["DATABASE()", "USER()", "VERSION()", "id"]
    assert rows[0][:3] == ("mindsdb", "mindsdb@127.0.0.1", "8.0.17") and rows[0][3] > 0
    # nested in an expression or beside a table (the engine answers those), the same values
    nested = run("SELECT upper(USER()) AS u, concat(CURRENT_USER(), '') AS c, CONNECTION_ID() + 0 AS id, "
                 "concat(VERSION(), '') AS v FROM shop.orders LIMIT 1")[1][0]
    assert nested == ("MINDSDB@127.0.0.1", "mindsdb@%", rows[0][3], "8.0.17")
    names, rows = run(JDBC_PROBE)
    values = dict(zip(names, rows[0], strict=True))
    assert values["auto_increment_increment"] == 1 and values["character_set_client"] == "utf8mb4"
    assert values["transaction_isolation"] == "REPEATABLE-READ" and values["wait_timeout"] == 28800
    with pytest.raises(mysql.connector.Error) as unknown:
        run("SELECT @@no_such_variable")
    assert unknown.value.errno == 1193


def test_set_statements_change_the_session(run: Any) -> None:
    run("SET NAMES utf8mb4")
    run("SET autocommit = 0")
    assert run("SELECT @@autocommit")[1] == [(0,)]
    run("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    assert run("SELECT @@session.transaction_isolation")[1] == [("READ-COMMITTED",)]
    run("SET @@session.net_write_timeout = 600, wait_timeout = 100")
    assert run("SELECT @@net_write_timeout, @@wait_timeout")[1] == [(600, 100)]
    # in a statement the engine answers (a table, an expression), the connection's own values:
    # the engine reads the defaults only when the connection has set nothing
    assert run("SELECT concat(@@net_write_timeout, '/', @@wait_timeout) AS t, upper(@@transaction_isolation) "
               "AS i FROM shop.orders LIMIT 1")[1] == [("600/100", "READ-COMMITTED")]
    run("SET SQL_SELECT_LIMIT = DEFAULT")
    for refused in ("SET NAMES latin1", "SET sql_select_limit = 10", "SET time_zone = '+02:00'"):
        with pytest.raises(mysql.connector.Error) as error:
            run(refused)
        assert error.value.errno == 1235 and "kbsql" in error.value.msg  # one line, why
    for statement in ("BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK"):
        assert run(statement) == ([], [])


def test_show_statements_in_mysql_shapes(run: Any) -> None:
    names, rows = run("SHOW VARIABLES LIKE 'sql_mode'")
    assert names == ["Variable_name", "Value"] and rows[0][0] == "sql_mode"
    assert run("SHOW SESSION VARIABLES WHERE Variable_name = 'version'")[1] == [("version", "8.0.17")]
    assert run("SHOW GLOBAL VARIABLES LIKE 'lower_case%'")[1] == [("lower_case_table_names", "0")]
    assert run("SHOW SESSION STATUS LIKE 'Ssl_cipher'") == (["Variable_name", "Value"], [("Ssl_cipher", "")])
    assert run("SHOW WARNINGS") == (["Level", "Code", "Message"], [])
    assert run("SHOW ENGINES")[1][0][:2] == ("InnoDB", "DEFAULT")
    names, rows = run("SHOW CHARSET LIKE 'utf8mb4'")
    assert names == ["Charset", "Description", "Default collation", "Maxlen"] and rows[0][3] == 4
    assert ("utf8mb4_general_ci", "utf8mb4", 45) in [r[:3] for r in run("SHOW COLLATION")[1]]
    names, rows = run("SHOW FUNCTION STATUS WHERE Db = 'mindsdb'")
    assert names[:3] == ["Db", "Name", "Type"] and rows == []
    assert run("SHOW PROCEDURE STATUS")[1] == []
    assert run("SHOW DATABASES") == run("SHOW SCHEMAS")
    assert {"mindsdb", "information_schema", "shop"} <= {r[0] for r in run("SHOW DATABASES")[1]}
    assert run("SHOW FULL TABLES FROM mindsdb") == (["Tables_in_mindsdb", "Table_type"],
                                                    [("kb", "KNOWLEDGE BASE")])
    assert run("SHOW TABLES IN shop")[1] == [("archive.old_orders",), ("orders",)]
    names, rows = run("SHOW COLUMNS FROM orders FROM shop")
    assert names == ["Field", "Type", "Null", "Key", "Default", "Extra"]
    assert [r[:2] for r in rows] == [("id", "int"), ("customer_id", "int"), ("amount", "decimal(18,3)"),
                                     ("order_date", "date"), ("created_at", "datetime"), ("status", "text")]
    names, rows = run("SHOW FULL COLUMNS FROM mindsdb.kb LIKE 'rel%'")
    assert names[:3] == ["Field", "Type", "Collation"] and rows == [("relevance", "double", None, "YES", "",
                                                                     None, "", "select", "")]
    with pytest.raises(mysql.connector.Error):  # a WHERE it cannot read: one line, the session goes on
        run("SHOW VARIABLES WHERE ((")
    assert run("SHOW VARIABLES LIKE 'version'")[1] == [("version", "8.0.17")]
    create = run("SHOW CREATE TABLE shop.orders")[1][0][1]
    assert create.startswith("CREATE TABLE `orders` (\n  `id` int DEFAULT NULL,")
    with pytest.raises(mysql.connector.Error) as missing:
        run("SHOW COLUMNS FROM no_such_table")
    assert missing.value.errno == 1146


def test_information_schema_as_drivers_ask_it(run: Any) -> None:
    # the engine's information_schema, the same as over HTTP, in MySQL's (and MindsDB's) columns
    names, rows = run("SELECT * FROM information_schema.tables WHERE table_schema = 'mindsdb'")
    assert names[:4] == ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE"] and len(names) == 21
    assert [r[:4] for r in rows] == [("def", "mindsdb", "kb", "KNOWLEDGE BASE")]
    # MySQL's columns where it has none (JDBC getTables, Tableau, DBeaver)
    names, rows = run("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, TABLE_COMMENT FROM "
                      "INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'shop' ORDER BY TABLE_NAME")
    assert names == ["TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "TABLE_COMMENT"]
    assert rows == [("shop", "archive.old_orders", "BASE TABLE", ""), ("shop", "orders", "BASE TABLE", "")]
    assert ("mindsdb",) in run("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")[1]
    # the engine's LIKE, as MindsDB's (it runs information_schema in DuckDB too): case-sensitive
    assert run("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'minds%'")[1] == \
        [("mindsdb",)]
    names, rows = run("SELECT COLUMN_NAME, DATA_TYPE, ORDINAL_POSITION FROM information_schema.COLUMNS "
                      "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                      ("mindsdb", "kb"))
    assert rows[:6] == [("id", "text", 1), ("chunk_id", "text", 2), ("chunk_content", "text", 3),
                        ("metadata", "json", 4), ("relevance", "double", 5), ("distance", "double", 6)]
    assert [r[2:4] for r in run(JDBC_TABLES, ("shop", "%"))[1]] == [("archive.old_orders", "TABLE"),
                                                                  ("orders", "TABLE")]
    assert [r[3:] for r in run(JDBC_COLUMNS, ("shop", "orders", "%"))[1][:3]] == [
        ("id", 4, "INT", 1, 1), ("customer_id", 4, "INT", 1, 2), ("amount", 3, "DECIMAL", 1, 3)]
    # MindsDB's extra column: the source's own type beside the MySQL one
    names, rows = run("SELECT column_name, data_type, column_type, original_type FROM "
                      "information_schema.columns WHERE table_name = 'orders' AND table_schema = 'shop' "
                      "ORDER BY ordinal_position")
    assert rows[0] == ("id", "int", "int", "integer") and rows[-1] == ("status", "text", "text", "varchar")
    # MySQL's sizes, as MindsDB fills them (its test_show_columns: numeric_precision of an int is set)
    names, rows = run("SELECT column_name, numeric_precision, numeric_scale, character_maximum_length FROM "
                      "information_schema.columns WHERE table_name = 'orders' AND table_schema = 'shop' "
                      "ORDER BY ordinal_position")
    assert rows[0] == ("id", 10, 0, None) and rows[2] == ("amount", 18, 3, None)
    assert rows[-1] == ("status", None, None, 65535)
    names, rows = run("SHOW FULL DATABASES")
    assert [n.upper() for n in names] == ["DATABASE", "TYPE", "ENGINE"]
    assert ("information_schema", "system", None) in rows and ("shop", "data", "duckdb") in rows
    keys = "SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'mindsdb'"
    assert run(keys)[1] == [(0,)]
    with pytest.raises(mysql.connector.Error):  # not a table MySQL or the engine has: an error, not rows
        run("SELECT * FROM information_schema.no_such_view")


def test_the_engine_still_answers_statements_that_look_like_client_ones(run: Any) -> None:
    run("SET @threshold = 2")  # MindsDB's own variables are the engine's
    assert run("SELECT id FROM shop.orders WHERE id > @threshold ORDER BY id")[1] == [(3,), (4,)]
    names, rows = run("SELECT 1 AS one, 'x' AS x")
    assert names == ["one", "x"] and rows == [(1, "x")]
    with pytest.raises(mysql.connector.Error) as killed:
        run("KILL QUERY 12")
    assert killed.value.errno == 1235
