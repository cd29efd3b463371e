"""A knowledge base created without an embedding model keeps the configured default one.

MindsDB saves `default_embedding_model` into the knowledge base at CREATE (its executor test
test_save_default_params): the stored vectors were made by that model, so a later change of
the default must not search them with another. kbsql keeps the model without its key (the
server's key stays out of the catalog) and lends the key while the default is that model.
"""

from __future__ import annotations

import json
from pathlib import Path

import kbsql
from kbsql.interface.results import ErrorResult
from tests.knowledge.fakes import FakeProvider

HASH64 = {"provider": "kbsql", "model_name": "hash-64"}


def _engine(path: Path, default: dict | None) -> kbsql.Client:
    return kbsql.connect(data_dir=path, settings={"default_embedding_model": default} if default else None,
                         progress=None)


def _ids(client: kbsql.Client, query: str) -> list[str]:
    return list(client.query(query)["id"])


def test_the_default_model_is_kept_without_its_key_and_outlives_a_new_default(tmp_path: Path) -> None:
    with FakeProvider() as fake:
        default = {"provider": "openai", "model_name": "text-embedding-3-small", "api_key": "sk-default-1",
                   "base_url": f"{fake.url}/v1"}
        with _engine(tmp_path, default) as client:
            client.sql("CREATE KNOWLEDGE_BASE kb1")
            described = json.loads(client.query("DESCRIBE KNOWLEDGE_BASE kb1")["EMBEDDING_MODEL"][0])
            assert described == {k: v for k, v in default.items() if k != "api_key"}
            client.sql("INSERT INTO kb1 (id, content) VALUES (1, 'white cat'), (2, 'green dog')")
            assert _ids(client, "SELECT id FROM kb1 WHERE content = 'white cat'")[0] == "1"
            assert fake.requests[-1][2]["Authorization"] == "Bearer sk-default-1"  # the key is lent
        catalog = b"".join(p.read_bytes() for p in tmp_path.rglob("*.sqlite*"))
        assert b"sk-default-1" not in catalog
        calls = fake.embed_calls
        with _engine(tmp_path, HASH64) as client:  # the default changed: kb1 keeps its model
            assert _ids(client, "SELECT id FROM kb1 WHERE content = 'white cat'")[0] == "1"
            assert fake.embed_calls == calls + 1
            assert "Authorization" not in fake.requests[-1][2]  # not the old key, not the new model


def test_a_search_by_a_model_of_another_size_is_one_error_line(tmp_path: Path) -> None:
    """A knowledge base made before a default was configured embeds with the bundled model
    (384-d); once the default is hash-64, its search vectors are 64-d: FAISS failed with a bare
    AssertionError, now one line names both sizes."""
    with _engine(tmp_path, None) as client:
        client.sql("CREATE KNOWLEDGE_BASE kbm")
        client.sql("INSERT INTO kbm (id, content) VALUES (1, 'white cat')")
    with _engine(tmp_path, HASH64) as client:
        result = client.sql("SELECT id FROM kbm WHERE content = 'white cat'", raise_on_error=False)
        assert isinstance(result, ErrorResult)
        message = result.to_exception().message
        assert "returned 64-d vectors" in message and "holds 384-d" in message and "\n" not in message
