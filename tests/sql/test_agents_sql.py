"""Agents in SQL: CREATE AGENT, SHOW AGENTS, asking with SELECT, DROP AGENT."""

from __future__ import annotations

import json

from kbsql.engine import Engine
from tests.datasources.makers import ok, rows


def test_agent_lifecycle_and_question(engine: Engine) -> None:
    ok(engine, "CREATE KNOWLEDGE_BASE facts USING content_columns = ['body']")
    ok(engine, "INSERT INTO facts (id, body) VALUES (1, 'The capital of France is Paris'), "
               "(2, 'Cats sleep for most of the day')")
    ok(engine, "CREATE AGENT helper USING data = {'knowledge_bases': ['mindsdb.facts']}, "
               "prompt_template = 'Answer from the facts knowledge base'")
    agent = engine.get_agent("mindsdb", "helper")
    assert agent.data["knowledge_bases"] == ["mindsdb.facts"]
    shown = ok(engine, "SHOW AGENTS")
    assert shown.column_names[:2] == ["NAME", "PROJECT"] and shown.data[0][:2] == ["helper", "mindsdb"]
    answer = rows(engine, "SELECT answer FROM helper WHERE question = 'What is the capital of France?'")
    assert len(answer) == 1 and "Paris" in answer[0][0]
    both = rows(engine, "SELECT question, answer FROM mindsdb.helper WHERE question = 'Do cats sleep?'")
    assert both[0][0] == "Do cats sleep?" and "Cats sleep" in both[0][1]
    missing = engine.query("SELECT answer FROM helper", {})
    assert missing.type == "error" and "WHERE question = '...'" in missing.error_message
    ok(engine, "DROP AGENT helper")
    assert "Agent with name helper does not exist" in engine.query("DROP AGENT helper").error_message
    ok(engine, "DROP AGENT IF EXISTS helper")
    assert rows(engine, "SHOW AGENTS") == []


def test_agent_with_unreachable_model_is_not_created(engine: Engine) -> None:
    result = engine.query("CREATE AGENT a USING model = 'gpt-x', provider = 'openai', "
                          "api_key = 'sk-hidden', base_url = 'http://127.0.0.1:1/v1'")
    assert result.type == "error" and "gpt-x" in result.error_message
    assert "sk-hidden" not in result.error_message
    assert rows(engine, "SHOW AGENTS") == []


def test_show_agents_masks_keys(engine: Engine) -> None:
    engine.catalog.create_agent("mindsdb", "keyed", {"provider": "kbsql", "model_name": "retrieval",
                                                     "api_key": "sk-very-secret"}, {}, None)
    shown = rows(engine, "SHOW AGENTS")
    assert json.loads(shown[0][2])["api_key"] == "******"
    assert "sk-very-secret" not in json.dumps(shown)
