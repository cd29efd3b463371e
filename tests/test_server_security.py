"""`kbsql serve` refuses what a web page in the user's browser could send (CSRF, DNS
rebinding), answers bad bodies with 400s, and validates agent messages the same way on both
completion routes. All against a real server process on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kbsql.server.process import spawn

PROBLEM = "application/problem+json"
CREATE_KB = '{"query": "CREATE KNOWLEDGE_BASE csrf_kb"}'


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with spawn(tmp_path_factory.mktemp("guard"), allow_origins=("https://notebooks.example.org",)) \
            as server:
        yield server.url


def problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert set(body) == {"title", "detail"} and body["detail"]
    return body


def kb_names(url: str) -> list[str]:
    return [k["name"] for k in httpx.get(f"{url}/api/projects/mindsdb/knowledge_bases").json()]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_a_body_that_is_not_json_is_415_and_changes_nothing(url: str, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = httpx.post(f"{url}/api/sql/query", content=CREATE_KB.encode(), headers=headers)
    assert "media type" in problem(response, 415)["title"].lower()
    assert "csrf_kb" not in kb_names(url)


def test_json_with_a_charset_is_accepted(url: str) -> None:
    response = httpx.post(f"{url}/api/sql/query", content=b'{"query": "SELECT 1 AS a"}',
                          headers={"Content-Type": "application/json; charset=utf-8"})
    assert response.status_code == 200 and response.json()["data"] == [[1]]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1.evil.example:80",
                                    "https://notebooks.example.org.evil.example"])
def test_a_foreign_origin_is_403_and_changes_nothing(url: str, origin: str) -> None:
    response = httpx.post(f"{url}/api/sql/query", content=CREATE_KB.encode(),
                          headers={"Content-Type": "application/json", "Origin": origin})
    assert "origin" in problem(response, 403)["title"].lower()
    assert problem(httpx.get(f"{url}/api/projects", headers={"Origin": origin}), 403)
    assert "csrf_kb" not in kb_names(url)


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8888", "http://localhost:8888",
                                    "http://[::1]:8888", "https://notebooks.example.org"])
def test_loopback_and_allowed_origins_pass(url: str, origin: str) -> None:
    response = httpx.post(f"{url}/api/sql/query", json={"query": "SELECT 2 AS b"},
                          headers={"Origin": origin})
    assert response.status_code == 200 and response.json()["data"] == [[2]]


def test_a_rebound_host_name_is_403(url: str) -> None:
    """DNS rebinding: evil.example resolves to 127.0.0.1, the browser sends its own Host."""
    port = url.rsplit(":", 1)[1]
    response = httpx.get(f"{url}/api/projects", headers={"Host": f"evil.example:{port}"})
    assert "host" in problem(response, 403)["title"].lower()
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert httpx.get(f"{url}/api/projects", headers={"Host": host}).status_code == 200


def test_file_uploads_take_table_types_only_there(url: str, tmp_path: Path) -> None:
    csv = b"a,b\n1,x\n2,y\n"
    ok = httpx.put(f"{url}/api/files/up", content=csv, headers={"Content-Type": "text/csv"})
    assert ok.status_code == 200 and ok.json()["rows"] == 2
    problem(httpx.put(f"{url}/api/files/up2", content=csv, headers={"Content-Type": "text/plain"}),
            415)
    problem(httpx.post(f"{url}/api/sql/query", content=b'{"query": "SELECT 1"}',
                       headers={"Content-Type": "text/csv"}), 415)


def test_deeply_nested_json_is_a_400(url: str) -> None:
    response = httpx.post(f"{url}/api/sql/query", content=b"[" * 100_000,
                          headers={"Content-Type": "application/json"})
    assert problem(response, 400)["title"] == "Invalid JSON"
    assert httpx.get(f"{url}/api/status").status_code == 200


@pytest.mark.parametrize(("path", "method", "body"), [
    ("/api/projects/mindsdb/views", "POST", b'{"view": {"name": "sv", "query": "SELECT \'\\ud800\'"}}'),
    ("/api/databases", "POST", b'{"database": {"name": "sd", "engine": "duckdb", '
                               b'"parameters": {"database": "x\\ud800.duckdb"}}}'),
    ("/api/projects/mindsdb/knowledge_bases/surrogates", "PUT",
     b'{"knowledge_base": {"rows": [{"id": 1, "content": "a\\udc00b"}]}}'),
    ("/api/sql/query", "POST", b'{"query": "SELECT \'\\ud800\' AS s"}'),
])
def test_a_lone_surrogate_is_a_400_naming_it(url: str, path: str, method: str, body: bytes) -> None:
    """JSON may escape half a character (`\\ud800`); Python's parser keeps it, and it failed
    where the text was encoded: 500 UnicodeEncodeError for a view or a data source, 500
    TypeError from the tokenizer for a knowledge base's row, an SQL error naming the codec
    (with a traceback in the log). Now a 400 naming it; a pair (an escaped emoji) is text."""
    httpx.post(f"{url}/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {"name": "surrogates"}})
    response = httpx.request(method, f"{url}{path}", content=body, timeout=60,
                             headers={"Content-Type": "application/json"})
    detail = problem(response, 400)["detail"]
    assert "lone surrogate" in detail and "Error" not in detail, detail
    pair = httpx.post(f"{url}/api/sql/query", content=b'{"query": "SELECT \'\\ud83d\\ude00\' AS s"}',
                      headers={"Content-Type": "application/json"}).json()
    assert pair["data"] == [["\U0001F600"]], pair


BAD_MESSAGES = [
    ({"messages": [{"question": 5, "answer": ""}]}, "messages[0].question"),
    ({"messages": ["x"]}, "messages[0]"),
    ({"messages": [{"question": "a", "answer": ""}, {"question": "b", "answer": 3}]},
     "messages[1].answer"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content"),
    ({"messages": [{"text": "hi"}]}, "messages[0]"),
    ({"messages": None}, "messages"),
    ({"messages": []}, "messages"),
]


@pytest.mark.parametrize("route", ["completions", "completions/stream"])
@pytest.mark.parametrize(("body", "named"), BAD_MESSAGES)
def test_both_completion_routes_refuse_bad_messages_alike(url: str, route: str, body: dict,
                                                          named: str) -> None:
    agents = f"{url}/api/projects/mindsdb/agents"
    if httpx.get(f"{agents}/helper").status_code == 404:
        assert httpx.post(agents, json={"agent": {"name": "helper"}}).status_code == 201
    detail = problem(httpx.post(f"{agents}/helper/{route}", json=body), 400)["detail"]
    assert named in detail


def test_role_content_messages_work_on_both_routes(url: str) -> None:
    agents = f"{url}/api/projects/mindsdb/agents"
    if httpx.get(f"{agents}/helper").status_code == 404:
        assert httpx.post(agents, json={"agent": {"name": "helper"}}).status_code == 201
    body = {"messages": [{"role": "user", "content": "hello"}]}
    answer = httpx.post(f"{agents}/helper/completions", json=body, timeout=60)
    assert answer.status_code == 200 and answer.json()["message"]["content"]
    with httpx.stream("POST", f"{agents}/helper/completions/stream", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert '"type":"end"' in r.read().decode()


def test_embedded_callers_get_the_same_message_errors(engine) -> None:
    """One validator for both routes and the embedded engine: same refusals, same words."""
    from kbsql.interface.errors import BadRequest

    engine.create_agent("mindsdb", {"name": "helper"})
    for body, named in BAD_MESSAGES:
        for call in (engine.complete, engine.stream):
            with pytest.raises(BadRequest, match=named.replace("[", r"\[").replace("]", r"\]")):
                call("mindsdb", "helper", body["messages"])


def test_a_company_id_header_is_refused_not_ignored(url: str) -> None:
    """MindsDB keeps companies apart by the `company-id` header; one kbsql server serves one
    company, so a request naming another company is refused in one line rather than shown
    (and allowed to change) the one company's data. No header, empty, 0 or MindsDB's default
    (the zero UUID): as before."""
    response = httpx.post(f"{url}/api/sql/query", content=CREATE_KB.encode(),
                          headers={"Content-Type": "application/json", "company-id": "2"})
    detail = problem(response, 400)["detail"]
    assert "company-id" in detail and "\n" not in detail
    assert "csrf_kb" not in kb_names(url)
    for value in ("", "0", "00000000-0000-0000-0000-000000000000"):  # MindsDB's DEFAULT_COMPANY_ID
        response = httpx.post(f"{url}/api/sql/query", json={"query": "SELECT 3 AS c"},
                              headers={"company-id": value})
        assert response.status_code == 200 and response.json()["data"] == [[3]]
