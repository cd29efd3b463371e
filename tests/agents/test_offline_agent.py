"""The offline retrieval agent (default model) over a real `kbsql serve`: same stream shape
as a language model, extractive answers citing chunk ids, tables when no KB is connected."""

from __future__ import annotations

from pathlib import Path

import duckdb
import httpx

from tests.agents.streams import agent_url, check_shape, create_agent, raw_stream, sql

DOCS = [
    (1, "The pump P-100 runs at 3000 rpm. It needs oil every month.", "pump"),
    (2, "The valve V-7 closes in two seconds. Check the seal every year.", "valve"),
    (3, "Our office is open from nine to five on weekdays.", "office"),
]


def make_kb(base: str, name: str = "manuals") -> None:
    assert sql(base, f"CREATE KNOWLEDGE_BASE {name} USING embedding_model = "
                     "{'provider': 'kbsql', 'model_name': 'hash-256'}, "
                     "metadata_columns = ['product']")["type"] == "ok"
    values = ", ".join(f"({i}, '{t}', '{p}')" for i, t, p in DOCS)
    assert sql(base, f"INSERT INTO {name} (id, content, product) VALUES {values}")["type"] == "ok"


def test_offline_agent_streams_like_a_model(server_url: str) -> None:
    make_kb(server_url)
    created = create_agent(server_url, {"name": "helper",
                                        "data": {"knowledge_bases": ["mindsdb.manuals"]}})
    assert created.status_code == 201
    assert created.json()["model"]["provider"] == "kbsql"  # the default model, no key needed
    question = "How fast does the pump run?"
    chunks = raw_stream(agent_url(server_url, "helper"), {"messages": [{"question": question,
                                                                         "answer": ""}]})
    kinds = check_shape(chunks, question)
    assert kinds == ["start", "actions", "steps", "actions", "steps", "output", "end"]
    assert chunks[1]["actions"][0]["tool"] == "kb_list_tool"
    assert chunks[2]["steps"][0]["observation"] == '["manuals"]'
    query = chunks[3]["actions"][0]
    assert query["tool"] == "kb_query_tool"
    assert query["tool_input"] == f"SELECT * FROM manuals WHERE content = '{question}' LIMIT 20"
    observation = chunks[4]["steps"][0]["observation"]
    assert observation.startswith("Output columns: 'id', 'chunk_id', 'chunk_content', 'metadata'")
    assert "_updated_at" in observation and "_chunk_index" in observation
    assert '""product"": ""pump""' in observation  # user metadata keeps its own name
    output = chunks[5]["output"]
    assert "3000 rpm" in output and "1:content:1of1:0to" in output
    assert "office" not in output


def test_offline_answer_non_stream_and_quoted_question(server_url: str) -> None:
    make_kb(server_url)
    create_agent(server_url, {"name": "helper", "data": {"knowledge_bases": ["mindsdb.*"]}})
    question = "What's the valve's \"closing\" time? \\ '; DROP KNOWLEDGE_BASE manuals; --"
    response = httpx.post(agent_url(server_url, "helper", stream=False),
                          json={"messages": [{"question": question, "answer": ""}]}, timeout=60)
    assert response.status_code == 200
    message = response.json()["message"]
    assert message["role"] == "assistant" and message["trace_id"]
    assert "two seconds" in message["content"] and "2:content:1of1:0to" in message["content"]
    # the question went in as a quoted literal: the knowledge base is still there
    assert len(sql(server_url, "SELECT * FROM manuals")["data"]) == 3


def test_offline_agent_reads_connected_tables(server_url: str, tmp_path: Path) -> None:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as db:
        db.execute("CREATE TABLE prices (item TEXT, price INT); INSERT INTO prices VALUES ('pump', 120)")
        db.execute("CREATE TABLE salaries (who TEXT, pay INT); INSERT INTO salaries VALUES ('ceo', 999999)")
    assert sql(server_url, f"CREATE DATABASE shop WITH ENGINE = 'duckdb', "
                           f"PARAMETERS = {{'database': '{path}'}}")["type"] == "ok"
    create_agent(server_url, {"name": "clerk", "data": {"tables": ["shop.prices"]}})
    chunks = raw_stream(agent_url(server_url, "clerk"), {"messages": [{"question": "pump price?"}]})
    kinds = check_shape(chunks, "pump price?")
    assert kinds == ["start", "actions", "steps", "actions", "steps", "output", "end"]
    assert chunks[2]["steps"][0]["observation"] == "shop.prices"
    assert chunks[3]["actions"][0]["tool"] == "sql_db_query"
    assert "pump,120" in chunks[4]["steps"][0]["observation"]
    assert "120" in chunks[5]["output"]
    assert "999999" not in str(chunks)


def test_the_search_text_reads_back_exactly() -> None:
    """The offline agent quotes its search with the one quoter: the parser reads back the
    question itself (backslashes and inner quotes kept), not an approximation of it."""
    from mindsdb_sql_parser import parse_sql

    from kbsql.engine.models.chat.offline import search_sql

    for question in ["What's the valve's \"closing\" time?", "C:\\pumps\\p100 'x'", "ends with \\",
                     "'quoted'", "\"both' kinds\"", "a \\' b"]:
        where = parse_sql(search_sql("manuals", question)).where
        assert where.args[1].value == question.strip().strip("'\"").strip(), question
