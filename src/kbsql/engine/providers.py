"""Model providers: one registry per kind, one base-URL rule, one door the engine owns.

Embeddings (`knowledge/embeddings.py`), reranking (`knowledge/rerank.py`) and agents
(`agents/providers/`) used to keep their own lists of provider names, and they drifted
(`llamacpp` vs `llama_cpp`; `azure_openai` accepted for embeddings and refused for agents;
a `vllm` agent without `base_url` silently sent its key to api.openai.com); then three
if-chains turned a name into a class. Now each kind has one registry (`plugins.Registry`:
the built-in table below, plus the entry points other packages declare), and every caller
asks `ModelProviders`, which the engine owns.

The base-URL rule: a provider whose name is its own service (`openai`, `anthropic`,
`ollama`) may omit `base_url` and means that service's default URL; an alias for "anything
speaking the OpenAI API" (`vllm`, `lmstudio`, `azure_openai`, ...) must name its URL: never
a guess that would send a key to OpenAI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from kbsql.engine import plugins
from kbsql.engine.config import OFFLINE_PROVIDER
from kbsql.engine.model_http import ModelHttp
from kbsql.interface.errors import InvalidParameter, ProviderError

T = TypeVar("T")

# names that speak the OpenAI HTTP API (chat, embeddings) at their `base_url`
OPENAI_COMPATIBLE = frozenset({"openai", "azure_openai", "openai_compatible", "vllm", "lmstudio",
                               "llamacpp", "llama_cpp"})
# rerankers with a native /rerank API (vllm serves both: it reranks natively)
RERANK_APIS = frozenset({"cohere", "jina", "vllm", "rerank", "infinity"})
# chat models asked for a relevance score when used as a reranker
CHAT_RERANKERS = OPENAI_COMPATIBLE - RERANK_APIS
# the bundled models (MiniLM, hash-<dim>), by any name a MindsDB user may give them
LOCAL_EMBEDDERS = frozenset({"kbsql", "local", "sentence_transformers", "sentence-transformers",
                             "huggingface"})
# the providers that are their own service: they may omit base_url
OWN_SERVICE = frozenset({"openai", "anthropic", "ollama"})
OPENAI_BASE = "https://api.openai.com/v1"

_EMBED = "kbsql.engine.knowledge.embeddings"
_RERANK = "kbsql.engine.knowledge.rerank"
_CHAT = "kbsql.engine.agents.providers"
BUILTINS: dict[str, dict[str, str]] = {
    plugins.EMBEDDING_PROVIDERS: {
        **{name: f"{_EMBED}:local_embedder" for name in LOCAL_EMBEDDERS},
        **{name: f"{_EMBED}:OpenAIEmbedder" for name in OPENAI_COMPATIBLE},
        "ollama": f"{_EMBED}:OllamaEmbedder",
    },
    plugins.RERANKERS: {
        **{name: f"{_RERANK}:RerankApi" for name in RERANK_APIS},
        **{name: f"{_RERANK}:chat_reranker" for name in CHAT_RERANKERS},
    },
    plugins.LLM_PROVIDERS: {
        **{name: f"{_CHAT}.openai:OpenAIProvider" for name in OPENAI_COMPATIBLE},
        "anthropic": f"{_CHAT}.anthropic:AnthropicProvider",
        "ollama": f"{_CHAT}.ollama:OllamaProvider",
        OFFLINE_PROVIDER: f"{_CHAT}.offline:OfflineProvider",
    },
    plugins.STORAGE: {
        "kbsql_faiss": "kbsql.engine.knowledge.local:LocalBackend",
        "pgvector": "kbsql.engine.knowledge.pgvector:PgVectorBackend",
    },
}
"""The built-ins of each registry, by entry-point group: name -> "module:attribute"."""


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


def openai_base(descriptor: dict[str, Any]) -> str:
    """The OpenAI-style base URL of a model descriptor, ending with the API version path (a
    bare host gets `/v1`); `base_url_of`'s rule decides whether it may be left out."""
    base_url = base_url_of(descriptor)
    if base_url is None:
        return OPENAI_BASE
    url = str(base_url).rstrip("/")
    return url if urlsplit(url).path not in ("", "/") else url + "/v1"


@dataclass
class ProviderContext:
    """What the engine lends every provider it builds (the second argument of a provider
    factory): the pooled outbound HTTP client with the engine's outbound policy, and
    `load_once` for what is costly to load and safe to share (a local model's weights),
    kept for the engine's lifetime."""

    http: ModelHttp = field(default_factory=ModelHttp)
    _loaded: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def with_http(self, http: ModelHttp) -> ProviderContext:
        """A context with this one's loaded models and another HTTP client: what two engines
        of one process may share (the weights), keeping apart what they must not (each
        engine's client carries its own outbound policy and is closed with that engine)."""
        return ProviderContext(http=http, _loaded=self._loaded, _lock=self._lock)

    def load_once(self, key: str, load: Callable[[], T]) -> T:
        """`load()` the first time `key` is asked for, the same object after that."""
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = load()
            return self._loaded[key]  # type: ignore[no-any-return]


class ModelProviders:
    """The engine's door to model providers: a name becomes an instance through its
    registry, built with the engine's `ProviderContext`. Embedders are kept, one per
    descriptor (they may hold a loaded model); chat providers and rerankers are cheap and
    built per use."""

    def __init__(self, context: ProviderContext | None = None):
        self.context = context or ProviderContext()
        self.embedding = plugins.Registry[Any]("embedding provider", plugins.EMBEDDING_PROVIDERS,
                                               BUILTINS[plugins.EMBEDDING_PROVIDERS])
        self.rerankers = plugins.Registry[Any]("reranking provider", plugins.RERANKERS,
                                               BUILTINS[plugins.RERANKERS])
        self.chat = plugins.Registry[Any]("model provider", plugins.LLM_PROVIDERS,
                                          BUILTINS[plugins.LLM_PROVIDERS])
        self._embedders: dict[str, Any] = {}
        self._lock = threading.Lock()

    def embedder(self, descriptor: dict[str, Any] | None, default: dict[str, Any] | None = None) -> Any:
        """The embedder of a descriptor (None -> `default`, then the bundled MiniLM)."""
        descriptor = descriptor or default or {"provider": "kbsql"}
        key = repr(sorted(descriptor.items()))
        with self._lock:
            hit = self._embedders.get(key)
        if hit is not None:
            return hit
        provider = str(descriptor.get("provider") or "")
        factory = self.embedding.get(provider)
        if factory is None:
            raise ProviderError(f"Embedding provider '{provider}' (model '{descriptor.get('model_name')}') "
                                "is not supported: use openai (any OpenAI-compatible base_url), ollama or "
                                f"kbsql (known here: {', '.join(self.embedding.names())})")
        built = factory(descriptor, self.context)
        with self._lock:
            return self._embedders.setdefault(key, built)

    def reranker(self, descriptor: dict[str, Any]) -> Any:
        """The reranker of a `reranking_model` descriptor; an unknown provider is a 400 before
        anything is sent (a typo must never fall through to a scorer holding the key)."""
        provider = str(descriptor.get("provider") or "")
        factory = self.rerankers.get(provider)
        if factory is None:
            raise InvalidParameter(f"Reranking provider '{provider}' is not supported: use one of "
                                   f"{', '.join(self.rerankers.names())}")
        return factory(descriptor, self.context)

    def chat_provider(self, model: dict[str, Any]) -> Any:
        """The chat provider of an agent's model descriptor; an unknown name is a 400."""
        name = str(model.get("provider") or "")
        factory = self.chat.get(name)
        if factory is None:
            raise InvalidParameter(f"not supported by the local engine: the model provider "
                                   f"'{model.get('provider')}' for an agent (the reference has more); "
                                   f"use one of {', '.join(self.chat.names())}")
        return factory(model, self.context)

    def close(self) -> None:
        self.context.http.close()
