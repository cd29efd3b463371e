"""docs/mindsdb_sql/agents/{agent_syntax,agent,chatbot}.mdx and docs/rest/agents/update.mdx
(mindsdb/mindsdb): the agent statements, embedded and over HTTP. The hosted model is a
scripted OpenAI-compatible server on loopback (`tests.agents.fakes`)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.agents.fakes import FakeLLM, text
from tests.dialect.conftest import HASH, Doc

SYNTAX = "docs/mindsdb_sql/agents/agent_syntax.mdx"
OFFLINE = '{"provider": "kbsql", "model_name": "retrieval"}'


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM("openai", [], models=("gpt-4o", "gpt-4.1")) as fake:
        yield fake


def _model(llm: FakeLLM, name: str = "gpt-4o") -> str:
    return json.dumps({"provider": "openai", "model_name": name, "api_key": "sk-abc123",
                       "base_url": llm.base_url})


def _sales_kb(doc: Doc) -> None:
    doc.sql(f"CREATE KNOWLEDGE_BASE sales_kb USING embedding_model = {HASH}")
    doc.sql("INSERT INTO sales_kb (id, content) VALUES (1, 'Refunds take 5 days'), (2, 'Shipping is free')")


def test_create_show_select_drop(doc: Doc, llm: FakeLLM) -> None:
    """agent_syntax.mdx: CREATE AGENT (model, data, prompt_template, timeout, mode); SHOW AGENTS
    WHERE name = ...; SELECT answer FROM my_agent WHERE question = ...; DROP AGENT."""
    _sales_kb(doc)
    llm.script.append(text("Refunds take 5 days."))
    doc.sql(f"CREATE AGENT my_agent USING model = {_model(llm)}, data = {{\"knowledge_bases\": "
            f"[\"{doc.project}.sales_kb\"], \"tables\": []}}, prompt_template = 'describe data', "
            "timeout = 10, mode = 'text';")
    shown = doc.rows("SHOW AGENTS WHERE name = 'my_agent';")
    assert [r["NAME"] for r in shown] == ["my_agent"]
    assert "sk-abc123" not in json.dumps(shown)
    rows = doc.rows("SELECT answer FROM my_agent WHERE question = 'How long do refunds take?';")
    assert rows == [{"answer": "Refunds take 5 days."}]
    doc.sql("DROP AGENT my_agent;")
    assert doc.rows("SHOW AGENTS WHERE name = 'my_agent'") == []


def test_custom_output_columns(doc: Doc, llm: FakeLLM) -> None:
    """agent_syntax.mdx / agent.mdx: `SELECT customer_name, avg_number_of_orders FROM my_agent
    WHERE question = ...` answers rows with those columns."""
    doc.sql(f"CREATE AGENT my_agent USING model = {_model(llm)}")
    llm.script.append(text('[{"customer_name": "Ann", "avg_number_of_orders": 2.5}, '
                           '{"customer_name": "Bob", "avg_number_of_orders": 1}]'))
    rows = doc.rows("SELECT customer_name, avg_number_of_orders FROM my_agent "
                    "WHERE question = 'What is the average number of orders per customers?';")
    assert rows == [{"customer_name": "Ann", "avg_number_of_orders": 2.5},
                    {"customer_name": "Bob", "avg_number_of_orders": 1}]
    llm.script.append(text("I do not know."))
    message = doc.error("SELECT customer_name FROM my_agent WHERE question = 'who?'")
    assert "customer_name" in message
    doc.sql(f"CREATE AGENT offline_agent USING model = {OFFLINE}")
    doc.refused("SELECT customer_name FROM offline_agent WHERE question = 'who?'", "columns")


def test_custom_output_columns_are_validated_whole(doc: Doc, llm: FakeLLM) -> None:
    """The model's rows are checked before any is returned: JSON found inside prose or a fence,
    aliases and `question` beside the columns; a row missing a column, a cell holding a list,
    or `answer` mixed with custom columns is one clear error, never a half-filled table."""
    doc.sql(f"CREATE AGENT shaped USING model = {_model(llm)}")
    ask = "FROM shaped WHERE question = 'Orders per customer?'"
    llm.script.append(text('Totals [approx]:\n```json\n[{"Customer_Name": "Ann", "orders": 3}]\n```'))
    rows = doc.rows(f"SELECT question, customer_name AS who, orders {ask}")
    assert rows == [{"question": "Orders per customer?", "who": "Ann", "orders": 3}]
    assert "customer_name" in llm.requests[-1]["messages"][-1]["content"]  # the columns were asked for
    llm.script.append(text('[{"customer_name": "Ann", "orders": 3}, {"customer_name": "Bob"}]'))
    message = doc.error(f"SELECT customer_name, orders {ask}")
    assert "orders" in message and "row 2" in message
    llm.script.append(text('[{"customer_name": "Ann", "orders": [1, 2]}]'))
    assert "orders" in doc.error(f"SELECT customer_name, orders {ask}")
    llm.script.append(text("[]"))
    assert doc.rows(f"SELECT customer_name, orders {ask}") == []
    calls = llm.chat_calls
    assert "answer" in doc.error(f"SELECT answer, customer_name {ask}")
    assert llm.chat_calls == calls  # refused before asking the model


def test_select_using_overrides(doc: Doc, llm: FakeLLM) -> None:
    """agent_syntax.mdx: SELECT answer FROM my_agent WHERE question = ... USING model = {...},
    data = {...}, prompt_template = '...', timeout = 10 (this question only)."""
    _sales_kb(doc)
    doc.sql(f"CREATE AGENT my_agent USING model = {OFFLINE}")
    llm.script.append(text("From gpt-4.1"))
    rows = doc.rows(f"SELECT answer FROM my_agent WHERE question = 'What is the average?' "
                    f"USING model = {_model(llm, 'gpt-4.1')}, data = {{\"knowledge_bases\": "
                    f"[\"{doc.project}.sales_kb\"], \"tables\": []}}, prompt_template = 'describe data', "
                    "timeout = 10;")
    assert rows == [{"answer": "From gpt-4.1"}]
    assert llm.requests[-1]["model"] == "gpt-4.1"
    stored = doc.rows("SHOW AGENTS WHERE name = 'my_agent'")[0]
    assert "kbsql" in stored["MODEL"]  # nothing was saved


def test_alter_agent(doc: Doc, llm: FakeLLM) -> None:
    """agent_syntax.mdx: ALTER AGENT with model, data, prompt_template (all, or one at a time)."""
    _sales_kb(doc)
    doc.sql(f"CREATE AGENT my_agent USING model = {OFFLINE}")
    doc.sql(f"ALTER AGENT my_agent USING data = {{\"knowledge_bases\": [\"{doc.project}.sales_kb\"], "
            "\"tables\": []};")
    doc.sql("ALTER AGENT my_agent USING prompt_template = 'describe data';")
    doc.sql(f"ALTER AGENT my_agent USING model = {_model(llm, 'gpt-4.1')};")
    row = doc.rows("SHOW AGENTS WHERE name = 'my_agent'")[0]
    assert json.loads(row["DATA"])["knowledge_bases"] == [f"{doc.project}.sales_kb"]
    assert row["PROMPT_TEMPLATE"] == "describe data" and "gpt-4.1" in row["MODEL"]
    assert "nope" in doc.error("ALTER AGENT my_agent USING nope = 1")
    assert "ghost" in doc.error("ALTER AGENT ghost USING prompt_template = 'x'")


def test_chatbots_are_refused(doc: Doc) -> None:
    """chatbot.mdx: CREATE / SHOW / UPDATE / DROP CHATBOT need a hosted chat integration."""
    for statement in ("CREATE CHATBOT my_chatbot USING database = 'my_slack', agent = 'my_agent', "
                      "is_running = true;", "SHOW CHATBOTS;",
                      "UPDATE CHATBOT my_chatbot SET is_running = true;", "DROP CHATBOT my_chatbot;"):
        doc.refused(statement, "chatbot")


def test_rest_update_model_of_an_unreachable_provider(doc: Doc) -> None:
    """rest/agents/update.mdx: updating only the model answers 200 with the new model and keeps
    the rest; an unreachable provider is reported when the agent runs."""
    agent = doc.client.agents.create("rest_agent", data={"knowledge_bases": [], "tables": []},
                                     prompt_template="original", project=doc.project)
    assert agent.prompt_template == "original"
    model = {"provider": "openai", "model_name": "gpt-4.1", "api_key": "sk-xxx",
             "base_url": "http://127.0.0.1:9/v1"}
    updated = doc.client.agents.update("rest_agent", model=model, project=doc.project)
    assert updated.model.model_name == "gpt-4.1" and updated.prompt_template == "original"
    with pytest.raises(Exception) as exc:
        doc.client.agents.completion("rest_agent", "hi", project=doc.project)
    assert "gpt-4.1" in str(exc.value) or "127.0.0.1:9" in str(exc.value)


def test_a_provider_the_engine_lacks_is_refused_in_one_line(doc: Doc) -> None:
    """agent_syntax.mdx: `USING model = {"provider": "google", ...}` names a hosted provider."""
    doc.sql(f"CREATE AGENT my_agent USING model = {OFFLINE}")
    message = doc.refused("SELECT answer FROM my_agent WHERE question = 'hi' USING model = "
                          "{\"provider\": \"google\", \"model_name\": \"gemini-2.5-flash\", "
                          "\"api_key\": \"ABc123\"};", "google")
    assert "ABc123" not in message


def test_model_calls_are_rows_of_log_llm_log_without_api_keys(doc: Doc, llm: FakeLLM) -> None:
    """MindsDB's `log.llm_log` (mindsdb/interfaces/database/log.py, LLMLogTable): one row per
    model call an agent makes, in its columns, readable with SELECT ... WHERE; the API key
    is never shown, not even where the model echoed it."""
    doc.sql(f"CREATE AGENT logged_agent USING model = {_model(llm)}")
    llm.script.append(text("Your key sk-abc123 works; refunds take 5 days."))
    doc.rows("SELECT answer FROM logged_agent WHERE question = 'How long do llm_log refunds take?'")
    assert [r["Tables_in_log"] for r in doc.rows("SHOW TABLES FROM log")] == ["llm_log", "jobs_history"]
    columns = doc.columns("SELECT * FROM log.llm_log LIMIT 0")
    assert columns == ["API_KEY", "MODEL_NAME", "INPUT", "OUTPUT", "START_TIME", "END_TIME", "PROMPT_TOKENS",
                       "COMPLETION_TOKENS", "TOTAL_TOKENS", "SUCCESS"]
    rows = doc.rows("SELECT * FROM log.llm_log WHERE model_name = 'openai/gpt-4o' "
                    "AND input LIKE '%llm_log refunds%' ORDER BY start_time")
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["SUCCESS"] is True and row["API_KEY"] is None and row["END_TIME"] >= row["START_TIME"]
    assert "refunds take 5 days" in row["OUTPUT"] and "sk-abc123" not in json.dumps(rows, default=str)
    assert "How long do llm_log refunds take?" in json.loads(row["INPUT"])["messages"][-1]["content"]
    assert "known: llm_log, jobs_history" in doc.error("SELECT * FROM log.job_history")
    doc.sql("DROP AGENT logged_agent")


def test_a_hosted_model_without_a_key_is_one_line_before_any_call(doc: Doc, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """An OpenAI or Anthropic model at the service's own URL with no api_key (and no
    OPENAI_API_KEY / ANTHROPIC_API_KEY where the engine runs) is refused at CREATE, naming the
    key; it went out first and answered "could not be reached" (or, online, the service's 401)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for statement, variable in (
            ("CREATE KNOWLEDGE_BASE nokey_kb USING embedding_model = "
             "{'provider': 'openai', 'model_name': 'text-embedding-3-small'}", "OPENAI_API_KEY"),
            ("CREATE AGENT nokey_agent USING model = {'provider': 'openai', 'model_name': 'gpt-4o'}",
             "OPENAI_API_KEY"),
            ("CREATE AGENT nokey_agent USING model = {'provider': 'anthropic', 'model_name': 'claude-3-5'}",
             "ANTHROPIC_API_KEY")):
        message = doc.error(statement)
        assert "'api_key' is required" in message and variable in message, message
        assert "reached" not in message
    assert doc.rows("SHOW AGENTS WHERE name = 'nokey_agent'") == []
