"""What an agent can reach: wildcards resolve at question time, and anything its `data`
does not connect is refused in the observation, never executed."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from kbsql.engine import Engine
from kbsql.engine.agents.scope import Refused, check_read
from tests.agents.fakes import FakeLLM, text, tools

SECRET = "TOPSECRET-4711"


def stream(engine: Engine, agent: str, question: str, project: str = "mindsdb") -> list[dict]:
    return list(engine.stream(project, agent, [{"question": question, "answer": ""}]))


def observations(chunks: list[dict]) -> list[str]:
    return [c["steps"][0]["observation"] for c in chunks if "steps" in c]


@pytest.fixture
def shop(engine: Engine, tmp_path: Path) -> Engine:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as db:
        db.execute("CREATE TABLE prices (item TEXT, price INT); INSERT INTO prices VALUES ('pump', 120)")
        db.execute("CREATE TABLE salaries (who TEXT, pay TEXT)")
        db.execute(f"INSERT INTO salaries VALUES ('ceo', '{SECRET}')")
    assert engine.query(f"CREATE DATABASE shop WITH ENGINE = 'duckdb', "
                        f"PARAMETERS = {{'database': '{path}'}}").type == "ok"
    return engine


def ask_ollama(engine: Engine, name: str, data: dict, script: list) -> list[str]:
    """What agent `name`, connected to `data`, saw of its tools when asked "q" by a scripted
    Ollama-compatible model on loopback running `script`."""
    with FakeLLM("ollama", script) as fake:
        engine.create_agent("mindsdb", {"name": name, "model": {
            "provider": "ollama", "model_name": "m1", "base_url": fake.base_url}, "data": data})
        return observations(stream(engine, name, "q"))


def test_project_wildcard_sees_a_knowledge_base_created_after_the_agent(engine: Engine) -> None:
    engine.catalog.create_project("proj")
    engine.create_agent("mindsdb", {"name": "late", "data": {"knowledge_bases": ["proj.*"]}})
    first = stream(engine, "late", "Where is the turbine?")
    assert observations(first)[0] == "[]"
    assert "could not find" in first[-2]["output"]
    engine.query("CREATE KNOWLEDGE_BASE docs USING embedding_model = "
                 "{'provider': 'kbsql', 'model_name': 'hash-128'}", {"db": "proj"})
    engine.query("INSERT INTO docs (id, content) VALUES (7, 'The turbine stands in hall B.')",
                 {"db": "proj"})
    chunks = stream(engine, "late", "Where is the turbine?")
    assert observations(chunks)[0] == '["proj.docs"]'
    assert "hall B" in chunks[-2]["output"] and "7:content:1of1:0to" in chunks[-2]["output"]


def test_agent_cannot_read_a_table_it_is_not_connected_to(shop: Engine) -> None:
    attempts = ["SELECT * FROM shop.salaries",
                "SELECT p.item FROM shop.prices p JOIN shop.salaries s ON p.item = s.who",
                "SELECT * FROM shop.prices WHERE item IN (SELECT pay FROM shop.salaries)",
                "SELECT item FROM shop.prices UNION SELECT pay FROM shop.salaries",
                "SELECT * FROM (SELECT * FROM shop.salaries) t",
                "DROP DATABASE shop"]
    script = [tools(("sql_db_list_tables", {})), tools(("sql_db_schema", {"tables": "shop.salaries"})),
              *[tools(("sql_db_query", {"query": q})) for q in attempts],
              tools(("sql_db_query", {"query": "SELECT price FROM shop.prices"})), text("ok")]
    with FakeLLM("openai", script) as fake:
        shop.create_agent("mindsdb", {"name": "clerk", "data": {"tables": ["shop.prices"]},
                                      "model": {"provider": "openai", "model_name": "m1",
                                                "base_url": fake.base_url}})
        chunks = stream(shop, "clerk", "what does the ceo earn?")
        seen = observations(chunks)
        assert seen[0] == "shop.prices"
        assert all(o.startswith("Error:") for o in seen[1:-1]), seen
        assert "not allowed" in seen[2] and "salaries" in seen[2]
        assert "Only SELECT" in seen[-2]
        assert "120" in seen[-1]
        assert SECRET not in json.dumps(chunks) and SECRET not in json.dumps(fake.requests)
    assert len(shop.query("SELECT * FROM shop.salaries").data) == 1  # nothing was dropped


def test_data_source_wildcard_and_unconnected_knowledge_base(shop: Engine) -> None:
    shop.catalog.create_project("other")
    shop.query("CREATE KNOWLEDGE_BASE hidden USING embedding_model = "
               "{'provider': 'kbsql', 'model_name': 'hash-64'}", {"db": "other"})
    shop.query(f"INSERT INTO hidden (id, content) VALUES (1, '{SECRET}')", {"db": "other"})
    script = [tools(("sql_db_list_tables", {})),
              tools(("kb_query_tool", {"query": "SELECT * FROM other.hidden"})),
              tools(("kb_info_tool", {"name": "other.hidden"})), text("done")]
    seen = ask_ollama(shop, "w", {"tables": ["shop.*"], "knowledge_bases": ["mindsdb.*"]}, script)
    assert seen[0] == "shop.prices, shop.salaries"
    assert seen[1].startswith("Error:") and seen[2].startswith("Error:")
    assert SECRET not in json.dumps(seen)


def test_long_results_are_summarised(shop: Engine, tmp_path: Path) -> None:
    shop.query("CREATE KNOWLEDGE_BASE big USING embedding_model = "
               "{'provider': 'kbsql', 'model_name': 'hash-64'}")
    values = ", ".join(f"({i}, 'row number {i}')" for i in range(45))
    shop.query(f"INSERT INTO big (id, content) VALUES {values}")
    with FakeLLM("anthropic", [tools(("kb_query_tool", {"query": "SELECT * FROM big"})),
                               text("done")], models=("m1",)) as fake:
        shop.create_agent("mindsdb", {"name": "b", "model": {
            "provider": "anthropic", "model_name": "m1", "base_url": fake.base_url},
            "data": {"knowledge_bases": ["big"]}})
        seen = observations(stream(shop, "b", "list all"))
    lines = seen[0].split("\n")
    assert lines[1] == "The query returned 45 rows; the first 30 are shown."
    assert lines[2] == "id,chunk_id,chunk_content,metadata,relevance,distance"
    assert len([ln for ln in lines[3:] if ln]) == 30


@pytest.mark.parametrize("query", [
    "SELECT * FROM a.t1 JOIN b.t2 ON 1 = 1",
    "SELECT * FROM a.t1 WHERE x IN (SELECT y FROM b.t2)",
    "SELECT (SELECT max(y) FROM b.t2) FROM a.t1",
    "SELECT * FROM a.t1 UNION ALL SELECT * FROM b.t2",
    "SELECT read_text('/etc/passwd') FROM a.t1",
    "SELECT 1",
    "DELETE FROM a.t1",
])
def test_check_read_refuses_every_unconnected_reference(query: str) -> None:
    with pytest.raises(Refused):
        check_read(query, {"a.t1"})


def test_check_read_allows_connected_tables() -> None:
    check_read("SELECT x, count(*) FROM a.t1 t JOIN a.t1 u ON t.x = u.x GROUP BY x", {"a.t1"})


def test_name_patterns_connect_what_they_match(shop: Engine) -> None:
    """MindsDB's executor test test_agent_permissions connects `"knowledge_bases": ["kb_show*"],
    "tables": ["files.show*"]`: the knowledge bases and tables the pattern matches (kbsql took
    each for one name, found none, and the agent was connected to nothing)."""
    for name in ("kb_show1", "`KB_Show2`", "kb_hide"):  # quoted, it keeps its case; patterns ignore case
        shop.query(f"CREATE KNOWLEDGE_BASE {name} USING embedding_model = "
                   "{'provider': 'kbsql', 'model_name': 'hash-64'}")
    shop.query("INSERT INTO kb_show1 (id, content) VALUES (1, 'Moon')")
    script = [tools(("kb_list_tool", {})), tools(("sql_db_list_tables", {})),
              tools(("kb_query_tool", {"query": "SELECT chunk_content FROM kb_show1"})),
              tools(("kb_query_tool", {"query": "SELECT * FROM kb_hide"})),
              tools(("sql_db_query", {"query": "SELECT * FROM shop.salaries"})), text("done")]
    seen = ask_ollama(shop, "p", {"knowledge_bases": ["kb_show*"], "tables": ["shop.pri?e*"]}, script)
    assert json.loads(seen[0]) == ["kb_show1", "KB_Show2"]
    assert seen[1] == "shop.prices"
    assert "Moon" in seen[2]
    assert seen[3].startswith("Error:") and seen[4].startswith("Error:") and SECRET not in seen[4]


def test_a_dotted_name_quoted_whole_is_read_as_its_parts(shop: Engine) -> None:
    """MindsDB's executor test test_agent_accept_wrong_quoting: a model writing
    ``SELECT * FROM `mindsdb.kb1` `` or `` `shop.prices` `` means the knowledge base and the
    table (kbsql looked for one table named "mindsdb.kb1" and answered "not found"); a name
    outside the agent's data is still refused."""
    shop.query("CREATE KNOWLEDGE_BASE kb1 USING embedding_model = "
               "{'provider': 'kbsql', 'model_name': 'hash-64'}")
    shop.query("INSERT INTO kb1 (id, content) VALUES (1001, 'Jupiter')")
    script = [tools(("kb_query_tool", {"query": "SELECT chunk_content FROM `mindsdb.kb1` WHERE id = '1001'"}),
                    ("sql_db_query", {"query": "SELECT price FROM `shop.prices` WHERE item = 'pump'"}),
                    ("sql_db_query", {"query": "SELECT * FROM `shop.salaries`"})), text("done")]
    seen = ask_ollama(shop, "q", {"knowledge_bases": ["kb1"], "tables": ["shop.prices"]}, script)
    assert "Jupiter" in seen[0] and "120" in seen[1]
    assert seen[2].startswith("Error:") and SECRET not in seen[2]


def test_a_schema_wildcard_connects_that_schema_s_tables(engine: Engine, tmp_path: Path) -> None:
    """MindsDB's executor test test_3_part_table connects `"tables": ["pg.public.*"]`: SHOW
    TABLES names the default schema's tables bare (`planets`) and others with their schema
    (`s2.moons`), so the pattern `public.*` matched none and the agent was connected to nothing."""
    path = tmp_path / "astro.duckdb"
    with duckdb.connect(str(path)) as db:
        db.execute("CREATE TABLE planets (id TEXT, name TEXT); INSERT INTO planets VALUES ('1000', 'Moon');"
                   "CREATE SCHEMA s2; CREATE TABLE s2.moons (name TEXT); INSERT INTO s2.moons VALUES ('Io')")
    engine.query(f"CREATE DATABASE astro WITH ENGINE = 'duckdb', PARAMETERS = {{'database': '{path}'}}")
    script = [tools(("sql_db_list_tables", {}),
                    ("sql_db_query", {"query": "SELECT name FROM astro.main.planets WHERE id = '1000'"}),
                    ("sql_db_query", {"query": "SELECT * FROM `astro.main`.`planets`"}),
                    ("sql_db_query", {"query": "SELECT name FROM astro.s2.moons"})), text("done")]
    seen = ask_ollama(engine, "astro_agent", {"tables": ["astro.main.*"]}, script)
    assert seen[0] == "astro.main.planets"
    assert "Moon" in seen[1] and "Moon" in seen[2]
    assert seen[3].startswith("Error:") and "Io" not in seen[3]
    engine.update_agent("mindsdb", "astro_agent", {"data": {"tables": ["astro.s2.*"]}})
    with FakeLLM("ollama", [tools(("sql_db_list_tables", {})), text("done")]) as fake:
        engine.update_agent("mindsdb", "astro_agent", {"model": {
            "provider": "ollama", "model_name": "m1", "base_url": fake.base_url}})
        assert observations(stream(engine, "astro_agent", "q"))[0] == "astro.s2.moons"
