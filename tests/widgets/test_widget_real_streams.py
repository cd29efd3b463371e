"""Real completion streams from the offline agent (embedded engine and `kbsql serve`, via the
shared `client` fixture) fed into the panel, the chat and the browser."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

import pytest

import kbsql
from kbsql.interface.stream import chunk_kind
from kbsql.notebook.widgets import AgentStreamPanel, ChatWidget, show_agent_stream
from kbsql.notebook.widgets.browser import KnowledgeBaseBrowser
from kbsql.notebook.widgets.state import parse_observation
from tests.conftest import start_server, stop_server

DOCS = [
    {"id": "1", "content": "Refunds are accepted within 30 days of purchase with a receipt."},
    {"id": "2", "content": "Shipping takes five business days inside the country."},
    {"id": "3", "content": "Support is open Monday to Friday from 9 to 17."},
]
QUESTION = "What is the refund policy?"


@pytest.fixture
def support(client) -> Any:
    """A knowledge base `docs` and the offline agent `support` (default model) over it."""
    client.knowledge_bases.create("docs")
    client.knowledge_bases.insert("docs", DOCS)
    client.agents.create("support", data={"knowledge_bases": ["mindsdb.docs"]},
                         prompt_template="Answers questions about the shop's documents.")
    return client


def test_panel_state_follows_a_real_stream_chunk_by_chunk(support):
    panel = AgentStreamPanel(question=QUESTION, agent="support", min_interval=0)
    kinds = []
    for chunk in support.agents.stream("support", QUESTION):
        kind = panel.feed(chunk)
        kinds.append(kind)
        state = panel.state
        titles = [acc.get_title(0).split(" · ")[0] for acc in panel.steps_box.children]
        if kind == "start":
            assert state.trace_id == chunk["trace_id"] and chunk["trace_id"] in panel.header.value
            assert state.status == "running"
        elif kind == "actions":
            act = chunk["actions"][-1]
            step = state.steps[-1]
            assert (step.tool, step.tool_input, step.observation) == (act["tool"], act["tool_input"], None)
            assert titles[-1] == f"{len(state.steps)}. {act['tool']} …"
        elif kind == "steps":
            item = chunk["steps"][-1]
            step = next(st for st in state.steps if st.tool_input == item["action"]["tool_input"]
                        and st.tool == item["action"]["tool"])
            assert step.observation == item["observation"]
            index = state.steps.index(step)
            assert titles[index] == f"{index + 1}. {step.tool} ✓"
            body = panel.steps_box.children[index].children[0].value
            table = parse_observation(item["observation"])
            if table is None:
                assert escape(item["observation"].strip()) in body
            else:
                assert "<table" in body and f"{table.row_count} row" in body
        elif kind == "output":
            assert state.answer == chunk["output"]
            assert panel.answer.value  # rendered Markdown
        elif kind == "end":
            assert state.status == "done" and 'data-status="done"' in panel.status.value
    assert kinds[0] == "start" and kinds[-1] == "end" and "output" in kinds
    tools = [st.tool for st in panel.state.steps]
    assert tools[:2] == ["kb_list_tool", "kb_query_tool"]
    assert "docs" in panel.state.steps[0].observation
    assert "SELECT" in panel.state.steps[1].tool_input.upper() and "docs" in panel.state.steps[1].tool_input
    assert all(st.finished for st in panel.state.steps)
    table = parse_observation(panel.state.steps[1].observation)
    assert table is not None and "chunk_content" in table.columns
    contents = [row[table.columns.index("chunk_content")] for row in table.rows]
    assert contents[0] == DOCS[0]["content"]  # the refund document ranks first
    assert "Refunds are accepted" in panel.state.answer
    assert "Refunds are accepted" in panel.answer.value


def test_show_agent_stream_returns_the_agents_answer(support, capsys):
    expected = support.agents.completion("support", QUESTION)
    answer = show_agent_stream(support.agents.stream("support", QUESTION), question=QUESTION,
                               agent="support", mode="text")
    assert answer == expected and answer
    out = capsys.readouterr().out
    assert "1. kb_list_tool" in out and "2. kb_query_tool" in out and "[done in" in out


def test_chat_on_a_real_agent_keeps_the_conversation(support):
    chat = ChatWidget(support, "support", min_interval=0)
    first = chat.send(QUESTION, block=True)
    second = chat.send("How long does shipping take?", block=True)
    assert first.panel.state.status == "done" and second.panel.state.status == "done"
    assert first.answer and second.answer
    assert second.panel.state.question == "How long does shipping take?"
    assert chat.history == [{"question": QUESTION, "answer": first.answer},
                            {"question": "How long does shipping take?", "answer": second.answer}]


def test_stopping_a_real_stream_closes_it(support):
    stream = support.agents.stream("support", QUESTION)
    panel = AgentStreamPanel(min_interval=0)
    for chunk in stream:
        panel.feed(chunk)
        if chunk_kind(chunk) == "actions":
            panel.stop()
            stream.close()
            break
    assert panel.state.status == "stopped" and panel.state.answer is None
    assert len(panel.state.steps) == 1 and not panel.state.steps[0].finished
    # the connection is still usable after the early close
    assert support.agents.completion("support", QUESTION)


def test_browser_lists_and_searches(support):
    browser = KnowledgeBaseBrowser(support)
    assert browser.kb_list.options == ("docs",)
    assert browser.agent_list.options == ("support",)
    assert browser.kb_list.value == "docs"
    assert "content columns" in browser.details.value and "docs" in browser.details.value
    assert "sample chunks" in browser.sample.value and "3 rows" in browser.sample.value
    assert all(doc["content"] in browser.sample.value for doc in DOCS)
    browser.search("how long does shipping take")
    results = browser.results.value
    assert "results for" in results
    assert results.index("Shipping takes five") < results.index("Refunds are accepted")
    browser.agent_list.value = "support"
    assert "agent support" in browser.details.value and "mindsdb.docs" in browser.details.value


@pytest.fixture(params=["embedded", "http"])
def hurried_client(request, tmp_path: Path):
    """A client whose engine gives agents no time at all (config.json), so runs fail for real."""
    data_dir = tmp_path / "hurried"
    data_dir.mkdir()
    (data_dir / "config.json").write_text(json.dumps({"agent_wall_time_s": 1e-6}))
    if request.param == "embedded":
        client = kbsql.connect(data_dir=data_dir)
        yield client
        client.close()
        return
    proc, url = start_server(data_dir)
    client = kbsql.connect(url)
    yield client
    client.close()
    stop_server(proc)


def test_a_real_error_chunk_shows_as_failed(hurried_client):
    hurried_client.knowledge_bases.create("docs")
    hurried_client.knowledge_bases.insert("docs", DOCS)
    hurried_client.agents.create("support", data={"knowledge_bases": ["mindsdb.docs"]})
    panel = AgentStreamPanel(question=QUESTION, min_interval=0)
    kinds = [panel.feed(chunk) for chunk in hurried_client.agents.stream("support", QUESTION)]
    assert "error" in kinds
    assert panel.state.status == "failed" and panel.state.answer is None
    assert "time limit" in panel.state.error
    assert 'data-status="failed"' in panel.status.value and "time limit" in panel.status.value
