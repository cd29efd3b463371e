"""mindsdb_sdk 3.5 (the reference's Python SDK) against a real `kbsql serve` on loopback:
its knowledge-base, agent, database and file calls (issue 12)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from kbsql.engine import Engine
from tests.conftest import start_server, stop_server

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")

HASH = {"provider": "kbsql", "model_name": "hash-64"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, Path]]:
    base = tmp_path_factory.mktemp("sdk")
    proc, url = start_server(base / "server")
    yield mindsdb_sdk.connect(url), base
    stop_server(proc)


def test_sdk_databases_and_files(server: tuple[object, Path]) -> None:
    sdk, base = server
    db_file = base / "shop.duckdb"
    with duckdb.connect(str(db_file)) as con:
        con.execute("CREATE TABLE orders AS SELECT * FROM (VALUES ('A1B', 'Wireless Mouse', "
                    "'Request color: black'), ('3XZ', 'Bluetooth Speaker', 'Gift wrap requested')) "
                    "t(order_id, product, notes)")
    shop = sdk.databases.create("shop", engine="duckdb", connection_args={"database": str(db_file)})
    assert "shop" in [d.name for d in sdk.databases.list()]
    frame = shop.query("SELECT order_id FROM shop.orders ORDER BY order_id").fetch()
    assert list(frame["order_id"]) == ["3XZ", "A1B"]
    # a file upload as the SDK sends it: multipart PUT /api/files/{name}, the table files.<name>
    sdk.api.upload_file("notes_csv", pd.DataFrame({"id": [1, 2], "body": ["alpha", "beta"]}))
    uploaded = sdk.query("SELECT body FROM files.notes_csv ORDER BY id").fetch()
    assert list(uploaded["body"]) == ["alpha", "beta"]
    assert sdk.api.get_file_metadata("notes_csv")["name"] == "notes_csv"


def test_sdk_knowledge_bases(server: tuple[object, Path]) -> None:
    sdk, _ = server
    project = sdk.get_project("mindsdb")
    kb = project.knowledge_bases.create("sdk_kb", embedding_model=HASH, metadata_columns=["product"],
                                        content_columns=["notes"], id_column="order_id")
    assert kb.name == "sdk_kb" and kb.content_columns == ["notes"]
    kb.insert(pd.DataFrame({"order_id": ["Q7P"], "product": ["Laptop Stand"],
                            "notes": ["Prefer aluminum finish"]}))
    kb.insert({"order_id": "Z1", "product": "Lamp", "notes": "Warm white light"})
    kb.insert(sdk.databases.get("shop").tables.get("orders"))  # a query: PUT with `query`
    found = kb.find("aluminum finish", limit=2).fetch()
    assert found["id"].iloc[0] == "Q7P" and len(found) == 2
    assert len(project.query("SELECT * FROM sdk_kb").fetch()) == 4
    assert [k.name for k in project.knowledge_bases.list()] == ["sdk_kb"]
    project.knowledge_bases.drop("sdk_kb")
    assert project.knowledge_bases.list() == []


def test_sdk_knowledge_base_params_are_checked(server: tuple[object, Path]) -> None:
    """`knowledge_bases.create(..., params=...)` (and SQL's USING): a key MindsDB's
    KnowledgeBaseInputParams forbids is refused with its message; it was stored without a
    word and read by nothing (`params={'chunk_size': 200}` chunked at the default size)."""
    sdk, _ = server
    kbs = sdk.get_project("mindsdb").knowledge_bases
    with pytest.raises(Exception, match="Parameter 'chunk_size' is not allowed"):
        kbs.create("sized_kb", embedding_model=HASH, params={"chunk_size": 200})
    with pytest.raises(Exception, match="Parameter 'a' is not allowed"):  # the SDK docstring's example
        kbs.create("sized_kb", embedding_model=HASH, params={"a": 1})
    with pytest.raises(RuntimeError, match="Parameter 'chunk_size' is not allowed"):
        sdk.query("CREATE KNOWLEDGE_BASE sized_kb USING embedding_model = {'provider': 'kbsql', "
                  "'model_name': 'hash-64'}, chunk_size = 200").fetch()
    with pytest.raises(Exception, match="not supported by the local engine: sparse vectors"):
        kbs.create("sized_kb", embedding_model=HASH, params={"is_sparse": True, "vector_size": 64})
    assert "sized_kb" not in [k.name for k in kbs.list()]  # nothing half-made
    kb = kbs.create("sized_kb", embedding_model=HASH, params={
        "preprocessing": {"text_chunking_config": {"chunk_size": 20, "chunk_overlap": 0}},
        "kb_skip_existing": True})  # MindsDB's way to size chunks; an insert option, accepted as there
    kb.insert([{"id": 1, "content": "word " * 40}])
    assert len(sdk.query("SELECT chunk_id FROM sized_kb").fetch()) == 10
    kbs.drop("sized_kb")


def test_sdk_agents(server: tuple[object, Path]) -> None:
    sdk, _ = server
    project = sdk.get_project("mindsdb")
    project.knowledge_bases.create("agent_kb", embedding_model=HASH)
    project.knowledge_bases.get("agent_kb").insert([{"id": 1, "content": "Refunds take 5 days."}])
    agent = project.agents.create("sdk_agent", model={"provider": "kbsql", "model_name": "retrieval"},
                                  data={"knowledge_bases": ["mindsdb.agent_kb"]})
    assert agent.name == "sdk_agent"
    answer = agent.completion([{"question": "How long do refunds take?", "answer": None}])
    assert "5 days" in answer.content
    chunks = list(project.agents.completion_stream("sdk_agent", [{"question": "refunds?", "answer": None}]))
    assert chunks[-1] == {"type": "end"} and any("output" in c for c in chunks)
    agent.prompt_template = "Answer briefly."
    updated = project.agents.update("sdk_agent", agent)
    assert updated.prompt_template == "Answer briefly."
    assert [a.name for a in project.agents.list()] == ["sdk_agent"]
    project.agents.drop("sdk_agent")
    assert project.agents.list() == []


def test_sdk_files_database_tables_and_database_update(server: tuple[object, Path]) -> None:
    """Issue 23: the `files` database as the SDK reaches it (upload, list, read back, drop),
    and `databases.update` (ALTER DATABASE, checked before it is kept)."""
    sdk, base = server
    files = sdk.databases.get("files")
    files.tables.create("sdk_notes", pd.DataFrame({"id": [1, 2], "body": ["alpha", "beta"]}))
    assert "sdk_notes" in [t.name for t in files.tables.list()]
    read = files.tables.get("sdk_notes").fetch()
    assert sorted(read["body"]) == ["alpha", "beta"]
    assert sdk.api.get_file_metadata("sdk_notes") == {"name": "sdk_notes", "row_count": 2,
                                                      "columns": ["id", "body"]}
    files.tables.drop("sdk_notes")
    assert "sdk_notes" not in [t.name for t in files.tables.list()]
    for name in ("one", "two"):
        with duckdb.connect(str(base / f"{name}.duckdb")) as con:
            con.execute(f"CREATE TABLE items AS SELECT '{name}' AS source")
    sdk.databases.create("moving", engine="duckdb", connection_args={"database": str(base / "one.duckdb")})
    moved = sdk.databases.update("moving", {"database": str(base / "two.duckdb")})
    assert moved.name == "moving"
    assert list(sdk.query("SELECT source FROM moving.items").fetch()["source"]) == ["two"]
    with pytest.raises(Exception, match=r"missing\.duckdb"):  # a source that cannot be reached is not kept
        sdk.databases.update("moving", {"database": str(base / "missing.duckdb")})
    assert list(sdk.query("SELECT source FROM moving.items").fetch()["source"]) == ["two"]
    sdk.databases.drop("moving")
    assert "moving" not in [d.name for d in sdk.databases.list()]


def test_sdk_agent_params_and_drop(server: tuple[object, Path]) -> None:
    """Issue 23: an agent's params round-trip through the SDK; its drop is MindsDB's 204."""
    sdk, _ = server
    project = sdk.get_project("mindsdb")
    agent = project.agents.create("timed_agent", model={"provider": "kbsql", "model_name": "retrieval"},
                                  params={"timeout": 30})
    assert agent.params == {"timeout": 30}
    assert project.agents.get("timed_agent").params == {"timeout": 30}
    project.agents.drop("timed_agent")
    assert "timed_agent" not in [a.name for a in project.agents.list()]


def _items_database(sdk: Any, base: Path, name: str) -> Any:
    """A DuckDB file holding `items` (1 pen, 2 cup), connected through the SDK as `name`."""
    path = str(base / f"{name}.duckdb")
    with duckdb.connect(path) as con:
        con.execute("CREATE TABLE items AS SELECT * FROM (VALUES (1, 'pen'), (2, 'cup')) t(id, item)")
    return sdk.databases.create(name, engine="duckdb", connection_args={"database": path})


def test_sdk_views_and_tree(server: tuple[object, Path]) -> None:
    """`views.list()` / `views.get()` and `server.tree()` / `database.tree()` read MindsDB's
    GET /api/tree/{db} (a view is a leaf of type `view`); kbsql had no such route, so every
    one of them failed with a 404."""
    sdk, base = server
    trees = _items_database(sdk, base, "trees")
    project = sdk.projects.create("tree_proj")
    project.views.create("cheap", "SELECT item FROM trees.items WHERE id = 1")
    project.jobs.create("tree_job", query_str="SELECT 1", repeat_str="1 day")
    assert [v.name for v in project.views.list()] == ["cheap"]
    assert list(project.views.get("cheap").fetch()["item"]) == ["pen"]
    with pytest.raises(AttributeError, match="View doesn't exist"):
        project.views.get("dear")
    leaves = {(n.name, n.class_, n.type) for n in sdk.tree()}
    assert {("mindsdb", "db", "project"), ("tree_proj", "db", "project"), ("trees", "db", "data"),
            ("files", "db", "data"), ("information_schema", "db", "system")} <= leaves
    deletable = {n.name: n.deletable for n in sdk.tree()}
    assert deletable["tree_proj"] and deletable["trees"]
    assert not deletable["mindsdb"] and not deletable["files"]
    assert [(n.name, n.type) for n in trees.tree()] == [("items", "table")]
    assert [(n.name, n.class_, n.type) for n in sdk.api.objects_tree("tree_proj").apply(
        lambda r: mindsdb_sdk.tree.TreeNode.from_dict(r.to_dict()), axis=1)] == [
        ("models", "table", "table"), ("cheap", "table", "view"), ("tree_job", "job", "job")]
    with pytest.raises(Exception, match="There is no element with name 'nowhere'"):
        sdk.api.objects_tree("nowhere")
    project.jobs.drop("tree_job")
    project.views.drop("cheap")
    assert project.views.list() == []
    sdk.projects.drop("tree_proj")
    sdk.databases.drop("trees")


def test_sdk_native_queries_are_refused_in_one_line(server: tuple[object, Path]) -> None:
    """`tables.create(name, db.query(...))`, `table.insert(db.query(...))` and
    `table.update(db.query(...), on=...)` send MindsDB's native query `FROM db (<text>)`; it
    is refused naming it (it was "Table functions are not allowed: SHOP(...)"), and the
    forms in this dialect work."""
    sdk, base = server
    native = _items_database(sdk, base, "native")
    items = native.tables.get("items")
    for call in (lambda: native.tables.create("copy", native.query("SELECT * FROM items")),
                 lambda: items.insert(native.query("SELECT 3 AS id, 'ink' AS item")),
                 lambda: items.update(native.query("SELECT 1 AS id, 'pin' AS item"), on=["id"])):
        with pytest.raises(RuntimeError) as refused:
            call()
        message = str(refused.value)
        assert message.startswith("not supported by the local engine: native queries") and "\n" not in message
        assert "native.<table>" in message
    assert "copy" not in [t.name for t in native.tables.list()]
    assert sorted(items.fetch()["item"]) == ["cup", "pen"]  # nothing inserted or updated
    native.tables.create("copy", items.filter(id=2))  # a Table: CREATE TABLE ... (SELECT ...)
    assert list(native.tables.get("copy").fetch()["item"]) == ["cup"]
    sdk.databases.drop("native")


def test_sdk_server_config(server: tuple[object, Path], tmp_path: Path) -> None:
    """`server.config.get_default_*()` read MindsDB's GET /api/config (kbsql had no such route:
    a 404 "No route"); `set_default_*` is refused in one line naming where the defaults are set."""
    sdk, _ = server
    assert sdk.config.get_default_llm() == {"provider": "kbsql", "model_name": "retrieval"}
    assert sdk.config.get_default_embedding_model() == {"provider": "kbsql", "model_name": "all-MiniLM-L6-v2"}
    assert sdk.config.get_default_reranking_model() == {}  # none here; MindsDB also leaves it out
    assert sdk.api.get_config()["auth"] == {"http_auth_enabled": False}
    refusal = "not supported by this service: changing the server's configuration"
    with pytest.raises(Exception, match=refusal) as refused:
        sdk.config.set_default_llm("openai", "gpt-4o", api_key="sk-test")
    assert "config.json" in str(refused.value) and "\n" not in str(refused.value)
    assert sdk.config.get_default_llm()["provider"] == "kbsql"  # nothing changed
    with Engine(tmp_path / "keyed", settings={"default_model": {
            "provider": "openai", "model_name": "gpt-4o", "api_key": "sk-secret"}}) as engine:
        assert engine.default_models()["default_llm"]["api_key"] != "sk-secret"  # masked, not shown


def test_sdk_create_byom_is_refused_naming_the_feature(server: tuple[object, Path]) -> None:
    """`ml_engines.create_byom(...)` sends a multipart PUT to /api/handlers/byom/<name>: it was
    answered 415 "Content-Type 'multipart/form-data' is not accepted here: send
    application/json", as if the client had erred; it is refused naming the feature. The
    content-type guard still answers 415 to a multipart body anywhere else."""
    import httpx

    sdk, _ = server
    with pytest.raises(Exception, match="not supported by this service: BYOM models") as refused:
        sdk.ml_engines.create_byom("my_byom", code="class Model: pass", requirements=["pandas"])
    assert "\n" not in str(refused.value) and "Content-Type" not in str(refused.value)
    url = sdk.api.url
    form = {"code": ("code.py", b"class Model: pass")}
    assert httpx.post(f"{url}/api/handlers/byom/my_byom", files=form).status_code == 415
    assert httpx.put(f"{url}/api/projects/mindsdb/knowledge_bases/kb", files=form).status_code == 415
    assert httpx.post(f"{url}/api/sql/query", files=form).status_code == 415


def test_sdk_job_history_points_to_log(server: tuple[object, Path]) -> None:
    """`job.get_history()` reads `jobs_history` in the job's project, which MindsDB has not
    either; the error names where the runs are (it said only "a table of a data source is
    named <data_source>.<table>")."""
    sdk, _ = server
    job = sdk.jobs.create("history_job", query_str="SELECT 1", repeat_str="1 day")
    with pytest.raises(RuntimeError, match=r"Table 'jobs_history' not found .*log\.jobs_history"):
        job.get_history()
    runs = sdk.query("SELECT name FROM log.jobs_history WHERE name = 'history_job'").fetch()
    assert list(runs.columns) == ["name"]
    sdk.jobs.drop("history_job")


def test_sdk_agent_data_keys_are_checked(server: tuple[object, Path]) -> None:
    """`agents.create(..., data={'knowledge_base': 'kb'})`, the form of the SDK's own Agent
    docstring, made an agent with no knowledge base and no word (the key was dropped);
    MindsDB's AgentParamsData refuses it, and so does kbsql now, naming the key."""
    sdk, _ = server
    project = sdk.get_project("mindsdb")
    retrieval = {"provider": "kbsql", "model_name": "retrieval"}
    with pytest.raises(Exception, match=r"Parameter 'data\.knowledge_base' is not allowed"):
        project.agents.create("data_agent", model=retrieval, data={"knowledge_base": "agent_kb"})
    assert "data_agent" not in [a.name for a in project.agents.list()]
    agent = project.agents.create("data_agent", model=retrieval, data={"tables": []})
    agent.data = {"knowledge_base": "agent_kb"}
    with pytest.raises(Exception, match=r"Parameter 'data\.knowledge_base' is not allowed"):
        project.agents.update("data_agent", agent)
    with pytest.raises(RuntimeError, match=r"Parameter 'data\.kb' is not allowed"):
        sdk.query("ALTER AGENT data_agent USING data = {'kb': ['agent_kb']}").fetch()
    assert project.agents.get("data_agent").data == {"knowledge_bases": [], "tables": []}
    project.agents.drop("data_agent")


def test_sdk_agent_with_a_missing_knowledge_base_says_so(server: tuple[object, Path]) -> None:
    """An agent whose data names a knowledge base (or a table) that does not exist (a typo,
    or one dropped since) answered "I could not find anything about this in the data this agent is
    connected to", as if it had searched it; its run now fails naming the knowledge base, in
    completion, completion_stream and SQL alike (a pattern matching nothing stays a search
    of nothing, as MindsDB's wildcards are)."""
    sdk, _ = server
    project = sdk.get_project("mindsdb")
    project.knowledge_bases.create("present_kb", embedding_model=HASH)
    agent = project.agents.create("typo_agent", model={"provider": "kbsql", "model_name": "retrieval"},
                                  data={"knowledge_bases": ["present_kb", "absent_kb"]})
    question = [{"question": "refunds?", "answer": None}]
    with pytest.raises(Exception, match="Agent typo_agent's knowledge base absent_kb does not exist"):
        agent.completion(question)
    errors = [c for c in agent.completion_stream(question) if c.get("type") == "error"]
    assert len(errors) == 1 and "absent_kb does not exist" in errors[0]["content"]
    with pytest.raises(RuntimeError, match="absent_kb does not exist"):
        sdk.query("SELECT answer FROM typo_agent WHERE question = 'refunds?'").fetch()
    project.knowledge_bases.create("absent_kb", embedding_model=HASH)  # created after the agent: seen
    assert agent.completion(question).content
    agent.data = {"knowledge_bases": ["present_kb"], "tables": ["files.absent_table"]}  # a table too
    agent = project.agents.update("typo_agent", agent)
    with pytest.raises(Exception, match=r"Agent typo_agent's table files\.absent_table cannot be read"):
        agent.completion(question)
    project.agents.drop("typo_agent")
    project.knowledge_bases.drop("present_kb")
    project.knowledge_bases.drop("absent_kb")


def test_sdk_insert_options_with_rows_are_not_ignored(server: tuple[object, Path]) -> None:
    """`kb.insert(rows, params={'kb_skip_existing': True})` replaced the stored row (the option
    was ignored with rows, as MindsDB ignores it); it is refused naming the form that applies
    it, a misspelt option too, and the pacing options stay accepted."""
    sdk, _ = server
    kb = sdk.get_project("mindsdb").knowledge_bases.create("skip_kb", embedding_model=HASH)
    kb.insert([{"id": "a", "content": "first text"}])
    with pytest.raises(Exception, match="not supported by the local engine: kb_skip_existing with 'rows'"):
        kb.insert([{"id": "a", "content": "second text"}], params={"kb_skip_existing": True})
    with pytest.raises(Exception, match=r"Unknown insert option\(s\) \['kb_skip_exisitng'\]"):
        kb.insert([{"id": "a", "content": "second text"}], params={"kb_skip_exisitng": True})
    assert list(sdk.query("SELECT chunk_content FROM skip_kb").fetch()["chunk_content"]) == ["first text"]
    kb.insert([{"id": "b", "content": "other text"}], params={"batch_size": 10, "kb_skip_existing": False})
    # kb.insert(query, params) drops the params (the SDK calls insert_query(data) without them)
    again = sdk.query("SELECT 'a' AS id, 'second text' AS content")
    kb.insert_query(again, params={"kb_skip_existing": True})
    stored = sdk.query("SELECT id, chunk_content FROM skip_kb ORDER BY id").fetch()
    assert list(stored["chunk_content"]) == ["first text", "other text"]  # the query's option applied
    sdk.get_project("mindsdb").knowledge_bases.drop("skip_kb")


def test_sdk_uploads_a_one_column_dataframe(server: tuple[object, Path]) -> None:
    """`files.tables.create(name, df)` of a one-column DataFrame sends an extensionless CSV
    with no delimiter in its header; it was refused "Unable to detect format" (MindsDB's
    FileReader reads it as CSV). A binary file without a name's extension still is."""
    sdk, _ = server
    files = sdk.databases.get("files")
    files.tables.create("one_column", pd.DataFrame({"word": ["alpha", "beta"]}))
    assert list(files.tables.get("one_column").fetch()["word"]) == ["alpha", "beta"]
    with pytest.raises(Exception, match="Unable to detect format"):
        sdk.api.upload_data("binary_blob", b"\x00\x01\x02\x03")
    files.tables.drop("one_column")
