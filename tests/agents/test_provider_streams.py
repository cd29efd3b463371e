"""Each provider against a scripted fake server of its wire format, through the raw HTTP
stream of a real `kbsql serve`: streamed tool calls, observations fed back, answers, and a
provider error mid-stream."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

import kbsql
from tests.agents.fakes import FakeLLM, error_mid_stream, text, tools
from tests.agents.streams import agent_url, answer_of, check_shape, collapse, create_agent, raw_stream
from tests.conftest import start_server, stop_server

WIRES = ["openai", "anthropic", "ollama"]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `kbsql serve` for the module (agent names differ per test): saves a start per test."""
    proc, url = start_server(tmp_path_factory.mktemp("agents-server"))
    yield url
    stop_server(proc)


def model(fake: FakeLLM, name: str = "m1") -> dict[str, str]:
    return {"provider": fake.wire, "model_name": name, "api_key": "sk-test-123",
            "base_url": fake.base_url}


def tool_results(fake: FakeLLM, request: int) -> list[str]:
    """The tool observations the agent sent back in a chat request, whatever the wire."""
    out = []
    for m in fake.requests[request]["messages"]:
        if m.get("role") == "tool":
            out.append(m["content"])
        if isinstance(m.get("content"), list):
            out += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return out


def system_text(fake: FakeLLM, request: int) -> str:
    body = fake.requests[request]
    return body.get("system") or body["messages"][0]["content"]


@pytest.mark.parametrize("wire", WIRES)
def test_streamed_tool_calls_answer(server_url: str, wire: str) -> None:
    script = [tools(("kb_list_tool", {})),
              tools(("kb_query_tool", {"query": "SELECT * FROM secret_kb WHERE content = 'x'"})),
              text("Nothing connected yet, sorry.")]
    with FakeLLM(wire, script) as fake:
        assert create_agent(server_url, {
            "name": f"a1{wire}", "model": model(fake), "prompt_template": "You answer about pumps.",
            "data": {"knowledge_bases": ["mindsdb.*"]}}).status_code == 201
        chunks = raw_stream(agent_url(server_url, f"a1{wire}"),
                            {"messages": [{"question": "hi", "answer": "hello"},
                                          {"question": "Which pump?", "answer": ""}]})
        kinds = check_shape(chunks, "Which pump?")
        # the answer's tokens leave as partial output chunks, as the model sends them
        assert collapse(kinds) == ["start", "actions", "steps", "actions", "steps", "output", "end"]
        assert kinds.count("output") == 5 and [c["output"] for c in chunks[5:7]] == ["Nothing", " connec"]
        assert chunks[1]["actions"][0]["tool"] == "kb_list_tool"
        assert chunks[1]["actions"][0]["tool_input"] == ""
        assert chunks[2]["steps"][0]["observation"] == "[]"
        # the argument JSON arrived in pieces and was reassembled into the SQL text
        assert chunks[3]["actions"][0]["tool_input"] == "SELECT * FROM secret_kb WHERE content = 'x'"
        assert "not allowed" in chunks[4]["steps"][0]["observation"]
        assert answer_of(chunks) == "Nothing connected yet, sorry."
        assert fake.chat_calls == 3
        assert tool_results(fake, 1) == ["[]"]
        assert "not allowed" in tool_results(fake, 2)[-1]
        system = system_text(fake, 0)
        assert "kb_query_tool" in system and "You answer about pumps." in system
        # history: the earlier question/answer pair comes before the question asked now
        texts = [m["content"] for m in fake.requests[0]["messages"] if isinstance(m["content"], str)]
        assert texts[-3:] == ["hi", "hello", "Which pump?"]
        sent = fake.headers[0]
        assert "sk-test-123" in (sent.get("Authorization", "") + sent.get("x-api-key", "")) \
            or wire == "ollama"


@pytest.mark.parametrize("wire", WIRES)
def test_provider_error_mid_stream(server_url: str, wire: str) -> None:
    with FakeLLM(wire, [tools(("kb_list_tool", {})), error_mid_stream("model overloaded")]) as fake:
        assert create_agent(server_url, {"name": f"a2{wire}", "model": model(fake),
                                         "data": {"knowledge_bases": ["mindsdb.*"]}}).status_code == 201
        chunks = raw_stream(agent_url(server_url, f"a2{wire}"), {"messages": [{"question": "q?"}]})
        kinds = check_shape(chunks, "q?")
        # the words that arrived before the error went out; the error ends the stream
        assert kinds == ["start", "actions", "steps", "output", "error", "end"]
        assert chunks[3]["output"] == "Let me"
        assert "model overloaded" in chunks[4]["content"]
        assert wire in chunks[4]["content"] and "m1" in chunks[4]["content"]
        assert "sk-test-123" not in json.dumps(chunks)


@pytest.mark.parametrize("wire", WIRES)
def test_non_stream_completion_shape(server_url: str, wire: str) -> None:
    with FakeLLM(wire, [tools(("kb_list_tool", {})), text("Forty-two.")]) as fake:
        create_agent(server_url, {"name": f"a3{wire}", "model": model(fake),
                                  "data": {"knowledge_bases": ["mindsdb.*"]}})
        response = httpx.post(agent_url(server_url, f"a3{wire}", stream=False),
                              json={"messages": [{"role": "user", "content": "meaning?"}]},
                              timeout=30)
        assert response.status_code == 200
        body = response.json()
        assert set(body) == {"message"}
        assert set(body["message"]) == {"content", "role", "trace_id"}
        assert body["message"]["content"] == "Forty-two."
        assert body["message"]["role"] == "assistant" and body["message"]["trace_id"]


@pytest.mark.parametrize("wire", WIRES)
def test_unreachable_or_unknown_model_is_refused_at_create(server_url: str, wire: str) -> None:
    with FakeLLM(wire, []) as fake:
        response = create_agent(server_url, {"name": f"bad{wire}", "model": model(fake, "no-such-model")})
        assert response.status_code == 400
        detail = response.json()["detail"]
        assert wire in detail and "no-such-model" in detail
        assert "sk-test-123" not in detail
        dead = {**model(fake), "base_url": "http://127.0.0.1:9"}
    response = create_agent(server_url, {"name": f"bad{wire}", "model": dead})
    assert response.status_code == 400 and wire in response.json()["detail"]
    assert httpx.get(f"{server_url}/api/projects/mindsdb/agents/bad{wire}").status_code == 404


@pytest.mark.parametrize("wire", WIRES)
def test_tokens_reach_the_http_client_before_the_model_ends(server_url: str, wire: str) -> None:
    """A model writing slowly: its first words reach `client.agents.stream` over HTTP while it
    is still writing, not all at once after it finished."""
    answer = "Pump 4321 needs new oil every ninety days, says the manual."
    with FakeLLM(wire, [text(answer)], delay=0.05) as fake:
        assert create_agent(server_url, {"name": f"slow{wire}", "model": model(fake)}).status_code == 201
        client = kbsql.connect(server_url, progress=None)
        try:
            chunks, finished_then = [], []
            for chunk in client.agents.stream(f"slow{wire}", "How often?"):
                chunks.append(chunk)
                if "output" in chunk:
                    finished_then.append(fake.finished_streams)
        finally:
            client.close()
        assert finished_then[0] == 0 and len(finished_then) > 3  # tokens while the model wrote
        assert answer_of(chunks) == answer
