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


def test_describe_an_object_answers_its_information_schema_row(doc: Doc) -> None:
    """test_schema: `describe job j1` and `describe view v1` answer the object's row (NAME,
    QUERY ...), as MindsDB's answer_describe_object reads information_schema.<TYPE>S; they
    answered "Table 'j1' not found" and the view's columns. A type whose feature kbsql lacks
    is refused in one line."""
    doc.sql("CREATE VIEW v1 (SELECT * FROM sample_data.orders)")
    doc.sql("CREATE JOB j1 (SELECT 1) EVERY hour")
    assert doc.rows("DESCRIBE VIEW v1") == [
        {"NAME": "v1", "PROJECT": doc.project, "QUERY": "SELECT * FROM sample_data.orders"}]
    job = doc.rows(f"DESCRIBE JOBS {doc.project}.j1")
    assert [(r["NAME"], r["QUERY"], r["SCHEDULE_STR"]) for r in job] == [("j1", "SELECT 1", "every hour")]
    assert [r["NAME"] for r in doc.rows(f"DESCRIBE DATABASE {doc.project}")] == [doc.project]
    assert "Job nope not found" in doc.error("DESCRIBE JOB nope")
    assert "ML models (DESCRIBE MODEL m)" in doc.error("DESCRIBE MODEL m")
    assert "triggers (DESCRIBE TRIGGER t)" in doc.error("DESCRIBE TRIGGER t")
    assert "Unknown describe type: thing" in doc.error("DESCRIBE thing x")
    # a plain DESCRIBE (or DESCRIBE TABLE) still lists a table's columns
    assert [r["COLUMN_NAME"] for r in doc.rows("DESCRIBE TABLE sample_data.orders")][:1] == ["order_id"]
    assert [r["COLUMN_NAME"] for r in doc.rows("DESCRIBE v1")][:1] == ["order_id"]


def test_show_projects(doc: Doc) -> None:
    """test_schema: `show projects` lists the projects (MindsDB: one column, `project`)."""
    rows = doc.rows("SHOW PROJECTS")
    assert list(rows[0]) == ["project"]
    assert {"mindsdb", doc.project} <= {r["project"] for r in rows}
    assert "sample_data" not in {r["project"] for r in rows}
    assert doc.rows(f"SHOW PROJECTS LIKE '{doc.project}'") == [{"project": doc.project}]


def test_show_databases_where_names_information_schema_columns(doc: Doc) -> None:
    """MindsDB's test_executor.py::TestIfExistsIfNotExists::test_database_integration:
    `SHOW DATABASES WHERE name = 'x'` filters information_schema.DATABASES (NAME, TYPE,
    ENGINE), then answers `Database`; it was a DuckDB binder error on `name`."""
    doc.sql(f"CREATE DATABASE {doc.project}_db WITH ENGINE = 'mindsdb'")
    assert doc.rows(f"SHOW DATABASES WHERE name = '{doc.project}_db'") == [{"Database": f"{doc.project}_db"}]
    assert doc.rows(f"SHOW DATABASES WHERE name = '{doc.project}_none'") == []
    full = doc.rows("SHOW FULL DATABASES WHERE engine = 'files'")
    assert full == [{"Database": "files", "TYPE": "data", "ENGINE": "files"}]
    assert doc.rows(f"SHOW PROJECTS WHERE name = '{doc.project}'") == [{"project": doc.project}]
    assert doc.rows("SHOW DATABASES LIKE 'informat%'") == [{"Database": "information_schema"}]


def test_mysql_client_statements_name_the_mysql_door(doc: Doc) -> None:
    """MindsDB's flows/test_http.py::test_special_queries: SHOW WARNINGS, SHOW FUNCTION STATUS,
    SHOW ENGINES ..., BEGIN and SET NAMES are the MySQL door's here (README); over HTTP and
    embedded each is refused in one line naming that door (it said "Show statements (SHOW
    WARNINGS)", "StartTransaction statements (start transaction)", "Set statements")."""
    for statement in ("SHOW WARNINGS", "show function status where db = 'mindsdb'", "SHOW PROCEDURE STATUS",
                      "show session status", "SHOW ENGINES", "show charset", "SHOW COLLATION", "BEGIN",
                      "COMMIT", "SET NAMES utf8"):
        error = doc.error(statement)
        assert error.startswith("not supported by the local engine: ") and "MySQL door" in error, error
        assert "--mysql-port" in error


def test_show_secrets_is_refused_by_name(doc: Doc) -> None:
    """MindsDB's test_executor.py::test_hide_secrets: `set show_secrets=True` reveals stored
    passwords there; here they are never shown, and the refusal says so (it said "Set
    statements (SET show_secrets=TRUE)")."""
    error = doc.error("set show_secrets=True")
    assert error.startswith("not supported by the local engine: SET show_secrets: stored secrets"), error
