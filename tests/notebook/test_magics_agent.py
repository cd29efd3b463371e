"""`%agent` / `%%agent`: live stream, the final answer returned, history per agent."""

from __future__ import annotations

import json

from kbsql.notebook.magics import KbSql
from tests.agents.fakes import FakeLLM, error_mid_stream, text


def _client(cells):
    magics = next(c for c in cells.shell.configurables if isinstance(c, KbSql))
    return magics.manager.get().client


def _questions(request: dict) -> str:
    return json.dumps(request["messages"])


def test_agent_answers_and_follow_ups_carry_the_conversation(cells):
    script = [text("Pumps move water."), text("Yes: the P-100."), text("Hello again.")]
    with FakeLLM("openai", script) as fake:
        _client(cells).agents.create("helper", model={
            "provider": "openai", "model_name": "m1", "api_key": "sk-test", "base_url": fake.base_url})
        result, out = cells.run("%agent helper What do pumps do?")
        assert result.success, out
        assert result.result == "Pumps move water."
        assert isinstance(result.result, str)
        assert "Pumps move water." in out  # rendered while streaming
        assert "What do pumps do?" in _questions(fake.requests[0])

        cells.ns["x"] = 1
        follow = cells.ok("%%agent helper\nWhich model\nshould I buy?")
        assert follow == "Yes: the P-100."
        sent = _questions(fake.requests[1])
        assert "What do pumps do?" in sent and "Pumps move water." in sent  # the history
        assert "Which model\\nshould I buy?" in sent

        cells.ok("%agent --new helper")
        assert cells.ok("%agent helper Hi") == "Hello again."
        assert "What do pumps do?" not in _questions(fake.requests[2])


def test_options_after_the_agent_name_are_options(cells):
    """`%agent helper --new Hi`, the order README's row reads in: --new starts over; the
    agent used to get "--new Hi" as the question, with the conversation kept."""
    script = [text("Pumps move water."), text("Hello again.")]
    with FakeLLM("openai", script) as fake:
        _client(cells).agents.create("helper", model={
            "provider": "openai", "model_name": "m1", "api_key": "sk-test", "base_url": fake.base_url})
        cells.ok("%agent helper What do pumps do?")
        assert cells.ok("%agent helper --new Hi") == "Hello again."
        sent = _questions(fake.requests[1])
        assert "What do pumps do?" not in sent and "--new" not in sent and "Hi" in sent


def test_a_mistyped_option_after_the_agent_name_is_refused(cells):
    """`%agent helper --nwe Hi` asked the agent "--nwe Hi" (and kept the conversation): a
    token of two dashes and a letter after AGENT is read as an option, an unknown one is a
    usage error; `--` before it sends it as words."""
    with FakeLLM("openai", [text("Verbose mode prints more.")]) as fake:
        _client(cells).agents.create("helper", model={
            "provider": "openai", "model_name": "m1", "api_key": "sk-test", "base_url": fake.base_url})
        result, out = cells.run("%agent helper --nwe Hi")
        assert not result.success and "Unknown option --nwe (see %agent?)" in out, out
        assert fake.requests == []  # nothing was asked
        assert cells.ok("%agent helper -- --verbose does what?") == "Verbose mode prints more."
        assert "--verbose does what?" in _questions(fake.requests[0])


def test_unknown_agent_is_a_short_error(cells):
    result, out = cells.run("%agent nobody hello?")
    assert not result.success
    assert "nobody" in out and "Traceback" not in out


def test_agent_with_the_offline_model_over_a_knowledge_base(cells):
    client = _client(cells)
    client.sql('CREATE KNOWLEDGE_BASE notes USING embedding_model = '
               '{"provider": "kbsql", "model_name": "hash-64"}')
    client.sql("INSERT INTO notes (id, content) VALUES (1, 'The boiler pressure is 2 bar.')")
    client.agents.create("offline", data={"knowledge_bases": ["mindsdb.notes"]})
    answer = cells.ok("%agent offline What is the boiler pressure?")
    assert "2 bar" in answer


def test_agent_needs_a_name(cells):
    result, out = cells.run("%agent")
    assert not result.success and "Name the agent" in out


def test_question_marks_are_questions_and_help_still_works(cells):
    with FakeLLM("openai", [text("Forty-two.")]) as fake:
        _client(cells).agents.create("deep", model={
            "provider": "openai", "model_name": "m1", "api_key": "sk-test", "base_url": fake.base_url})
        cells.ok("answer = %agent deep What is the meaning of life?")
        assert cells.ns["answer"] == "Forty-two."
        assert "What is the meaning of life?" in _questions(fake.requests[0])
    result, out = cells.run("%agent?")
    assert result.success and "--new" in out  # IPython's help for the magic itself


def test_an_error_in_the_stream_fails_the_cell_with_the_service_message(cells):
    with FakeLLM("openai", [error_mid_stream("model overloaded")]) as fake:
        _client(cells).agents.create("flaky", model={
            "provider": "openai", "model_name": "m1", "api_key": "sk-test", "base_url": fake.base_url})
        result, out = cells.run("%agent flaky Anything?")
    assert not result.success
    assert "model overloaded" in out and "Traceback" not in out
    assert "sk-test" not in out


def test_a_knowledge_bases_name_given_to_agent_names_the_agents(cells):
    """`%agent notes ...` with the knowledge base's name (a newcomer's mistake) said only 'Agent
    with name notes does not exist': no near name, so no hint. It now lists the project's
    agents, or says there are none and how to make one."""
    client = _client(cells)
    client.sql('CREATE KNOWLEDGE_BASE notes USING embedding_model = '
               '{"provider": "kbsql", "model_name": "hash-64"}')
    result, out = cells.run("%agent notes what is the pressure?")
    assert not result.success
    assert ("Agent with name notes does not exist (project mindsdb has no agents: CREATE AGENT notes "
            "USING data = ...)") in out, out
    client.agents.create("helper", data={"knowledge_bases": ["mindsdb.notes"]})
    result, out = cells.run("%agent notes what is the pressure?")
    assert "Agent with name notes does not exist (the agents of project mindsdb: helper)" in out, out
    result, out = cells.run("%agent helpr what is the pressure?")  # a near name keeps its hint
    assert "(did you mean 'helper'?)" in out and "the agents of" not in out, out
