"""Runtime rules: default model from configuration, model checks at create/update, message
validation, no model work before the stream is iterated, bounded iterations and time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbsql.engine import Engine
from kbsql.interface.errors import BadRequest, ProviderError
from tests.agents.fakes import FakeLLM, text, tools
from tests.agents.streams import answer_of, collapse, kind


def test_default_model_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeLLM("openai", [text("from the configured model")]) as fake:
        monkeypatch.setenv("KBSQL_DEFAULT_MODEL_PROVIDER", "openai")
        monkeypatch.setenv("KBSQL_DEFAULT_MODEL_NAME", "m2")
        monkeypatch.setenv("KBSQL_DEFAULT_MODEL_BASE_URL", fake.base_url)
        with Engine(tmp_path / "env") as engine:
            created = engine.create_agent("mindsdb", {"name": "a"})
            assert created.model.provider == "openai" and created.model.model_name == "m2"
            answer = engine.complete("mindsdb", "a", [{"question": "hi"}])
        assert answer["message"]["content"] == "from the configured model"
        assert fake.requests[0]["model"] == "m2"


def test_default_model_from_config_file(tmp_path: Path) -> None:
    with FakeLLM("ollama", [text("ollama says hi")]) as fake:
        data = tmp_path / "cfg"
        data.mkdir()
        (data / "config.json").write_text(json.dumps({"default_model": {
            "provider": "ollama", "model_name": "m1", "base_url": fake.base_url}}))
        with Engine(data) as engine:
            engine.create_agent("mindsdb", {"name": "a"})
            assert engine.complete("mindsdb", "a", [{"question": "hi"}])["message"]["content"] \
                == "ollama says hi"


def test_model_checks_at_create_and_update(engine: Engine) -> None:
    with pytest.raises(BadRequest, match="model provider 'nosuch'"):
        engine.create_agent("mindsdb", {"name": "a", "model": {"provider": "nosuch",
                                                              "model_name": "x"}})
    with pytest.raises(ProviderError, match="kbsql has no model 'gpt-9'"):
        engine.create_agent("mindsdb", {"name": "a", "model": {"provider": "kbsql",
                                                              "model_name": "gpt-9"}})
    engine.create_agent("mindsdb", {"name": "a", "prompt_template": "be brief"})
    dead = {"provider": "anthropic", "model_name": "claude-x", "api_key": "sk-ant-secret",
            "base_url": "http://127.0.0.1:9"}
    # a partial update of the model answers with the new model (the contract), the rest kept;
    # the unreachable provider is reported when the agent runs (issue 12)
    updated = engine.update_agent("mindsdb", "a", {"model": dead})
    assert updated.model.provider == "anthropic" and updated.prompt_template == "be brief"
    with pytest.raises(ProviderError) as caught:
        engine.complete("mindsdb", "a", [{"question": "hi", "answer": ""}])
    assert "anthropic" in str(caught.value) and "claude-x" in str(caught.value)
    assert "sk-ant-secret" not in str(caught.value)
    with pytest.raises(BadRequest, match="model provider 'nosuch'"):
        engine.update_agent("mindsdb", "a", {"model": {"provider": "nosuch", "model_name": "x"}})
    assert engine.get_agent("mindsdb", "a").model.provider == "anthropic"


def test_messages_are_validated_before_streaming(engine: Engine) -> None:
    engine.create_agent("mindsdb", {"name": "a"})
    for bad in ([], [{"question": ""}], [{"role": "assistant", "content": "x"}]):
        with pytest.raises(BadRequest):
            engine.stream("mindsdb", "a", bad)
        with pytest.raises(BadRequest):
            engine.complete("mindsdb", "a", bad)


def test_no_model_call_before_the_stream_is_iterated(engine: Engine) -> None:
    with FakeLLM("openai", [text("hello")]) as fake:
        engine.create_agent("mindsdb", {"name": "a", "model": {
            "provider": "openai", "model_name": "m1", "base_url": fake.base_url}})
        chunks = engine.stream("mindsdb", "a", [{"question": "hi"}])
        assert fake.chat_calls == 0
        first = next(chunks)
        assert first["type"] == "start" and fake.chat_calls == 0
        rest = list(chunks)
        assert fake.chat_calls == 1 and rest[0]["output"] == "hello" and rest[-1] == {"type": "end"}


def test_iterations_are_bounded(engine: Engine) -> None:
    engine.config.agent_max_iterations = 3
    with FakeLLM("anthropic", [tools(("kb_list_tool", {}))] * 10, models=("m1",)) as fake:
        engine.create_agent("mindsdb", {"name": "a", "data": {"knowledge_bases": ["mindsdb.*"]},
                                        "model": {"provider": "anthropic", "model_name": "m1",
                                                  "base_url": fake.base_url}})
        chunks = list(engine.stream("mindsdb", "a", [{"question": "go"}]))
        assert fake.chat_calls == 4  # three with tools, then one without: it must answer
        assert "tools" not in fake.requests[-1] and "tools" in fake.requests[0]
        assert [c.get("type") for c in chunks][-1] == "end"
        assert sum("actions" in c for c in chunks) == 3 and "output" in chunks[-2]


def test_wall_time_is_bounded(engine: Engine) -> None:
    engine.config.agent_wall_time_s = 0.5
    with FakeLLM("openai", [text("word " * 50)] * 2, delay=0.05) as fake:
        engine.create_agent("mindsdb", {"name": "a", "model": {
            "provider": "openai", "model_name": "m1", "base_url": fake.base_url}})
        chunks = list(engine.stream("mindsdb", "a", [{"question": "go"}]))
        # the words written before the limit went out as they came; then the limit's error
        kinds = [kind(c) for c in chunks]
        assert collapse(kinds) == ["start", "output", "error", "end"]
        assert answer_of(chunks).startswith("word word") and "time" in chunks[-2]["content"]
        with pytest.raises(ProviderError):
            engine.complete("mindsdb", "a", [{"question": "go"}])


def test_embedded_stream_passes_tokens_on_as_the_model_writes(engine: Engine) -> None:
    """In-process, the first token leaves while the model is still writing (the whole answer
    took 10 paced events); `complete` still answers the whole text."""
    answer = "Refunds take five days and go to the card used."
    with FakeLLM("anthropic", [text(answer), text(answer)], models=("m1",), delay=0.05) as fake:
        engine.create_agent("mindsdb", {"name": "a", "model": {
            "provider": "anthropic", "model_name": "m1", "api_key": "k", "base_url": fake.base_url}})
        stream = engine.stream("mindsdb", "a", [{"question": "refunds?"}])
        assert kind(next(stream)) == "start"
        first = next(stream)
        assert kind(first) == "output" and answer.startswith(first["output"])
        assert fake.finished_streams == 0  # the model is still writing
        chunks = [first, *stream]
        assert answer_of(chunks) == answer and kind(chunks[-1]) == "end"
        assert engine.complete("mindsdb", "a", [{"question": "again"}])["message"]["content"] == answer
