"""Remote embedding and reranking providers, against scripted servers on loopback."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from kbsql.engine import Engine
from kbsql.interface.errors import BadRequest, ProviderError
from tests.knowledge.conftest import sql, sql_error, table
from tests.knowledge.fakes import FakeProvider

DOCS = [(1, "apples and pears are fruit", "food"), (2, "cars and trucks drive on roads", "road"),
        (3, "fruit salad with apples", "food"), (4, "trucks carry fruit to markets", "road")]
VALUES = ", ".join(f"({i}, '{t}', '{c}')" for i, t, c in DOCS)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider()
    yield server
    server.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _create(engine: Engine, embedding: dict, reranking: dict | None = None) -> None:
    extra = f", reranking_model = {json.dumps(reranking)}" if reranking else ""
    sql(engine, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {json.dumps(embedding)}{extra}, "
                "metadata_columns = ['kind']")
    sql(engine, f"INSERT INTO kb (id, content, kind) VALUES {VALUES}")


def test_openai_compatible_embeddings(engine: Engine, fake: FakeProvider) -> None:
    _create(engine, {"provider": "openai", "model_name": "emb-1", "api_key": "sk-secret",
                     "base_url": f"{fake.url}/v1"})
    got = table(engine, "SELECT id FROM kb WHERE content = 'apples fruit' LIMIT 2")
    assert {g["id"] for g in got} == {"1", "3"}
    path, body, headers = fake.requests[-1]
    assert path == "/v1/embeddings" and body == {"model": "emb-1", "input": ["apples fruit"]}
    assert headers["Authorization"] == "Bearer sk-secret"
    insert_call = fake.requests[1][1]
    assert len(insert_call["input"]) == 4  # the chunks of one insert go in one batched call
    listed = table(engine, "SHOW KNOWLEDGE_BASES")[0]
    assert "sk-secret" not in json.dumps(listed) and "******" in listed["EMBEDDING_MODEL"]


def test_a_bare_base_url_gets_v1(engine: Engine, fake: FakeProvider) -> None:
    _create(engine, {"provider": "openai", "model_name": "emb-1", "base_url": fake.url})
    assert fake.requests[0][0] == "/v1/embeddings"


def test_ollama_embeddings(engine: Engine, fake: FakeProvider) -> None:
    _create(engine, {"provider": "ollama", "model_name": "nomic-embed-text", "base_url": fake.url})
    got = table(engine, "SELECT id FROM kb WHERE content = 'trucks roads' LIMIT 1")
    assert got[0]["id"] == "2"
    assert fake.requests[-1][0] == "/api/embed" and fake.requests[-1][1]["model"] == "nomic-embed-text"


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_unreachable_provider_fails_the_create_and_stores_nothing(engine: Engine, provider: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    model = {"provider": provider, "model_name": "emb-x", "base_url": url, "api_key": "sk-hidden"}
    message = sql_error(engine, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {json.dumps(model)}")
    assert provider in message and "emb-x" in message and "could not be reached" in message
    assert "sk-hidden" not in message
    assert engine.catalog.find_knowledge_base("mindsdb", "kb") is None
    with pytest.raises(ProviderError, match="emb-x"):
        engine.create_knowledge_base("mindsdb", {"name": "kb2", "embedding_model": model})
    assert engine.list_knowledge_bases("mindsdb") == []


def test_provider_failing_mid_insert_leaves_the_previous_state(engine: Engine, fake: FakeProvider) -> None:
    _create(engine, {"provider": "openai", "model_name": "emb-1", "base_url": fake.url})
    before = table(engine, "SELECT chunk_id FROM kb")
    rows = [{"id": 100 + i, "content": f"document number {i} " * 3, "kind": "bulk"} for i in range(600)]
    fake.fail_after = fake.embed_calls + 2  # the third embedding call of this insert fails
    record = engine.catalog.knowledge_base("mindsdb", "kb")
    with pytest.raises(ProviderError, match="HTTP 500"):
        engine.insert_rows(record, rows)
    assert table(engine, "SELECT chunk_id FROM kb") == before
    fake.fail_after = None
    assert table(engine, "SELECT id FROM kb WHERE kind = 'bulk'") == []
    got = table(engine, "SELECT id FROM kb WHERE content = 'apples' LIMIT 10")
    assert {g["id"] for g in got} == {"1", "2", "3", "4"}  # the index agrees with the rows


@pytest.mark.parametrize("style", ["rerank", "chat"])
def test_reranker_scores_become_relevance(engine: Engine, fake: FakeProvider, style: str) -> None:
    reranker = ({"provider": "cohere", "model_name": "rr-1", "base_url": fake.url} if style == "rerank"
                else {"provider": "openai", "model_name": "judge", "base_url": f"{fake.url}/v1"})
    _create(engine, {"provider": "kbsql", "model_name": "hash-64"}, reranker)
    got = table(engine, "SELECT id, relevance, distance FROM kb WHERE content = 'apples fruit salad'")
    # word_score: doc 3 has all three words, doc 1 two of three, others at most one; the
    # default relevance bound with a reranker is >= 0 (query.mdx), so nothing is hidden
    assert [g["id"] for g in got][:2] == ["3", "1"] and len(got) == 4
    assert [g["relevance"] for g in got][:2] == pytest.approx([1.0, 2 / 3], abs=1e-3)
    assert all(g["distance"] is not None for g in got)
    got = table(engine, "SELECT id FROM kb WHERE content = 'apples fruit salad' AND relevance >= 0.5")
    assert [g["id"] for g in got] == ["3", "1"]
    got = table(engine, "SELECT id FROM kb WHERE content = 'apples fruit salad' AND relevance >= 0.9")
    assert [g["id"] for g in got] == ["3"]
    got = table(engine, "SELECT id FROM kb WHERE content = 'apples fruit salad' AND kind = 'road' "
                        "AND relevance >= 0.5")
    assert got == []  # 'trucks carry fruit' scores 1/3
    logged = table(engine, "SELECT model_name, input, output, success FROM log.llm_log "
                           "WHERE input LIKE '%trucks carry fruit%' AND output = '0.333'")
    if style == "chat":  # each scoring call of a chat reranker is a model call MindsDB logs
        assert logged and {r["MODEL_NAME"] for r in logged} == {"openai/judge"}
        assert all(r["SUCCESS"] for r in logged)
    else:
        assert logged == []  # a rerank endpoint is no language-model call


def test_unreachable_reranker_fails_the_create(engine: Engine) -> None:
    reranker = {"provider": "cohere", "model_name": "rr-404", "base_url": f"http://127.0.0.1:{_closed_port()}"}
    message = sql_error(engine, "CREATE KNOWLEDGE_BASE kb USING embedding_model = "
                                '{"provider": "kbsql", "model_name": "hash-64"}, '
                                f"reranking_model = {json.dumps(reranker)}")
    assert "Reranking provider 'cohere' model 'rr-404'" in message
    assert engine.catalog.find_knowledge_base("mindsdb", "kb") is None


def test_unknown_provider_is_a_clear_error(engine: Engine) -> None:
    message = sql_error(engine, "CREATE KNOWLEDGE_BASE kb USING embedding_model = "
                                '{"provider": "nope", "model_name": "m"}')
    assert "'nope'" in message and "not supported" in message


@pytest.mark.parametrize("provider", ["anthropic", "ollama", "opneai"])
def test_an_unknown_reranker_is_refused_and_nothing_is_sent(engine: Engine, fake: FakeProvider,
                                                            provider: str) -> None:
    """A typo or an unsupported provider must not fall through to the OpenAI chat scorer
    (which would send the key to api.openai.com): 400 naming the supported providers."""
    reranker = {"provider": provider, "model_name": "rr", "api_key": "sk-rerank-secret",
                "base_url": f"{fake.url}/v1"}
    message = sql_error(engine, "CREATE KNOWLEDGE_BASE kb USING embedding_model = "
                                '{"provider": "kbsql", "model_name": "hash-64"}, '
                                f"reranking_model = {json.dumps(reranker)}")
    assert f"'{provider}'" in message and "not supported" in message and "cohere" in message
    assert "sk-rerank-secret" not in message
    assert fake.requests == [] and engine.catalog.find_knowledge_base("mindsdb", "kb") is None
    with pytest.raises(BadRequest, match="not supported"):
        engine.create_knowledge_base("mindsdb", {"name": "kb2", "reranking_model": reranker,
                                                 "embedding_model": {"provider": "kbsql",
                                                                     "model_name": "hash-64"}})


@pytest.mark.parametrize("provider", ["azure_openai", "vllm", "lmstudio", "llamacpp", "openai_compatible"])
@pytest.mark.parametrize("role", ["embedding_model", "reranking_model"])
def test_openai_style_providers_other_than_openai_need_a_base_url(engine, provider, role):
    """Without a base_url only `openai` means api.openai.com; another provider's key is never
    sent there by guess: the create fails naming the provider, and nothing is stored."""
    descriptor = {"provider": provider, "model_name": "m", "api_key": "az-secret"}
    with pytest.raises(ProviderError, match=f"'{provider}'.*needs a base_url") as exc:
        engine.create_knowledge_base("mindsdb", {"name": "kb", role: descriptor})
    assert "az-secret" not in str(exc.value)
    assert engine.list_knowledge_bases("mindsdb") == []
