"""The protocol is the boundary: the server serves any `ServiceApi`, and what a backend
offers beyond it is declared as capabilities (`interface/api.py`), never probed for.

- The engine declares files as tables, knowledge-base editing and chunk vectors; the HTTP
  client declares the first two (the API never sends embeddings) and does them over HTTP.
- A server over a backend that lacks a capability answers its route with one clear line.
- An insert batch (`PUT` of rows) reads the knowledge base once and answers the view it
  stored, the same one a GET returns after it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from kbsql.client.http import HttpApi
from kbsql.engine import Engine
from kbsql.engine.catalog import Catalog
from kbsql.interface.api import FileTables, KnowledgeBaseEditing, KnowledgeBaseVectors
from kbsql.server.app import build_app

HASH = {"provider": "kbsql", "model_name": "hash-64"}
NEW_KB = {"knowledge_base": {"name": "kb", "embedding_model": HASH}}
KBS = "/api/projects/mindsdb/knowledge_bases"


def test_each_backend_declares_what_it_offers(engine: Engine, server_url: str) -> None:
    assert isinstance(engine, FileTables) and isinstance(engine, KnowledgeBaseEditing)
    assert isinstance(engine, KnowledgeBaseVectors)
    with _closing(HttpApi(server_url)) as api:
        assert isinstance(api, FileTables) and isinstance(api, KnowledgeBaseEditing)
        assert not isinstance(api, KnowledgeBaseVectors)


class _closing:
    def __init__(self, api: HttpApi):
        self.api = api

    def __enter__(self) -> HttpApi:
        return self.api

    def __exit__(self, *exc: object) -> None:
        self.api.close()


def test_the_http_client_edits_and_uploads_over_http(server_url: str) -> None:
    with _closing(HttpApi(server_url)) as api:
        api.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": HASH,
                                              "metadata_columns": ["kind"]})
        altered = api.alter_knowledge_base("mindsdb", "kb", {"metadata_columns": ["kind", "size"]})
        assert altered.to_json()["metadata_columns"] == ["kind", "size"]
        assert api.register_file("notes", b"id,content,kind\n1,pumps move water,a\n2,fans move air,b\n",
                                 "text/csv") == 2
        assert api.insert_query_into_knowledge_base("mindsdb", "kb", "SELECT * FROM df.notes") == 2
        found = api.query("SELECT id FROM kb WHERE kind = :kind", None, {"kind": "b"})
        assert found.to_json()["data"] == [["2"]]
        assert api.unregister_dataframe("notes") is True
        assert api.unregister_dataframe("notes") is False


class _OnlyTheProtocol:
    """A backend offering `ServiceApi` and nothing more (it forwards to an engine)."""

    embedded = False

    def __init__(self, engine: Engine):
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        if name in ("register_file", "unregister_dataframe", "alter_knowledge_base",
                    "insert_query_into_knowledge_base", "knowledge_base_vectors"):
            raise AttributeError(name)
        return getattr(self._engine, name)


@pytest.fixture
def bare_server(engine: Engine) -> Iterator[str]:
    """`build_app` over `_OnlyTheProtocol`, served by uvicorn on a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    app = build_app(_OnlyTheProtocol(engine), bind_host="127.0.0.1")  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)


def test_a_route_needing_an_undeclared_capability_says_so(bare_server: str) -> None:
    assert httpx.get(f"{bare_server}/api/status").status_code == 200
    upload = httpx.put(f"{bare_server}/api/files/t", content=b"a\n1\n", headers={"Content-Type": "text/csv"})
    assert upload.status_code == 400
    assert upload.json()["detail"] == "not supported by this service: files uploaded as tables"
    created = httpx.post(f"{bare_server}{KBS}", json=NEW_KB)
    assert created.status_code == 201, created.text
    rows = httpx.put(f"{bare_server}{KBS}/kb", json={"knowledge_base": {"rows": [{"id": 1, "content": "x"}]}})
    assert rows.status_code == 200 and rows.json()["inserted_rows"] == 1  # rows need only the protocol
    alter = httpx.put(f"{bare_server}{KBS}/kb", json={"knowledge_base": {"id_column": "id"}})
    assert alter.status_code == 400 and "not supported by this service" in alter.json()["detail"]


def test_an_insert_batch_reads_the_knowledge_base_once(engine: Engine, monkeypatch) -> None:
    engine.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": HASH})
    reads = []
    real = Catalog.knowledge_base

    def counted(self: Catalog, project: str, name: str) -> Any:
        reads.append(name)
        return real(self, project, name)

    monkeypatch.setattr(Catalog, "knowledge_base", counted)
    answer = engine.insert_knowledge_base_rows("mindsdb", "kb", [{"id": 1, "content": "pumps"},
                                                                 {"id": 2, "content": " "}])
    assert reads == ["kb"]
    monkeypatch.setattr(Catalog, "knowledge_base", real)
    assert answer == {**engine.get_knowledge_base("mindsdb", "kb").to_json(), "inserted_rows": 1}


def test_an_insert_batch_over_http_answers_the_stored_view(server_url: str) -> None:
    created = httpx.post(f"{server_url}{KBS}", json=NEW_KB)
    assert created.status_code == 201, created.text
    put = httpx.put(f"{server_url}{KBS}/kb", json={"knowledge_base": {"rows": [{"id": 1, "content": "x"}]}})
    got = httpx.get(f"{server_url}{KBS}/kb").json()
    assert put.json() == {**got, "inserted_rows": 1}
    assert got["updated_at"] >= created.json()["created_at"]


def test_the_notebook_never_probes_the_service() -> None:
    """The notebook tells embedded from remote by `ServiceApi.embedded`, not by looking for
    a `data_dir` attribute, and the map by the declared `KnowledgeBaseVectors`."""
    source = Path(__file__).resolve().parents[1] / "src" / "kbsql" / "notebook"
    probes = [f"{p.name}: {line.strip()}" for p in source.rglob("*.py")
              for line in p.read_text(encoding="utf-8").splitlines()
              if "getattr(" in line and ".api" in line]
    assert probes == []
