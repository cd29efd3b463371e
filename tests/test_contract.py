"""The contract, case by case, against the embedded engine and a real `kbsql serve`.

Written from ../shared/spec/service-interface.md and reference-behaviour.md; the `client`
fixture runs every case on both transports, so embedded and remote cannot drift apart.
"""

from __future__ import annotations

import re

import pytest

import kbsql
from kbsql.interface import Agent, BadRequest, Conflict, KnowledgeBase, NotFound, SqlError
from kbsql.interface.results import OkResult, TableResult
from tests.conftest import start_server, stop_server

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$")
KB_FIELDS_CREATE = ["id", "name", "project_id", "vector_database", "vector_database_table",
                    "created_at", "updated_at", "query_id", "embedding_model", "reranking_model",
                    "metadata_columns", "content_columns", "id_column", "params"]
HASH_MODEL = {"provider": "kbsql", "model_name": "hash-64", "api_key": "sk-secret-embedding"}


@pytest.fixture(scope="module")
def server_url_for_file(tmp_path_factory):
    """One `kbsql serve` for the file's http cases (~1.2 CPU-s a start): the `client` fixture
    hands each case an empty catalog, as a fresh server would."""
    proc, url = start_server(tmp_path_factory.mktemp("contract") / "server")
    yield url
    stop_server(proc)


@pytest.fixture
def client_on_shared_server(server_url_for_file):
    """A new client (its own context) on the file's server; what the case created is dropped
    afterwards, so the next case starts on an empty catalog (asserted)."""
    c = kbsql.connect(server_url_for_file)
    assert c.knowledge_bases.list() == [] and c.agents.list() == []
    yield c
    for agent in c.agents.list():
        c.agents.delete(agent.name)
    for kb in c.knowledge_bases.list():
        c.knowledge_bases.delete(kb.name)
    c.close()


@pytest.fixture(params=["embedded", "http", "pgvector"])
def client(request, tmp_path, monkeypatch):
    """The conftest's embedded client, a real `kbsql serve`, plus an embedded engine on a
    shared PostgreSQL catalog, where every knowledge base is stored in pgvector: the contract
    must not depend on where the chunks live."""
    if request.param == "embedded":
        yield request.getfixturevalue("client_embedded")
        return
    if request.param == "http":
        yield request.getfixturevalue("client_on_shared_server")
        return
    monkeypatch.setenv("KBSQL_CATALOG_URL", request.getfixturevalue("pgvector_dsn"))
    c = kbsql.connect(data_dir=tmp_path / "shared")
    yield c
    c.close()


def test_bare_knowledge_base_create_get_list(client):
    created = client.knowledge_bases.create("kb_bare")
    body = created.to_json()
    assert list(body) == KB_FIELDS_CREATE  # no project_name in the create response
    assert body["params"] == {"created_embedding_model": "kb_embedding_kb_bare"}
    for key in ("embedding_model", "reranking_model", "metadata_columns", "content_columns",
                "id_column", "query_id"):
        assert body[key] is None, key
    assert isinstance(body["id"], int) and isinstance(body["project_id"], int)
    assert TIMESTAMP.match(body["created_at"]) and TIMESTAMP.match(body["updated_at"])

    got = client.knowledge_bases.get("kb_bare").to_json()
    assert got["project_name"] == "mindsdb"
    assert got["id"] == body["id"] and got["created_at"] == body["created_at"]

    listed = client.knowledge_bases.list()
    assert [k.name for k in listed] == ["kb_bare"]
    assert listed[0].project_name == "mindsdb"
    assert isinstance(listed[0].params["default_vector_storage"], str)
    assert listed[0].params["created_embedding_model"] == "kb_embedding_kb_bare"


def default_storage(client) -> str:
    """The vector database a KB gets without `storage` (the local store, or pgvector on a
    shared catalog): a storage that exists, to see it echoed."""
    probe = client.knowledge_bases.create("kb_probe", embedding_model=HASH_MODEL).to_json()
    client.knowledge_bases.delete("kb_probe")
    return probe["vector_database"]


def test_knowledge_base_full_create_masks_keys_and_echoes_storage(client):
    kb = client.knowledge_bases.create(
        "kb_full", embedding_model=HASH_MODEL,
        storage={"database": default_storage(client), "table": "docs"},
        content_columns=["body"], metadata_columns=["product"], id_column="doc_id")
    body = kb.to_json()
    assert body["vector_database"] == default_storage(client)
    assert body["vector_database_table"] == "docs"
    assert body["embedding_model"]["provider"] == "kbsql"
    assert body["embedding_model"]["model_name"] == "hash-64"
    assert set(body["embedding_model"]["api_key"]) == {"*"}
    assert body["content_columns"] == ["body"] and body["metadata_columns"] == ["product"]
    assert body["id_column"] == "doc_id"
    for view in (client.knowledge_bases.get("kb_full"), client.knowledge_bases.list()[0]):
        assert set(view.to_json()["embedding_model"]["api_key"]) == {"*"}
        assert "sk-secret" not in str(view.to_json())
    assert "sk-secret" not in repr(kb)


def test_knowledge_base_errors(client):
    client.knowledge_bases.create("dup")
    with pytest.raises(Conflict) as exc:
        client.knowledge_bases.create("dup")
    assert exc.value.title == "Knowledge Base already exists"
    with pytest.raises(NotFound) as exc:
        client.knowledge_bases.get("kb9")
    assert exc.value.title == "Knowledge Base not found"
    assert exc.value.detail == "Knowledge Base with name kb9 does not exist"
    with pytest.raises(NotFound) as exc:
        client.knowledge_bases.list(project="nope")
    assert exc.value.title == "Project not found"
    with pytest.raises(BadRequest):
        client.knowledge_bases.create("")
    with pytest.raises(BadRequest):
        client.knowledge_bases.create("ok_name", content_columns=["body", 3])
    with pytest.raises(NotFound):
        client.knowledge_bases.delete("kb9")
    # a failed create stored nothing, the good one is intact
    assert [k.name for k in client.knowledge_bases.list()] == ["dup"]


def test_knowledge_base_delete(client):
    client.knowledge_bases.create("gone")
    client.knowledge_bases.create("kept")
    assert client.knowledge_bases.delete("gone") is None
    assert [k.name for k in client.knowledge_bases.list()] == ["kept"]
    with pytest.raises(NotFound):
        client.knowledge_bases.get("gone")


def test_agent_create_with_model_returns_key_as_sent(client):
    model = {"provider": "kbsql", "model_name": "retrieval", "api_key": "sk-agent-key"}
    data = {"knowledge_bases": ["mindsdb.*"], "tables": []}
    agent = client.agents.create("helper", model=model, data=data,
                                 prompt_template="Answer from the docs.")
    body = agent.to_json()
    assert list(body) == ["id", "name", "project_id", "created_at", "updated_at", "model", "data",
                          "prompt_template"]
    assert body["model"] == model  # the contract returns the agent's api_key unmasked
    assert body["data"] == data
    assert body["prompt_template"] == "Answer from the docs."
    assert TIMESTAMP.match(body["created_at"])
    assert "sk-agent-key" not in repr(agent)  # but a repr in a notebook never shows it


def test_agent_without_model_uses_configured_default(client):
    agent = client.agents.create("plain")
    assert agent.model is not None
    assert agent.model.provider == "kbsql" and agent.model.model_name == "retrieval"
    assert agent.data == {"knowledge_bases": [], "tables": []}


def test_agent_partial_update_keeps_other_fields(client):
    client.agents.create("upd", data={"knowledge_bases": ["mindsdb.kb1"], "tables": ["ds.t"]},
                         prompt_template="original prompt")
    new_model = {"provider": "kbsql", "model_name": "retrieval", "api_key": "k2"}
    updated = client.agents.update("upd", model=new_model)
    assert updated.name == "upd"
    assert updated.model.to_json() == new_model
    assert updated.data == {"knowledge_bases": ["mindsdb.kb1"], "tables": ["ds.t"]}
    assert updated.prompt_template == "original prompt"
    renamed = client.agents.update("upd", new_name="upd2", prompt_template="new prompt")
    assert renamed.name == "upd2" and renamed.prompt_template == "new prompt"
    assert renamed.data["tables"] == ["ds.t"]
    assert client.agents.get("upd2").model.to_json() == new_model


def test_agent_get_list_delete_and_errors(client):
    client.agents.create("a1")
    client.agents.create("a2")
    assert [a.name for a in client.agents.list()] == ["a1", "a2"]
    assert isinstance(client.agents.get("a1"), Agent)
    with pytest.raises(Conflict):
        client.agents.create("a1")
    assert client.agents.delete("a1") is None
    with pytest.raises(NotFound):
        client.agents.get("a1")
    with pytest.raises(NotFound):
        client.agents.update("a1", prompt_template="x")
    with pytest.raises(BadRequest):
        client.agents.create("bad", model={"model_name": "no provider"})
    assert [a.name for a in client.agents.list()] == ["a2"]


def test_sql_constant_query_and_context_round_trip(client):
    result = client.sql("SELECT 1 AS one, 'two' AS two")
    assert isinstance(result, TableResult)
    assert result.column_names == ["one", "two"]
    assert result.data == [[1, "two"]]
    assert result.context == {"show_secrets": False, "db": "mindsdb"}
    frame = result.to_pandas()
    assert list(frame.columns) == ["one", "two"] and frame.iloc[0, 1] == "two"


def test_sql_errors_are_results_not_exceptions_on_the_wire(client):
    raw = client.sql("SELEC 1", raise_on_error=False)
    assert raw.type == "error" and "SELEC" in raw.error_message
    with pytest.raises(SqlError) as exc:
        client.sql("SELECT 1; SELECT 2")
    assert "single" in exc.value.message.lower()
    with pytest.raises(SqlError):
        client.sql("USE no_such_project")
    assert client.project == "mindsdb"  # a failed USE leaves the context alone


def test_use_changes_context(client):
    # creating projects is the SQL issue's; the default project must always be usable
    result = client.sql("USE mindsdb")
    assert isinstance(result, OkResult)
    assert result.context["db"] == "mindsdb"


def test_projects(client):
    assert "mindsdb" in client.projects()
    assert client.api.get_project("mindsdb") == {"name": "mindsdb"}
    with pytest.raises(NotFound):
        client.api.get_project("nope")


def test_objects_keep_exact_json(client):
    kb = client.knowledge_bases.create("exact")
    assert isinstance(kb, KnowledgeBase)
    again = KnowledgeBase.from_json(kb.to_json())
    assert again.to_json() == kb.to_json()


def test_resource_json_follows_the_interface_field_lists(client):
    # the order is declared once, in kbsql.interface.models; every view follows it
    created = client.knowledge_bases.create("ordered", embedding_model=HASH_MODEL)
    assert list(created.to_json()) == [f for f in KnowledgeBase.FIELDS if f != "project_name"]
    assert list(client.knowledge_bases.get("ordered").to_json()) == list(KnowledgeBase.FIELDS)
    assert list(client.knowledge_bases.list()[0].to_json()) == list(KnowledgeBase.FIELDS)
    made = client.agents.create("ordered_agent")
    assert list(made.to_json()) == list(Agent.FIELDS)
    assert list(client.agents.list()[0].to_json()) == list(Agent.FIELDS)


def test_knowledge_bases_and_agents_share_one_namespace(client):
    client.knowledge_bases.create("shared")
    client.agents.create("helper")
    with pytest.raises(Conflict) as exc:
        client.agents.create("shared")
    assert exc.value.title == "Name already in use"
    assert "knowledge base named shared" in exc.value.detail
    with pytest.raises(Conflict) as exc:
        client.knowledge_bases.create("HELPER")  # names are case-insensitive, like SQL's
    assert "agent named HELPER" in exc.value.detail
    with pytest.raises(Conflict):
        client.agents.update("helper", new_name="shared")
    # nothing stored was touched, and SQL still tells the two apart
    assert [a.name for a in client.agents.list()] == ["helper"]
    assert [k.name for k in client.knowledge_bases.list()] == ["shared"]
    raw = client.sql("CREATE AGENT shared USING model = {'provider': 'kbsql'}",
                     raise_on_error=False)
    assert raw.type == "error" and "share one namespace" in raw.error_message
    raw = client.sql("CREATE KNOWLEDGE_BASE IF NOT EXISTS helper", raise_on_error=False)
    assert raw.type == "error" and "agent named helper" in raw.error_message
    assert client.agents.update("helper", new_name="Helper").name == "Helper"  # own name: fine


@pytest.mark.parametrize("reserved", ["df", "information_schema", "files", "mindsdb", "DF"])
def test_built_in_names_are_reserved(client, reserved):
    with pytest.raises(BadRequest) as exc:
        client.knowledge_bases.create(reserved)
    assert exc.value.title == "Reserved name" and reserved in exc.value.detail
    with pytest.raises(BadRequest):
        client.agents.create(reserved)
    raw = client.sql(f"CREATE KNOWLEDGE_BASE {reserved}", raise_on_error=False)
    assert raw.type == "error" and "reserved" in raw.error_message
    assert client.knowledge_bases.list() == [] and client.agents.list() == []


def test_names_are_capped_at_128_characters(client):
    assert client.knowledge_bases.create("k" * 128).name == "k" * 128
    with pytest.raises(BadRequest) as exc:
        client.knowledge_bases.create("k" * 129)
    assert "128" in exc.value.detail
    with pytest.raises(BadRequest):
        client.agents.create("a" * 5000)
    assert [k.name for k in client.knowledge_bases.list()] == ["k" * 128]
