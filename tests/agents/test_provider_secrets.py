"""Keys stay where they belong: the server's environment key never goes to a base_url an agent
chose, and a provider error that echoes the key never reaches the caller. Real `kbsql serve`
and scripted fake providers on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from kbsql.engine.models.chat.anthropic import AnthropicProvider
from kbsql.engine.models.chat.openai import OpenAIProvider
from kbsql.engine.models.providers import ProviderContext
from kbsql.server.process import spawn
from tests.agents.fakes import FakeLLM, text
from tests.agents.streams import agent_url, create_agent, raw_stream

SERVER_KEYS = {"OPENAI_API_KEY": "sk-SERVER-SECRET-openai-0001",
               "ANTHROPIC_API_KEY": "sk-ant-SERVER-SECRET-0002"}


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with spawn(tmp_path_factory.mktemp("secrets"), env=SERVER_KEYS) as server:
        yield server.url


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_servers_env_key_is_not_sent_to_a_custom_base_url(server_url: str, wire: str) -> None:
    with FakeLLM(wire, [text("hello from the fake")]) as fake:
        name = f"nokey_{wire}"
        created = create_agent(server_url, {"name": name, "model": {
            "provider": wire, "model_name": "m1", "base_url": fake.base_url}})
        assert created.status_code == 201, created.text
        answer = httpx.post(agent_url(server_url, name, stream=False),
                            json={"messages": [{"question": "hi", "answer": ""}]}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"]["content"] == "hello from the fake"
        sent = " ".join(f"{k}: {v}" for h in fake.headers for k, v in h.items())
    assert fake.chat_calls == 1
    assert "SERVER-SECRET" not in sent
    assert "authorization" not in sent.lower() and "x-api-key" not in sent.lower()


def test_env_keys_apply_only_to_the_providers_own_url(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in SERVER_KEYS.items():
        monkeypatch.setenv(key, value)
    context = ProviderContext()
    assert OpenAIProvider({"model_name": "x"}, context).api_key == SERVER_KEYS["OPENAI_API_KEY"]
    assert OpenAIProvider({"model_name": "x", "base_url": "https://api.openai.com/v1/"}, context).api_key \
        == SERVER_KEYS["OPENAI_API_KEY"]
    assert AnthropicProvider({"model_name": "x"}, context).api_key == SERVER_KEYS["ANTHROPIC_API_KEY"]
    assert OpenAIProvider({"model_name": "x", "base_url": "http://127.0.0.1:9/v1"}, context).api_key is None
    assert AnthropicProvider({"model_name": "x", "base_url": "http://127.0.0.1:9"}, context).api_key is None
    assert OpenAIProvider({"model_name": "x", "base_url": "http://127.0.0.1:9/v1",
                           "api_key": "sk-own"}, context).api_key == "sk-own"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_provider_error_echoing_the_key_is_masked(server_url: str, wire: str) -> None:
    key = "sk-agent-key-ABCDEF123456"
    refusal = {"status": 401, "message": f"Incorrect API key provided: {key}. Other: sk-zzzzzzzzzz"}
    with FakeLLM(wire, [refusal, refusal]) as fake:
        name = f"leaky_{wire}"
        assert create_agent(server_url, {"name": name, "model": {
            "provider": wire, "model_name": "m1", "base_url": fake.base_url,
            "api_key": key}}).status_code == 201
        body = {"messages": [{"question": "hi", "answer": ""}]}
        answer = httpx.post(agent_url(server_url, name, stream=False), json=body, timeout=60)
        chunks = raw_stream(agent_url(server_url, name), body)
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert "401" in detail and "Incorrect API key" in detail
    error = next(c for c in chunks if c.get("type") == "error")["content"]
    assert "Incorrect API key" in error
    for text_shown in (detail, error):
        assert key not in text_shown and "sk-zzzzzzzzzz" not in text_shown
        assert "******" in text_shown


def test_a_short_key_is_masked_as_a_token_not_inside_words() -> None:
    """doors13: with api_key `k`, every provider error read "(******bsql serve
    --model-answer-mb)". A short key is still masked where it stands on its own."""
    from kbsql.interface.secrets import scrub_secret

    line = "openai model 'm1': it answered more than 8 MB (kbsql serve --model-answer-mb); key k refused"
    assert scrub_secret(line, "k") == line.replace("key k refused", "key ****** refused")
    assert scrub_secret("Incorrect API key provided: k.", "k") == "Incorrect API key provided: ******."
    long_key = "abcdefghij-0123"
    assert scrub_secret(f"bad key:{long_key}xyz", long_key) == "bad key:******xyz"  # a long key anywhere
