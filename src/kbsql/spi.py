"""kbsql's plugin API: the protocols a plugin implements and the values they exchange.

A plugin is a package that declares entry points in one of five groups (`GROUPS`) and
imports only this module and `kbsql.interface`; everything else in kbsql is internal and may
change. The engine loads a plugin on the first statement that names it (a knowledge base's
`storage`, an `embedding_model` / `reranking_model` / agent `model` provider, a
`CREATE DATABASE ... ENGINE`), and a plugin that fails to load is one `PluginError` for the
statement that named it.

| group | registers | it is |
|---|---|---|
| `kbsql.embedding_providers` | `EmbeddingFactory` | `(descriptor, ProviderContext) -> Embedder` |
| `kbsql.rerankers` | `RerankerFactory` | `(descriptor, ProviderContext) -> Reranker` |
| `kbsql.llm_providers` | `ChatFactory` | `(descriptor, ProviderContext) -> ChatProvider` |
| `kbsql.storage` | `StorageBackend` | an object (a class: made once) with `open(StoragePlace) -> KbStorage` |
| `kbsql.datasources` | `DataSourceEngine` | a class `(name, alias, parameters) -> DataSource` |

The definitions live beside the engine code that calls them (they are what it calls);
this module is their public name, pinned by tests/test_public_names.py.
"""

from __future__ import annotations

from kbsql.engine.datasources.scans import (
    DataSource,
    DataSourceEngine,
    FileScan,
    FrameScan,
    NativeTable,
    Scan,
)
from kbsql.engine.knowledge.search import (
    Condition,
    Conditions,
    Filter,
    FilterGroup,
    SearchableStorage,
    SearchRequest,
)
from kbsql.engine.knowledge.storage import (
    ChecksParameters,
    ChunkBatch,
    ChunkWriter,
    CountsChunks,
    ExportsChunks,
    KbStorage,
    StorageBackend,
    StoragePlace,
    StreamsChunks,
)
from kbsql.engine.models.chat.base import ChatFactory, Message, RunControl, ToolCall, ToolSpec, Turn
from kbsql.engine.models.chat.base import Provider as ChatProvider
from kbsql.engine.models.embeddings import Embedder, EmbeddingFactory
from kbsql.engine.models.model_context import ProviderContext
from kbsql.engine.models.model_http import ModelHttp
from kbsql.engine.models.rerank import Reranker, RerankerFactory
from kbsql.engine.plugins import (
    DATASOURCES,
    EMBEDDING_PROVIDERS,
    GROUPS,
    LLM_PROVIDERS,
    RERANKERS,
    STORAGE,
    PluginError,
)

__all__ = [
    "DATASOURCES", "EMBEDDING_PROVIDERS", "GROUPS", "LLM_PROVIDERS", "RERANKERS", "STORAGE",
    "ChatFactory", "ChatProvider", "ChecksParameters", "ChunkBatch", "ChunkWriter", "Condition", "Conditions",
    "CountsChunks",
    "DataSource", "DataSourceEngine", "Embedder", "EmbeddingFactory", "ExportsChunks", "FileScan", "Filter",
    "FilterGroup", "FrameScan", "KbStorage", "Message", "ModelHttp", "NativeTable", "PluginError",
    "ProviderContext", "Reranker", "RerankerFactory", "RunControl", "Scan", "SearchRequest",
    "SearchableStorage", "StorageBackend", "StoragePlace", "StreamsChunks", "ToolCall", "ToolSpec", "Turn",
]
