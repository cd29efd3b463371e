"""Projects and the SQL context, including the reference SDK's use of the SQL door."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from kbsql.engine import Engine
from tests.datasources.makers import make_sqlite, ok, rows


def test_create_use_and_drop_a_project(engine: Engine) -> None:
    ok(engine, "CREATE PROJECT sales_team")
    ok(engine, "CREATE DATABASE ops ENGINE = 'mindsdb'")
    assert [p["name"] for p in engine.list_projects()] == ["mindsdb", "sales_team", "ops"]
    used = ok(engine, "USE sales_team")
    assert used.context["db"] == "sales_team"  # the answer says so
    ok(engine, "CREATE KNOWLEDGE_BASE notes USING content_columns = ['body']", used.context)
    # unqualified names resolve in the current project, qualified names anywhere
    listed = rows(engine, "SHOW TABLES", used.context)
    assert listed == [["notes"]]
    assert rows(engine, "SHOW TABLES FROM mindsdb") == []
    assert "Table 'notes' not found in database 'mindsdb'" in \
        engine.query("SELECT k.id FROM notes k JOIN df.x y ON true", {}).error_message
    assert "Project nowhere does not exist" in engine.query("USE nowhere").error_message
    # a project holding a knowledge base is not dropped with it (MindsDB refuses too)
    assert "Cannot drop project 'sales_team': it contains knowledge base 'notes'" in \
        engine.query("DROP DATABASE sales_team", used.context).error_message
    ok(engine, "DROP KNOWLEDGE_BASE notes", used.context)
    ok(engine, "DROP DATABASE sales_team", used.context)
    assert [p["name"] for p in engine.list_projects()] == ["mindsdb", "ops"]
    assert "cannot be dropped" in engine.query("DROP DATABASE mindsdb").error_message
    assert "already exists" in engine.query("CREATE PROJECT ops").error_message
    ok(engine, "CREATE PROJECT IF NOT EXISTS ops")


def test_information_schema_lists_projects_sources_and_tables(engine: Engine, tmp_path: Path) -> None:
    db = make_sqlite(tmp_path / "crm.sqlite")
    ok(engine, f"CREATE DATABASE crm ENGINE = 'sqlite', PARAMETERS = {{\"db_file\": \"{db}\"}}")
    ok(engine, "CREATE PROJECT p2")
    engine.register_dataframe("frame", pd.DataFrame({"a": [1]}))
    assert rows(engine, "SELECT NAME, TYPE FROM information_schema.databases ORDER BY NAME") == [
        ["crm", "data"], ["df", "data"], ["files", "data"], ["information_schema", "system"],
        ["log", "system"], ["mindsdb", "project"], ["p2", "project"]]
    tables = rows(engine, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.tables "
                          "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
    assert tables == [["crm", "customers"], ["crm", "products"], ["df", "frame"]]
    assert rows(engine, "SHOW DATABASES WHERE `Database` LIKE 'p%'") == [["p2"]]
    # MySQL's information_schema tables, in-process as on the MySQL door (MindsDB answers them everywhere)
    assert rows(engine, "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
                        "WHERE SCHEMA_NAME LIKE 'p%'") == [["p2", "utf8mb4"]]
    assert rows(engine, "SELECT COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE FROM information_schema.COLUMNS "
                        "WHERE TABLE_SCHEMA = 'crm' AND TABLE_NAME = 'customers'") == [
        ["id", 1, "bigint"], ["name", 2, "text"], ["country", 3, "text"]]
    # a condition under NOT or OR does not narrow the tables described (it did: fewer rows than asked)
    others = rows(engine, "SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME FROM information_schema.COLUMNS "
                          "WHERE NOT TABLE_SCHEMA = 'crm' ORDER BY 1, 2")
    assert ["df", "frame"] in others and all(schema != "crm" for schema, _ in others), others
    assert rows(engine, "SELECT TABLE_CATALOG, TABLE_TYPE, TABLE_COLLATION FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = 'crm' AND TABLE_NAME = 'products'") == [
        ["def", "BASE TABLE", "utf8mb4_0900_ai_ci"]]


def test_unquoted_names_are_stored_lower_case_as_mindsdb(engine: Engine) -> None:
    """MindsDB's test_lowercase.py: `CREATE VIEW MyView` makes `myview` (a quoted name keeps
    its case), so `information_schema.tables WHERE table_name = 'myview'` finds it; kbsql
    kept `MyView` and that filter answered no row. The same for projects, knowledge bases,
    agents and jobs; names are still looked up without case."""
    for made in ("MyProj", "`QuotedProj`"):
        ok(engine, f"CREATE PROJECT {made}")
    assert [p["name"] for p in engine.list_projects()][-2:] == ["myproj", "QuotedProj"]
    ok(engine, "CREATE VIEW MyProj.MyView AS (SELECT 1 AS x)")
    ok(engine, "CREATE VIEW `KeptView` AS (SELECT 2 AS x)")
    ok(engine, "CREATE KNOWLEDGE_BASE MyKB USING content_columns = ['body']")
    ok(engine, "CREATE AGENT MyAgent USING prompt_template = 'Answer briefly'")
    ok(engine, "CREATE JOB MyJob (SELECT 1) EVERY day")
    assert rows(engine, "SELECT TABLE_SCHEMA, TABLE_TYPE FROM information_schema.tables "
                        "WHERE table_name = 'myview'") == [["myproj", "VIEW"]]
    assert rows(engine, "SELECT TABLE_NAME FROM information_schema.tables WHERE table_name = 'KeptView'") \
        == [["KeptView"]]
    for table, name in (("knowledge_bases", "mykb"), ("agents", "myagent"), ("jobs", "myjob")):
        assert rows(engine, f"SELECT NAME FROM information_schema.{table} WHERE name = '{name}'") == [[name]]
    assert rows(engine, "SELECT x FROM MYPROJ.MYVIEW") == [[1]]  # found whatever the case
    ok(engine, "DROP JOB MYJOB")
    ok(engine, "DROP VIEW myproj.MyView")


def test_reference_sdk_flow_over_http(server_url: str) -> None:
    """What the reference's Python SDK sends: the SQL door with a context round trip."""
    with httpx.Client(base_url=server_url) as http:
        def sql(query: str, db: str = "mindsdb") -> dict[str, Any]:
            response = http.post("/api/sql/query", json={"query": query, "context": {"db": db}})
            assert response.status_code == 200
            return response.json()

        def projects() -> list[str]:
            body = sql("SELECT NAME FROM information_schema.databases WHERE TYPE = 'project'")
            assert body["type"] == "table" and body["column_names"] == ["NAME"]
            return [r[0] for r in body["data"]]

        assert projects() == ["mindsdb"]
        assert sql("CREATE DATABASE my_proj ENGINE = 'mindsdb'")["type"] == "ok"
        assert projects() == ["mindsdb", "my_proj"]
        used = sql("use my_proj")
        assert used == {"type": "ok", "affected_rows": None,
                        "context": {"show_secrets": False, "db": "my_proj"}}
        shown = sql("show tables", db=used["context"]["db"])
        assert shown["type"] == "table" and shown["column_names"] == ["Tables_in_my_proj"]
        assert shown["data"] == []
        assert sql("SHOW DATABASES")["column_names"] == ["Database"]
        # MySQL's information_schema over HTTP, as MindsDB's /api/sql/query answers it
        schemata = sql("SELECT * FROM information_schema.schemata WHERE SCHEMA_NAME = 'my_proj'")
        assert schemata["column_names"] == ["CATALOG_NAME", "SCHEMA_NAME", "DEFAULT_CHARACTER_SET_NAME",
                                            "DEFAULT_COLLATION_NAME", "SQL_PATH"]
        assert schemata["data"] == [["def", "my_proj", "utf8mb4", "utf8mb4_0900_ai_ci", None]]
        listed = sql("SELECT TABLE_NAME FROM information_schema.TABLES "
                     "WHERE TABLE_SCHEMA = 'information_schema' "
                     "AND TABLE_NAME IN ('COLUMNS', 'SCHEMATA', 'ENGINES') ORDER BY 1")
        assert listed["data"] == [["COLUMNS"], ["ENGINES"], ["SCHEMATA"]]
        engines = sql("SELECT ENGINE, SUPPORT FROM information_schema.ENGINES")
        assert engines["data"] == [["InnoDB", "DEFAULT"]]
        assert sql("DROP DATABASE my_proj")["type"] == "ok"
        assert projects() == ["mindsdb"]
        assert http.get("/api/projects").json() == [{"name": "mindsdb"}]
