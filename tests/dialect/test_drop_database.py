"""docs/mindsdb_sql/sql/drop/database.mdx (`DROP DATABASE [IF EXISTS] name`) where something
still uses the database, embedded and over HTTP. MindsDB's projects page: a project that
stores a model "cannot be removed" until its models are dropped (its `Project.delete` checks
models, views, knowledge bases and agents alike). kbsql refuses the same way, and also a data
source an agent reads: one line names what uses it, and nothing stored is lost."""

from __future__ import annotations

import duckdb

from tests.dialect.conftest import Doc

OFFLINE = '{"provider": "kbsql", "model_name": "retrieval"}'


def _projects(doc: Doc) -> list[str]:
    return [r["NAME"] for r in doc.rows("SELECT NAME FROM information_schema.databases "
                                        "WHERE TYPE = 'project'")]


def test_a_project_holding_a_kb_and_an_agent_is_not_dropped(doc: Doc) -> None:
    p = doc.project
    doc.orders_kb()
    doc.sql(f"CREATE AGENT helper USING model = {OFFLINE}, "
            f"data = {{\"knowledge_bases\": [\"{p}.my_kb\"]}}")
    for statement in (f"DROP DATABASE {p}", f"DROP DATABASE IF EXISTS {p}", f"DROP PROJECT {p}"):
        assert doc.error(statement) == (
            f"Cannot drop project '{p}': it contains knowledge base 'my_kb' and agent 'helper'; "
            "drop them first (DROP KNOWLEDGE_BASE, DROP AGENT)")
    # nothing was lost: the project, its KB's chunks and its agent are all there
    assert p in _projects(doc)
    assert len(doc.rows("SELECT id FROM my_kb WHERE content = 'gift wrap' LIMIT 10")) == 3
    assert [r["NAME"] for r in doc.rows("SHOW AGENTS")] == ["helper"]

    doc.sql("DROP AGENT helper")
    assert doc.error(f"DROP DATABASE {p}").startswith(
        f"Cannot drop project '{p}': it contains knowledge base 'my_kb';")
    doc.sql("DROP KNOWLEDGE_BASE my_kb")
    doc.sql(f"DROP DATABASE {p}")
    assert p not in _projects(doc)


def test_a_data_source_an_agent_reads_is_not_dropped(doc: Doc) -> None:
    source = f"shop_{doc.project}"
    path = doc.data_dir / f"{source}.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE items AS SELECT 1 AS id, 'lamp' AS name")
    doc.sql(f"CREATE DATABASE {source} WITH ENGINE = 'duckdb', PARAMETERS = {{\"database\": \"{path}\"}}")
    doc.sql(f"CREATE AGENT one_table USING model = {OFFLINE}, data = {{\"tables\": [\"{source}.items\"]}}")
    doc.sql(f"CREATE AGENT every_table USING model = {OFFLINE}, data = {{\"tables\": [\"{source}.*\"]}}")
    for statement in (f"DROP DATABASE {source}", f"DROP DATABASE IF EXISTS {source}"):
        assert doc.error(statement) == (
            f"Cannot drop database '{source}': agents '{doc.project}.one_table', "
            f"'{doc.project}.every_table' read its tables (data.tables); drop the agent or "
            "ALTER AGENT its data first")
    assert doc.rows(f"SELECT name FROM {source}.items") == [{"name": "lamp"}]

    doc.sql("ALTER AGENT one_table USING data = {\"tables\": []}")
    doc.sql("DROP AGENT every_table")
    doc.sql(f"DROP DATABASE {source}")
    assert source not in [r["NAME"] for r in doc.rows("SELECT NAME FROM information_schema.databases")]
