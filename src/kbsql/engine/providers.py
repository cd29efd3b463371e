"""One table of model-provider names, and one base-URL rule, for every part that calls a model.

Embeddings (`knowledge/embeddings.py`), reranking (`knowledge/rerank.py`) and agents
(`agents/providers/`) used to keep their own lists of provider names, and they drifted
(`llamacpp` vs `llama_cpp`; `azure_openai` accepted for embeddings and refused for agents;
a `vllm` agent without `base_url` silently sent its key to api.openai.com). They all read
this table now.

The base-URL rule: a provider whose name is its own service (`openai`, `anthropic`,
`ollama`) may omit `base_url` and means that service's default URL; an alias for "anything
speaking the OpenAI API" (`vllm`, `lmstudio`, `azure_openai`, ...) must name its URL: never
a guess that would send a key to OpenAI.
"""

from __future__ import annotations

from typing import Any

from kbsql.engine.config import OFFLINE_PROVIDER
from kbsql.interface.errors import ProviderError

# names that speak the OpenAI HTTP API (chat, embeddings) at their `base_url`
OPENAI_COMPATIBLE = frozenset({"openai", "azure_openai", "openai_compatible", "vllm", "lmstudio",
                               "llamacpp", "llama_cpp"})
# rerankers with a native /rerank API (vllm serves both: it reranks natively)
RERANK_APIS = frozenset({"cohere", "jina", "vllm", "rerank", "infinity"})
# chat models asked for a relevance score when used as a reranker
CHAT_RERANKERS = OPENAI_COMPATIBLE - RERANK_APIS

# agent provider names -> the provider module that serves them
AGENT_PROVIDERS: dict[str, str] = {
    **{name: "openai" for name in OPENAI_COMPATIBLE},
    "anthropic": "anthropic",
    "ollama": "ollama",
    OFFLINE_PROVIDER: "offline",
}

# the providers that are their own service: they may omit base_url
OWN_SERVICE = frozenset({"openai", "anthropic", "ollama"})


def base_url_of(descriptor: dict[str, Any]) -> str | None:
    """The descriptor's `base_url` (or `api_base`), or None when the provider may use its own
    service's default. A missing URL for an alias is a `ProviderError` naming the fix."""
    base_url = descriptor.get("base_url") or descriptor.get("api_base")
    if base_url:
        return str(base_url)
    provider = str(descriptor.get("provider") or "")
    if provider.lower() in OWN_SERVICE:
        return None
    raise ProviderError(f"Provider '{provider}' (model '{descriptor.get('model_name')}') "
                        "needs a base_url: only provider 'openai' defaults to api.openai.com")
