"""Model providers: one registry per kind, one base-URL rule, one door the engine owns.

Embeddings (`models/embeddings.py`), reranking (`models/rerank.py`) and agents
(`models/chat/`) used to keep their own lists of provider names, and they drifted
(`llamacpp` vs `llama_cpp`; `azure_openai` accepted for embeddings and refused for agents;
a `vllm` agent without `base_url` silently sent its key to api.openai.com); then three
if-chains turned a name into a class. Now each kind has one registry (`plugins.Registry`:
the built-in table below, plus the entry points other packages declare), and every caller
asks `ModelProviders`, which the engine owns.

The base-URL rule and `ProviderContext` (what every factory is lent) live in
`model_context.py`, below the protocol modules; the factories' types (`EmbeddingFactory`,
`RerankerFactory`, `ChatFactory`) beside their protocols; all are public in `kbsql.spi`.
"""

from __future__ import annotations

import threading
from typing import Any

from kbsql.engine import plugins
from kbsql.engine.config import OFFLINE_PROVIDER
from kbsql.engine.models.chat.base import ChatFactory, Provider
from kbsql.engine.models.chat.logged import LoggedProvider
from kbsql.engine.models.embeddings import Embedder, EmbeddingFactory
from kbsql.engine.models.model_context import (  # noqa: F401 (re-exported: the engine's callers)
    OPENAI_BASE,
    OWN_SERVICE,
    ProviderContext,
    base_url_of,
    openai_base,
)
from kbsql.engine.models.rerank import Reranker, RerankerFactory
from kbsql.interface.errors import InvalidParameter, ProviderError

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

_EMBED = "kbsql.engine.models.embeddings"
_RERANK = "kbsql.engine.models.rerank"
_CHAT = "kbsql.engine.models.chat"
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
        "pgvector": "kbsql.engine.postgres.pgvector:PgVectorBackend",
    },
    plugins.DATASOURCES: {
        "duckdb": "kbsql.engine.datasources.duckdb_file:DuckdbFileSource",
        "sqlite": "kbsql.engine.datasources.sqlite_file:SqliteFileSource",
        "files": "kbsql.engine.datasources.files:FilesSource",
        "postgres": "kbsql.engine.postgres.postgres_source:PostgresSource",
        "postgresql": "kbsql.engine.postgres.postgres_source:PostgresSource",
        "pgvector": "kbsql.engine.postgres.pgvector_source:PgVectorSource",
    },
}
"""The built-ins of each registry, by entry-point group: name -> "module:attribute"."""


class ModelProviders:
    """The engine's door to model providers: a name becomes an instance through its
    registry, built with the engine's `ProviderContext`. Embedders are kept, one per
    descriptor (they may hold a loaded model); chat providers and rerankers are cheap and
    built per use."""

    def __init__(self, context: ProviderContext | None = None):
        self.context = context or ProviderContext()
        self.embedding = plugins.Registry[EmbeddingFactory](
            "embedding provider", plugins.EMBEDDING_PROVIDERS, BUILTINS[plugins.EMBEDDING_PROVIDERS])
        self.rerankers = plugins.Registry[RerankerFactory]("reranking provider", plugins.RERANKERS,
                                                           BUILTINS[plugins.RERANKERS])
        self.chat = plugins.Registry[ChatFactory]("model provider", plugins.LLM_PROVIDERS,
                                                  BUILTINS[plugins.LLM_PROVIDERS])
        self._embedders: dict[str, Embedder] = {}
        self._lock = threading.Lock()

    def embedder(self, descriptor: dict[str, Any] | None,
                 default: dict[str, Any] | None = None) -> Embedder:
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
            # "Wrong embedding provider" is MindsDB's wording, which its clients match on
            raise ProviderError(f"Wrong embedding provider: '{provider}' (model "
                                f"'{descriptor.get('model_name')}') is not supported: use openai (any "
                                "OpenAI-compatible base_url), ollama or "
                                f"kbsql (known here: {', '.join(self.embedding.names())})")
        built = factory(descriptor, self.context)
        with self._lock:
            return self._embedders.setdefault(key, built)

    def reranker(self, descriptor: dict[str, Any]) -> Reranker:
        """The reranker of a `reranking_model` descriptor; an unknown provider is a 400 before
        anything is sent (a typo must never fall through to a scorer holding the key)."""
        provider = str(descriptor.get("provider") or "")
        factory = self.rerankers.get(provider)
        if factory is None:
            raise InvalidParameter(f"Reranking provider '{provider}' is not supported: use one of "
                                   f"{', '.join(self.rerankers.names())}")
        return factory(descriptor, self.context)

    def chat_provider(self, model: dict[str, Any]) -> Provider:
        """The chat provider of an agent's model descriptor, each turn recorded in
        `log.llm_log` (chat/logged.py); an unknown name is a 400."""
        name = str(model.get("provider") or "")
        factory = self.chat.get(name)
        if factory is None:
            raise InvalidParameter(f"not supported by the local engine: the model provider "
                                   f"'{model.get('provider')}' for an agent (the reference has more); "
                                   f"use one of {', '.join(self.chat.names())}")
        return LoggedProvider(factory(model, self.context), self.context.llm_log)

    def close(self) -> None:
        self.context.http.close()
