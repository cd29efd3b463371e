"""`kbsql serve` at the wire level: status codes, content types, error bodies, restarts."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import start_server, stop_server

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def module_url(tmp_path_factory):
    """One `kbsql serve` for the wire-level tests: each leaves the catalog as it found it (what
    it creates it drops, and asserts the listing empty again), so a fresh server per test (~1.2
    CPU-s each) shows nothing more. The restart and environment tests start their own."""
    proc, url = start_server(tmp_path_factory.mktemp("http") / "server")
    yield url
    stop_server(proc)


@pytest.fixture
def http(module_url):
    with httpx.Client(base_url=module_url, timeout=30) as c:
        yield c
        assert c.get("/api/projects/mindsdb/knowledge_bases").json() == []  # left as found
        assert c.get("/api/projects/mindsdb/agents").json() == []


def assert_problem(response: httpx.Response, status: int, title: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert set(body) == {"title", "detail"}
    assert body["detail"]
    if title:
        assert body["title"] == title
    return body


def test_status_and_projects(http):
    status = http.get("/api/status").json()
    assert status["auth"] == {"http_auth_enabled": False}
    assert http.get("/api/projects").json() == [{"name": "mindsdb"}]
    assert http.get("/api/projects/mindsdb").json() == {"name": "mindsdb"}
    assert_problem(http.get("/api/projects/nope"), 404, "Project not found")


def test_knowledge_base_routes_status_codes(http):
    path = "/api/projects/mindsdb/knowledge_bases"
    created = http.post(path, json={"knowledge_base": {"name": "kb1"}})
    assert created.status_code == 201
    assert created.headers["content-type"] == "application/json"
    assert "project_name" not in created.json()
    assert b": " not in created.content  # compact JSON, as the reference answers
    assert http.get(f"{path}/kb1").status_code == 200
    assert http.get(path).status_code == 200
    assert_problem(http.post(path, json={"knowledge_base": {"name": "kb1"}}), 409,
                   "Knowledge Base already exists")
    body = assert_problem(http.get(f"{path}/kb9"), 404, "Knowledge Base not found")
    assert body["detail"] == "Knowledge Base with name kb9 does not exist"
    assert_problem(http.post("/api/projects/nope/knowledge_bases",
                             json={"knowledge_base": {"name": "x"}}), 404, "Project not found")
    deleted = http.delete(f"{path}/kb1")
    assert deleted.status_code == 200 and deleted.content == b""
    assert http.get(path).json() == []


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"knowledge_base": "x"}',
                                     b'{"name": "missing wrapper"}', b'{"knowledge_base": {}}',
                                     b"\xff\xfe"])
def test_bad_bodies_are_400_never_500(http, content):
    response = http.post("/api/projects/mindsdb/knowledge_bases", content=content,
                         headers={"Content-Type": "application/json"})
    assert_problem(response, 400)
    assert http.get("/api/projects/mindsdb/knowledge_bases").json() == []


def test_agent_routes_status_codes(http):
    path = "/api/projects/mindsdb/agents"
    assert http.post(path, json={"agent": {"name": "a1"}}).status_code == 201
    assert_problem(http.post(path, json={"agent": {"name": "a1"}}), 409)
    assert_problem(http.post(path, json={"agent": {}}), 400, "Missing parameter")
    assert_problem(http.post(path, content=b"{", headers={"Content-Type": "application/json"}), 400)
    put = http.put(f"{path}/a1", json={"agent": {"prompt_template": "p"}})
    assert put.status_code == 200 and put.json()["prompt_template"] == "p"
    assert_problem(http.put(f"{path}/zz", json={"agent": {"prompt_template": "p"}}), 404)
    deleted = http.delete(f"{path}/a1")
    assert deleted.status_code == 204 and deleted.content == b""  # MindsDB's code answers 204
    assert_problem(http.delete(f"{path}/a1"), 404, "Agent not found")


def test_sql_errors_answer_200_with_type_error(http):
    ok = http.post("/api/sql/query", json={"query": "SELECT 1 AS x"})
    assert ok.status_code == 200
    assert ok.json() == {"type": "table", "column_names": ["x"], "data": [[1]],
                         "context": {"show_secrets": False, "db": "mindsdb"}}
    bad = http.post("/api/sql/query", json={"query": "SELEC 1"})
    assert bad.status_code == 200
    body = bad.json()
    assert body["type"] == "error" and body["error_code"] == 1064  # MindsDB sends the MySQL number
    assert "SELEC" in body["error_message"] and body["context"]["db"] == "mindsdb"
    assert_problem(http.post("/api/sql/query", json={"nothing": 1}), 400)
    assert_problem(http.post("/api/sql/query", content=b"{", headers={"Content-Type": "application/json"}),
                   400)


@pytest.mark.parametrize("query", ["", "   ", ";"])
def test_an_empty_query_is_mindsdbs_error_result_not_a_400(http, query):
    answer = http.post("/api/sql/query", json={"query": query})
    assert answer.status_code == 200
    body = answer.json()
    assert body["type"] == "error" and body["error_message"].startswith("Empty input")
    assert body["context"]["db"] == "mindsdb"


MINDSDB_WORDS = [  # (statement, what MindsDB's own MySQL-API tests match in the error, lower case)
    ("CREATE KNOWLEDGE_BASE bad_provider USING embedding_model = {'provider': 'non_existent_provider'}",
     "wrong embedding provider"),
    ("CREATE KNOWLEDGE_BASE dead_model USING embedding_model = {'provider': 'openai', "
     "'api_key': 'this_is_a_fake_key', 'base_url': 'http://127.0.0.1:9/v1'}",
     "problem with embedding model config"),
    ("INSERT INTO non_existent_kb (content) VALUES ('some data')", "doesn't exist"),
]


@pytest.mark.parametrize("query, words", MINDSDB_WORDS)
def test_common_errors_carry_mindsdbs_words_in_one_line(http, query, words):
    body = http.post("/api/sql/query", json={"query": query}).json()
    assert body["type"] == "error", body
    message = body["error_message"]
    assert words in message.lower() and len(message.splitlines()) == 1
    assert "this_is_a_fake_key" not in message
    assert "bad_provider" not in [k["name"] for k in http.get("/api/projects/mindsdb/knowledge_bases").json()]


def test_parametrize_constants_names_each_constant_as_mindsdb_does(http):
    """MindsDB's GUI helper (its test_queries.py::test_parameter_extract): constants become
    `:name` parameters named by alias, compared column or set column; nothing runs."""
    url = "/api/sql/query/utils/parametrize_constants"
    update = "UPDATE pg.products SET price = 10 WHERE price = 11 AND brand = 'X'"
    body = http.post(url, json={"query": update})
    assert body.status_code == 200
    assert body.json() == {
        "query": "update pg.products set price=:price where price = :price2 AND brand = :brand",
        "parameters": [{"name": "price", "value": 10, "type": "int"},
                       {"name": "price2", "value": 11, "type": "int"},
                       {"name": "brand", "value": "X", "type": "str"}],
        "databases": {"pg": ["products"]}}
    select = http.post(url, json={"query": "SELECT 1 AS year FROM db.t WHERE total = 2.5"}).json()
    assert select["query"] == "SELECT :year FROM db.t WHERE total = :total"
    assert [p["type"] for p in select["parameters"]] == ["int", "float"]
    assert_problem(http.post(url, json={"query": "SELEC nothing"}), 400)
    assert_problem(http.post(url, json={}), 400)


def test_sql_context_round_trip(http):
    answer = http.post("/api/sql/query", json={"query": "USE mindsdb", "context": {"db": "mindsdb"}})
    assert answer.json()["type"] == "ok"
    assert answer.json()["context"]["db"] == "mindsdb"
    unknown = http.post("/api/sql/query", json={"query": "SELECT 1", "context": {"db": "other"}})
    assert unknown.json()["context"]["db"] == "other"  # the context travels back as sent


def test_unknown_route_and_method_are_problems(http):
    assert_problem(http.get("/api/nothing/here"), 404)
    assert_problem(http.delete("/api/projects"), 405)


def test_restart_keeps_everything(tmp_path):
    data = tmp_path / "data"
    proc, url = start_server(data)
    try:
        with httpx.Client(base_url=url) as http:
            http.post("/api/projects/mindsdb/knowledge_bases",
                      json={"knowledge_base": {"name": "persist", "content_columns": ["body"]}})
            http.post("/api/projects/mindsdb/agents",
                      json={"agent": {"name": "keeper", "prompt_template": "kept"}})
            before = http.get("/api/projects/mindsdb/knowledge_bases/persist").json()
    finally:
        stop_server(proc)
    proc, url = start_server(data)
    try:
        with httpx.Client(base_url=url) as http:
            assert http.get("/api/projects/mindsdb/knowledge_bases/persist").json() == before
            agent = http.get("/api/projects/mindsdb/agents/keeper").json()
            assert agent["prompt_template"] == "kept"
            # ids keep growing after a restart: a new resource never reuses an old id
            again = http.post("/api/projects/mindsdb/knowledge_bases",
                              json={"knowledge_base": {"name": "second"}}).json()
            assert again["id"] > before["id"]
    finally:
        stop_server(proc)


def test_default_model_from_server_environment(tmp_path):
    env = {"KBSQL_DEFAULT_MODEL_PROVIDER": "openai", "KBSQL_DEFAULT_MODEL_NAME": "gpt-test",
           "KBSQL_DEFAULT_MODEL_BASE_URL": "http://127.0.0.1:9/v1"}
    proc, url = start_server(tmp_path / "d", env=env)
    try:
        with httpx.Client(base_url=url) as http:
            answer = http.post("/api/projects/mindsdb/agents", json={"agent": {"name": "dflt"}})
            if answer.status_code == 201:
                model = answer.json()["model"]
                assert model["provider"] == "openai" and model["model_name"] == "gpt-test"
            else:  # the runtime checks the model answers at creation: unreachable is a clear 400
                body = assert_problem(answer, 400)
                assert "openai" in body["detail"] and "gpt-test" in body["detail"]
    finally:
        stop_server(proc)


def test_default_model_key_from_the_environment_is_never_handed_out(tmp_path):
    """An agent created without a model runs on the configured default; the server's key
    for it is neither answered, nor listed, nor copied into the catalog."""
    secret = "sk-envsecret123456"
    env = {"KBSQL_DEFAULT_MODEL_PROVIDER": "kbsql", "KBSQL_DEFAULT_MODEL_NAME": "retrieval",
           "KBSQL_DEFAULT_MODEL_API_KEY": secret}
    proc, url = start_server(tmp_path / "d", env=env)
    try:
        with httpx.Client(base_url=url) as http:
            created = http.post("/api/projects/mindsdb/agents", json={"agent": {"name": "a1"}})
            assert created.status_code == 201
            model = created.json()["model"]
            assert model["provider"] == "kbsql" and model["model_name"] == "retrieval"
            assert set(model["api_key"]) == {"*"}
            listed = http.get("/api/projects/mindsdb/agents").text
            shown = http.post("/api/sql/query", json={"query": "SHOW AGENTS"}).text
            answer = http.post("/api/projects/mindsdb/agents/a1/completions",
                               json={"messages": [{"question": "hi", "answer": ""}]})
            assert answer.status_code == 200  # the agent still runs on the default model
            for text in (created.text, listed, shown):
                assert secret not in text
        catalog = (tmp_path / "d" / "catalog.sqlite").read_bytes()
        assert secret.encode() not in catalog
    finally:
        stop_server(proc)
