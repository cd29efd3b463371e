"""The public surface, pinned (as httpx's test_exported_members does): adding or removing a
public name is a deliberate change to this file, never a side effect of a refactor."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "kbsql": ["Client", "__version__", "connect"],
    "kbsql.client": ["Client", "connect"],
    "kbsql.interface": [
        "DEFAULT_PROJECT", "KB_COLUMNS", "MASK", "Agent", "BadRequest", "Busy", "Conflict",
        "ConnectionFailed", "ErrorResult", "InsertCounts", "InsufficientStorage", "Interrupted",
        "InvalidParameter", "KbsqlError",
        "KnowledgeBase", "LimitExceeded", "MissingParameter", "ModelDescriptor", "NotFound", "NotSupported",
        "OkResult", "ParseError", "PermissionDenied", "ProviderError", "ServiceApi", "ServiceError",
        "SqlError", "SqlResult", "Storage", "StoreDamaged", "TableResult", "TransportError", "Unavailable",
        "UnknownDatabase", "UnknownTable", "result_from_json",
    ],
    "kbsql.spi": [
        "DATASOURCES", "EMBEDDING_PROVIDERS", "GROUPS", "LLM_PROVIDERS", "RERANKERS", "STORAGE",
        "ChatFactory", "ChatProvider", "ChecksParameters", "ChunkBatch", "ChunkWriter", "Condition",
        "Conditions", "CountsChunks", "DataSource", "DataSourceEngine", "Embedder", "EmbeddingFactory",
        "ExportsChunks",
        "FileScan", "Filter",
        "FilterGroup", "FrameScan", "KbStorage", "Message", "ModelHttp", "NativeTable", "PluginError",
        "ProviderContext", "Reranker", "RerankerFactory", "RunControl", "Scan", "SearchRequest",
        "SearchableStorage", "StorageBackend", "StoragePlace", "StreamsChunks", "ToolCall", "ToolSpec",
        "Turn",
    ],
    "kbsql.widgets": ["AgentStreamPanel", "ChatWidget", "KnowledgeBaseBrowser", "StreamState", "browse",
                      "show_agent_stream"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_exported_names(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name} is listed but missing"


def test_the_extension_hooks_and_the_magics() -> None:
    import kbsql
    from kbsql.notebook.magics import KbSql

    assert callable(kbsql.load_ipython_extension) and callable(kbsql.unload_ipython_extension)
    assert {kind: sorted(names) for kind, names in KbSql.magics.items()} == {
        "line": ["agent", "kbsql", "kbsql_connect"], "cell": ["agent", "kbsql"]}


def test_every_service_error_has_its_own_problem_type() -> None:
    from kbsql import interface

    classes = [getattr(interface, n) for n in interface.__all__
               if isinstance(getattr(interface, n), type)
               and issubclass(getattr(interface, n), interface.ServiceError)]
    types = [c.problem_type for c in classes]
    assert len(classes) == 18 and len(set(types)) == len(types)


def test_the_plugin_groups_are_the_five_kinds() -> None:
    import kbsql.spi as spi

    assert spi.GROUPS == ("kbsql.storage", "kbsql.embedding_providers", "kbsql.llm_providers",
                          "kbsql.rerankers", "kbsql.datasources")
