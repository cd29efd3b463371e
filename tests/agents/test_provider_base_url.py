"""One base-URL rule for every model call (engine/models/providers.py): an OpenAI-compatible alias
without `base_url` is refused, for agents exactly as for embeddings, and nothing is sent."""

from __future__ import annotations

import pytest

from kbsql.engine import Engine
from kbsql.interface.errors import ProviderError


@pytest.mark.parametrize("alias", ["vllm", "lmstudio", "llama_cpp", "llamacpp", "openai_compatible"])
def test_an_alias_agent_without_base_url_is_refused_not_sent_to_openai(engine: Engine, alias: str,
                                                                        monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-key")
    with pytest.raises(ProviderError, match="needs a base_url") as info:
        engine.create_agent("mindsdb", {"name": "a", "model": {"provider": alias, "model_name": "m"}})
    assert "sk-server-key" not in str(info.value)
    assert engine.list_agents("mindsdb") == []


def test_embeddings_and_agents_accept_the_same_openai_compatible_names() -> None:
    from kbsql.engine.models.providers import BUILTINS, OPENAI_COMPATIBLE
    from kbsql.engine.plugins import EMBEDDING_PROVIDERS, LLM_PROVIDERS, RERANKERS

    def served_by(group: str, implementation: str) -> set[str]:
        return {n for n, ref in BUILTINS[group].items() if ref.endswith(implementation)}

    assert served_by(LLM_PROVIDERS, ":OpenAIProvider") == OPENAI_COMPATIBLE
    assert served_by(EMBEDDING_PROVIDERS, ":OpenAIEmbedder") == OPENAI_COMPATIBLE
    assert served_by(RERANKERS, ":chat_reranker") | (served_by(RERANKERS, ":RerankApi") & OPENAI_COMPATIBLE) \
        == OPENAI_COMPATIBLE
