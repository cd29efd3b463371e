"""create.mdx ("variables and the from_env() function"), insert_data.mdx
(information_schema.queries, query_cancel / query_resume), rest/sql.mdx (`params`), and the
one-line refusal of what the local engine does not run, embedded and over HTTP."""

from __future__ import annotations

import pytest

from tests.dialect.conftest import HASH, Doc


def test_set_variable_and_from_env(doc: Doc, monkeypatch: pytest.MonkeyPatch) -> None:
    """create.mdx: variables and from_env() pass parameters when creating knowledge bases."""
    doc.orders_kb()
    doc.sql("SET @search = 'color'")
    rows = doc.rows("SELECT id FROM my_kb WHERE content = @search LIMIT 1")
    assert rows == [{"id": "A1B"}]
    assert "@nope" in doc.error("SELECT id FROM my_kb WHERE content = @nope")
    # from_env reads MDB_* variables of the engine's process: set here for the embedded one
    if doc.transport == "embedded":
        monkeypatch.setenv("MDB_EMBED_KEY", "sk-from-env")
        doc.sql(f"CREATE KNOWLEDGE_BASE env_kb USING embedding_model = {{\"provider\": \"openai\", "
                f"\"model_name\": \"e1\", \"api_key\": from_env('MDB_EMBED_KEY'), "
                f"\"base_url\": \"{doc.provider.url}/v1\"}}")
        doc.sql("INSERT INTO env_kb (id, content) VALUES (1, 'hello')")
        assert doc.provider.requests[-1][2]["Authorization"] == "Bearer sk-from-env"
    assert "MDB_" in doc.error("SET @k = from_env('HOME')")
    assert "MDB_NOT_SET_ANYWHERE" in doc.error("SET @k = from_env('MDB_NOT_SET_ANYWHERE')")


def test_params_bind_placeholders(doc: Doc) -> None:
    """rest/sql.mdx: `params` fill the statement's placeholders (and are variables too)."""
    doc.orders_kb()
    result = doc.client.api.query("SELECT id FROM my_kb WHERE product = :p", {"db": doc.project},
                                  params={"p": "Wireless Mouse"}) if doc.transport == "embedded" else None
    if result is None:
        import httpx

        answer = httpx.post(f"{doc.client.api.base_url}/api/sql/query", json={
            "query": "SELECT id FROM my_kb WHERE product = :p AND id != @skip",
            "params": {"p": "Wireless Mouse", "skip": "X"}, "context": {"db": doc.project}}).json()
        assert answer["data"] == [["A1B"]], answer
    else:
        assert result.rows() == [["A1B"]]


def test_information_schema_queries(doc: Doc) -> None:
    """insert_data.mdx: `SELECT * FROM information_schema.queries` shows the inserts."""
    doc.orders_kb()
    rows = doc.rows("SELECT * FROM information_schema.queries")
    assert list(rows[-1]) == ["ID", "STARTED_AT", "FINISHED_AT", "PROCESSED_ROWS", "ERROR", "SQL", "DATABASE",
                              "PARAMETERS", "CONTEXT", "UPDATED_AT"]
    mine = [r for r in rows if r["DATABASE"] == doc.project]
    assert mine[-1]["PROCESSED_ROWS"] == 3 and mine[-1]["ERROR"] is None
    assert "sample_data.orders" in mine[-1]["SQL"] and mine[-1]["FINISHED_AT"] is not None
    # query_cancel / query_resume act on background inserts (test_background_inserts.py);
    # a finished one has nothing to cancel or resume, an unknown id is named
    assert "already finished" in doc.error(f"SELECT query_cancel({mine[-1]['ID']});")
    assert "already finished" in doc.error(f"SELECT query_resume({mine[-1]['ID']});")
    assert "Query not found: 987654" in doc.error("SELECT query_resume(987654);")


def test_delete_with_or_and_between(doc: Doc) -> None:
    """insert_data.mdx DELETE, with the metadata operators of query.mdx."""
    doc.sql(f"CREATE KNOWLEDGE_BASE d_kb USING embedding_model = {HASH}, metadata_columns = ['n']")
    doc.sql("INSERT INTO d_kb (id, content, n) VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)")
    doc.sql("DELETE FROM d_kb WHERE n BETWEEN 2 AND 3 OR id = '4'")
    assert [r["id"] for r in doc.rows("SELECT id FROM d_kb")] == ["1"]
    assert "content" in doc.error("DELETE FROM d_kb WHERE content = 'a'")


@pytest.mark.parametrize("statement,what", [
    ("CREATE MODEL m PREDICT y USING engine = 'lightwood'", "ML models"),
    ("SHOW TRIGGERS", "triggers"),
    ("SHOW MODELS", "ML models"),
    ("SHOW SKILLS", "skills"),
    # the tables MindsDB's docs read for those features: refused as the feature, not as a typo
    ("SELECT * FROM mindsdb.models", "ML models (mindsdb.models)"),
    ("SELECT name, status FROM models WHERE name = 'm'", "ML models"),
    # sql/api/manage-models-versions.mdx writes to it: "Table or Knowledge Base 'models' doesn't exist"
    ("UPDATE models SET active = true WHERE name = 'm' AND version = 2", "ML models (p"),
    ("DELETE FROM models WHERE name = 'm' AND version = 1", "ML models (p"),
    ("SELECT * FROM information_schema.ml_engines", "ML engines"),
])
def test_hosted_only_statements_are_refused_in_one_line(doc: Doc, statement: str, what: str) -> None:
    doc.refused(statement, what)


def test_a_knowledge_base_named_models_is_still_read(doc: Doc) -> None:
    doc.sql(f"CREATE KNOWLEDGE_BASE models USING embedding_model = {HASH}")
    doc.sql("INSERT INTO models (id, content) VALUES (1, 'a')")
    assert [r["id"] for r in doc.rows(f"SELECT id FROM {doc.project}.models")] == ["1"]
    assert [r["id"] for r in doc.rows("SELECT id FROM models")] == ["1"]


def test_last_outside_a_job_is_refused_in_one_line(doc: Doc) -> None:
    """MindsDB's test_base_queires.py::test_last: `WHERE a > LAST` in a plain SELECT keeps a
    LAST per query there (the first run sees no row). Here LAST is kept per job only; DuckDB
    read it as a column: a binder error, or on a table with a column `last` that column,
    compared silently (a row where MindsDB's first run answers none)."""
    doc.sql("CREATE OR REPLACE TABLE files.with_last (SELECT 1 AS a, 5 AS last UNION ALL SELECT 2, 1)")
    for query in ("SELECT * FROM sample_data.orders WHERE order_id > LAST",
                  "SELECT a FROM files.with_last WHERE a > last",
                  "SELECT a FROM files.with_last WHERE a > COALESCE(LAST, 0)",
                  "CREATE VIEW v_last AS (SELECT a FROM files.with_last WHERE a > last)"):
        assert "CREATE JOB" in doc.refused(query, "LAST outside a job"), query
    # quoted, `last` is the column's name, in MindsDB too
    assert [r["a"] for r in doc.rows("SELECT a FROM files.with_last WHERE a > `last`")] == [2]


def test_system_variables_are_read_on_every_door(doc: Doc) -> None:
    """MindsDB's test_base_queires.py::test_system_vars / test_select_without_table read
    `@@session.x`, `@@version_comment` and SHOW VARIABLES on every door. Here only the MySQL
    door answered them; the engine refused them (and before that read the second `@` as a
    variable of its own). Read from the table the MySQL door starts from; SET of one is still
    refused here: the engine keeps no session to hold it (`--mysql-port` keeps one a
    connection)."""
    assert doc.rows("SELECT @@session.auto_increment_increment, @@character_set_client") == [
        {"@@session.auto_increment_increment": 1, "@@character_set_client": "utf8mb4"}]
    comment = doc.rows("SELECT @@version_comment")[0]["@@version_comment"]
    assert comment.startswith("kbsql ") and comment.endswith("(MindsDB-compatible)"), comment
    assert doc.rows("SELECT upper(@@time_zone) AS tz, @@version AS v FROM sample_data.orders LIMIT 1") == [
        {"tz": "UTC", "v": "8.0.17"}]
    assert doc.rows("SHOW VARIABLES LIKE 'sql_mode'")[0]["Value"].startswith("ONLY_FULL_GROUP_BY")
    assert doc.rows("SHOW SESSION VARIABLES WHERE Variable_name = 'autocommit'") == [
        {"Variable_name": "autocommit", "Value": "ON"}]
    assert "Unknown system variable 'not_a_variable'" in doc.error("SELECT @@not_a_variable")
    message = doc.refused("SET @@session.var = 1", "SET of MySQL system variables (@@session.var)")
    assert "--mysql-port" in message
    doc.sql("SET @mine = 7")  # the engine's own variables are unchanged
    assert doc.rows("SELECT @mine AS v, '@@not_a_variable' AS t") == [{"v": 7, "t": "@@not_a_variable"}]


def test_information_functions_answer_as_mindsdb(doc: Doc) -> None:
    """MindsDB's test_base_queires.py::test_select_without_table: `select version()` is
    '8.0.17' (the MySQL version MindsDB reports on every door) and `select session_user` is
    the session's user (None without a login). DuckDB answered its own 'v1.5.5', user()
    'duckdb', failed on database() and on a bare session_user."""
    assert doc.rows("SELECT version()") == [{"version": "8.0.17"}]
    assert doc.rows("SELECT database() AS d, user(), current_user()") == [
        {"d": doc.project, "user": None, "current_user": None}]
    assert doc.rows("SELECT session_user") == [{"session_user": None}]
    assert doc.rows("SELECT version() AS v FROM sample_data.orders LIMIT 1") == [{"v": "8.0.17"}]


def test_a_view_naming_one_column_twice_is_refused(doc: Doc) -> None:
    """MindsDB's test_base_queires.py::test_view_duplicated_cols: a view of `select *` over a
    join sharing `order_id` is refused when made. Here it was made, and read through the
    view the second column came back renamed `order_id_1`."""
    message = doc.error("CREATE VIEW twice AS (SELECT * FROM sample_data.orders a "
                        "JOIN sample_data.orders b ON a.order_id = b.order_id)")
    assert "'order_id' twice" in message, message
    doc.sql("CREATE VIEW once AS (SELECT a.*, b.notes AS other_notes FROM sample_data.orders a "
            "JOIN sample_data.orders b ON a.order_id = b.order_id)")
    assert doc.columns("SELECT * FROM once") == ["order_id", "product", "notes", "other_notes"]


def test_information_functions_answer_as_mindsdb_wherever_they_sit(doc: Doc) -> None:
    """MindsDB's executor answers the information functions wherever they sit in a statement
    (subselect_step.py's check_fields walks the whole query). Nested in an expression, in a
    WHERE, a subquery or a view, DuckDB's own answered here before: `concat(version(), 'x')`
    'v1.5.5x', `upper(user())` 'DUCKDB', and a WHERE on `version() = '8.0.17'` kept no row."""
    assert doc.rows("SELECT concat(version(), 'x') AS v, upper(user()) AS u, "
                    "database() || '!' AS d, connection_id() AS c") == [
        {"v": "8.0.17x", "u": None, "d": f"{doc.project}!", "c": None}]
    assert doc.rows("SELECT count(*) AS n FROM sample_data.orders WHERE version() = '8.0.17' "
                    "AND current_user() IS NULL AND database() = '" + doc.project + "'") == [{"n": 3}]
    assert doc.rows("SELECT v.version FROM (SELECT version()) v") == [{"version": "8.0.17"}]
    assert doc.rows("SELECT (SELECT upper(session_user)) AS s") == [{"s": None}]
    doc.sql("CREATE VIEW made_by AS (SELECT order_id, concat('v', version()) AS v FROM sample_data.orders)")
    assert {r["v"] for r in doc.rows("SELECT v FROM made_by")} == {"v8.0.17"}


def test_a_custom_function_call_says_byof_is_not_run(doc: Doc) -> None:
    """functions/custom_functions.mdx calls an uploaded Python function as
    `functions.add_integers(sqft, 1)`: refused (a dotted call may run a data source's own SQL),
    its line told the user to call add_integers(...) alone, which DuckDB then does not know;
    it now says custom Python functions are not run here. Called alone, the unknown function
    is DuckDB's line, one line."""
    message = doc.error("SELECT functions.add_integers(2, 1) AS added_one")
    assert "by their name alone" in message and "custom Python functions (MindsDB's BYOF" in message
    assert "add_integers does not exist" in doc.error("SELECT add_integers(2, 1) AS added_one")



def test_the_variables_kept_are_bounded(tmp_path) -> None:
    """Each SET of a new name kept its value for good, so SETs could take a served engine's
    memory: past the store's bound (settings max_variables, max_variables_mb) a SET is one line
    naming it and the settings, and what is kept stays."""
    from kbsql.engine import Engine

    with Engine(tmp_path / "data", settings={"max_variables": 3, "max_variables_mb": 1}) as engine:
        for name in ("a", "b", "c"):
            assert engine.query(f"SET @{name} = '{name * 20}'").type == "ok"
        refused = engine.query("SET @d = 1")
        assert refused.type == "error" and "more than 3 variables" in refused.error_message
        assert "(max_variables in config.json, max_variables_mb in config.json;" in refused.error_message
        refused = engine.query("SET @a = '" + "x" * 2**20 + "'")  # a, b and c would hold 1 MB + 40
        assert refused.type == "error" and "1,048,576 characters of values" in refused.error_message
        assert engine.query("SET @a = 'short'").type == "ok"  # a name kept may take a new value
        assert engine.query("SELECT @b AS b").to_json()["data"] == [["b" * 20]]


def test_a_set_of_several_variables_is_refused_not_half_done(tmp_path) -> None:
    """MySQL's `SET @x = 1, @y = 'three'` answered OK having stored @x alone (@y kept its old
    value), or, with @y unset, said 'Variable @y is not defined: SET @y = ... first' about the
    statement setting it; `SET @z := 5` (MySQL's other form) and `SET @bad` said @z / @bad
    was not defined. Several assignments are refused whole in one line; := sets."""
    from kbsql.engine import Engine

    with Engine(tmp_path / "data") as engine:
        assert engine.query("SET @y = 'two'").type == "ok"
        for statement in ("SET @x = 1, @y = 'three'", "SET @x = 1, @nope := 2", "SET @x = 1, 2"):
            refused = engine.query(statement)
            assert refused.type == "error", statement
            assert refused.error_message == ("SET @x = ... sets one variable: one SET each "
                                             "(SET @a = 1; SET @b = 2); nothing was set")
        assert engine.query("SELECT @y AS y").to_json()["data"] == [["two"]]
        assert "@x is not defined" in engine.query("SELECT @x AS x").error_message
        assert engine.query("SET @s = 'a, @b = 1'").type == "ok"  # a comma in a literal is text
        assert engine.query("SET @z := 5").type == "ok"
        assert engine.query("SELECT @z AS z, @s AS s").to_json()["data"] == [[5, "a, @b = 1"]]
        assert engine.query("SET @bad").error_message == "SET @bad needs a value: SET @bad = 'text'"
