"""Through a real `kbsql serve`: background inserts as MindsDB runs them (cancelled and
resumed mid-way to an exact count), agent `params` and MindsDB's agent codes, and the
smaller differences of issue 23, each as MindsDB documents or answers it; and what MindsDB's own
HTTP unit tests found (at the end)."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.agents.fakes import FakeLLM, text
from tests.conftest import served_http
from tests.knowledge.fakes import FakeProvider
from tests.waiting import ended, queries_sql, wait_for

HASH = '{"provider": "kbsql", "model_name": "hash-64"}'
ROWS = 120


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as fake:
        yield fake


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with served_http(tmp_path_factory.mktemp("differences") / "server") as http:
        yield http


def sql(client: httpx.Client, query: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/api/sql/query", json={"query": query, **body})
    assert answer.status_code == 200, answer.text
    return answer.json()


def ok(client: httpx.Client, query: str, **body: Any) -> dict[str, Any]:
    answer = sql(client, query, **body)
    assert answer["type"] != "error", answer
    return answer


def rows(client: httpx.Client, query: str) -> list[dict[str, Any]]:
    answer = ok(client, query)
    return [dict(zip(answer["column_names"], r, strict=True)) for r in answer["data"]]


def register(client: httpx.Client, name: str, frame: pd.DataFrame) -> None:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    put = client.put(f"/api/files/{name}", content=buffer.getvalue(),
                     headers={"Content-Type": "application/vnd.apache.parquet"})
    assert put.status_code == 200, put.text


# background inserts ----------------------------------------------------------------------------
def _query(client: httpx.Client, query_id: int) -> dict[str, Any]:
    return rows(client, queries_sql(query_id))[0]


def _until(client: httpx.Client, query_id: int, done: Any) -> dict[str, Any]:
    return wait_for(lambda: _query(client, query_id), done)


def test_a_background_insert_is_cancelled_and_resumed_mid_way_to_an_exact_count(
        client: httpx.Client, provider: FakeProvider) -> None:
    provider.delay = 0.01
    model = json.dumps({"provider": "openai", "model_name": "e", "base_url": f"{provider.url}/v1"})
    ok(client, f"CREATE KNOWLEDGE_BASE bg USING embedding_model = {model}, content_columns = ['body'], "
               "id_column = 'pk'")
    register(client, "bg_src", pd.DataFrame({"pk": range(ROWS), "grp": [i // 3 for i in range(ROWS)],
                                             "body": [f"text {i}" for i in range(ROWS)]}))
    started = rows(client, "INSERT INTO bg SELECT pk, grp, body FROM df.bg_src "
                           "USING batch_size = 4, track_column = grp")[0]
    assert started["FINISHED_AT"] is None and started["SQL"].startswith("INSERT INTO bg")
    query_id = started["ID"]
    with httpx.Client(base_url=str(client.base_url), timeout=60) as other:  # another connection
        running = _until(other, query_id, lambda r: r["PROCESSED_ROWS"] >= 16)
        assert running["STARTED_AT"] is not None
        ok(other, f"SELECT query_cancel({query_id})")
    stopped = _until(client, query_id, ended)
    assert "cancelled" in stopped["ERROR"] and 16 <= stopped["PROCESSED_ROWS"] < ROWS
    assert rows(client, "SELECT count(*) AS n FROM bg") == [{"n": stopped["PROCESSED_ROWS"]}]
    described = rows(client, "DESCRIBE KNOWLEDGE_BASE bg")[0]
    assert described["QUERY_ID"] == query_id and described["ERROR"] == stopped["ERROR"]
    ok(client, f"SELECT query_resume({query_id})")
    done = _until(client, query_id, ended)
    assert done["ERROR"] is None and done["PROCESSED_ROWS"] == ROWS
    assert rows(client, "SELECT count(*) AS n FROM bg") == [{"n": ROWS}]
    assert sorted(int(r["id"]) for r in rows(client, "SELECT id FROM bg")) == list(range(ROWS))
    described = rows(client, "DESCRIBE KNOWLEDGE_BASE bg")[0]
    assert described["INSERT_FINISHED_AT"] == done["FINISHED_AT"] and described["PROCESSED_ROWS"] == ROWS
    # the REST insert of a query runs within its request, batch_size or not (its answer counts it)
    put = client.put("/api/projects/mindsdb/knowledge_bases/bg", json={"knowledge_base": {
        "query": "SELECT pk, body FROM df.bg_src WHERE pk < 10", "params": {"batch_size": 3}}})
    assert put.status_code == 200 and put.json()["inserted_rows"] == 10, put.text


# agents -----------------------------------------------------------------------------------------
AGENTS = "/api/projects/mindsdb/agents"


def test_agent_params_are_stored_echoed_and_delete_is_204(client: httpx.Client) -> None:
    created = client.post(AGENTS, json={"agent": {"name": "timed", "params": {"timeout": 10}}})
    assert created.status_code == 201 and created.json()["params"] == {"timeout": 10}, created.text
    assert client.get(f"{AGENTS}/timed").json()["params"] == {"timeout": 10}
    updated = client.put(f"{AGENTS}/timed", json={"agent": {"params": {"mode": "text"}}})
    assert updated.json()["params"] == {"timeout": 10, "mode": "text"}
    for field in ("id", "name", "project_id", "created_at", "updated_at", "model", "data", "prompt_template"):
        assert field in updated.json()  # the contract's fields stay
    shown = rows(client, "SELECT PARAMS FROM information_schema.agents WHERE NAME = 'timed'")
    assert json.loads(shown[0]["PARAMS"]) == {"timeout": 10, "mode": "text"}
    older = client.post(AGENTS, json={"agent": {"name": "old", "model_name": "gpt-4o", "provider": "openai"}})
    assert older.status_code == 400 and "older agent format" in older.json()["detail"]
    assert "\n" not in older.json()["detail"]
    unknown = client.post(AGENTS, json={"agent": {"name": "odd", "params": {"temperature": 1}}})
    assert unknown.status_code == 400 and "Parameter 'temperature' is not allowed" in unknown.json()["detail"]
    # MindsDB also takes the model, data and prompt inside params (its record keeps them there)
    inside = client.post(AGENTS, json={"agent": {"name": "inside", "params": {
        "prompt_template": "Answer briefly.", "model": {"provider": "kbsql", "model_name": "retrieval"},
        "timeout": 5}}})
    assert inside.status_code == 201, inside.text
    assert inside.json()["prompt_template"] == "Answer briefly." and inside.json()["params"] == {"timeout": 5}
    assert inside.json()["model"] == {"provider": "kbsql", "model_name": "retrieval"}
    deleted = client.delete(f"{AGENTS}/timed")
    assert deleted.status_code == 204 and deleted.content == b""
    assert client.get(f"{AGENTS}/timed").status_code == 404


def test_an_agent_s_timeout_stops_its_answer(client: httpx.Client) -> None:
    slow = FakeLLM("openai", [text("a long answer that takes its time " * 6)], delay=0.25)
    with slow:
        model = {"provider": "openai", "model_name": "m1", "base_url": slow.base_url, "api_key": "k"}
        assert client.post(AGENTS, json={"agent": {"name": "quick", "model": model,
                                                   "params": {"timeout": 1}}}).status_code == 201
        started = time.monotonic()
        answer = client.post(f"{AGENTS}/quick/completions",
                             json={"messages": [{"question": "hi", "answer": None}]})
        assert time.monotonic() - started < 4  # the stream alone would take ~10 s
        assert answer.status_code == 400 and "timeout of 1 s" in answer.json()["detail"], answer.text


# the smaller differences --------------------------------------------------------------------------
def test_a_constant_is_named_by_its_text_and_an_unset_parameter_is_named(client: httpx.Client) -> None:
    assert ok(client, "SELECT 'a'")["column_names"] == ["a"]
    register(client, "nums", pd.DataFrame({"a": [1, 2]}))
    answer = sql(client, "SELECT * FROM df.nums WHERE a = :x")
    assert answer["type"] == "error" and answer["error_message"].startswith("Parameter is not set: x")
    answer = sql(client, "SELECT * FROM df.nums WHERE a = :x", params={"y": 1})
    assert answer["error_message"].startswith("Parameter is not set: x")
    assert ok(client, "SELECT * FROM df.nums WHERE a = :x", params={"x": 2})["data"] == [[2]]


def test_update_chunk_content_like_and_json_metadata_paths(client: httpx.Client) -> None:
    ok(client, f"CREATE KNOWLEDGE_BASE orders USING embedding_model = {HASH}, metadata_columns = ['product']")
    ok(client, "INSERT INTO orders (id, content, product) VALUES ('A1B', 'Request color: black', 'Mouse'), "
               "('3XZ', 'Gift wrap requested', 'Speaker')")
    chunk = rows(client, "SELECT chunk_id FROM orders WHERE id = 'A1B'")[0]["chunk_id"]
    updated = ok(client, f"UPDATE orders SET content = 'Request colour: white', product = 'Mouse 2' "
                         f"WHERE chunk_id = '{chunk}'")
    assert updated["affected_rows"] == 1
    got = rows(client, "SELECT chunk_content, product FROM orders WHERE id = 'A1B'")
    assert got == [{"chunk_content": "Request colour: white", "product": "Mouse 2"}]
    assert rows(client, "SELECT id FROM orders WHERE content = 'colour white' LIMIT 1") == [{"id": "A1B"}]
    # chunk_content LIKE filters the text (query.mdx), it is not a search: no relevance
    found = rows(client, "SELECT id, relevance FROM orders WHERE chunk_content LIKE '%wrap%'")
    assert found == [{"id": "3XZ", "relevance": None}]
    assert rows(client, "SELECT id FROM orders WHERE chunk_content LIKE '%nothing%'") == []
    ok(client, f"CREATE KNOWLEDGE_BASE books USING embedding_model = {HASH}, preprocessing = "
               '{"type": "json_chunking", "json_chunking_config": {"metadata_fields": ["info.category"]}}')
    dune = json.dumps({"title": "Dune", "info": {"category": "scifi"}})
    emma = json.dumps({"title": "Emma", "info": {"category": "romance"}})
    ok(client, f"INSERT INTO books (id, content) VALUES (1, '{dune}'), (2, '{emma}')")
    assert rows(client, "SELECT id FROM books WHERE info.category = 'scifi'") == [{"id": "1"}]
    assert rows(client, "SELECT id FROM books WHERE `info.category` = 'romance'") == [{"id": "2"}]


class _ChattyModel:
    """An OpenAI-compatible chat model that wraps its JSON in prose and a Markdown fence."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                source = body["messages"][-1]["content"].rsplit("Text:\n", 1)[-1]
                reply = ("Sure! Here is a question about it:\n```json\n" + json.dumps(
                    {"query": " ".join(source.split()[:4]), "reference_answer": source}) +
                    "\n```\nLet me know if you need more.")
                raw = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                       "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        Thread(target=self.server.serve_forever, daemon=True).start()


def test_evaluate_generate_data_reads_json_wrapped_in_prose(client: httpx.Client) -> None:
    model = _ChattyModel()
    try:
        ok(client, f"CREATE KNOWLEDGE_BASE ev USING embedding_model = {HASH}")
        ok(client, "INSERT INTO ev (id, content) VALUES (1, 'Refunds take five business days'), "
                   "(2, 'Gift wrap is offered at checkout')")
        llm = json.dumps({"provider": "openai", "model_name": "m", "base_url": model.url, "api_key": "k"})
        done = rows(client, f"EVALUATE KNOWLEDGE_BASE ev USING test_table = df.ev_test, generate_data = "
                            f"{{'count': 2}}, evaluate = false, llm = {llm}")
        assert done[0]["generated_rows"] == 2
        questions = sorted(r["question"] for r in rows(client, "SELECT question FROM df.ev_test"))
        assert questions == ["Gift wrap is offered", "Refunds take five business"]
    finally:
        model.server.shutdown()
        model.server.server_close()


def test_background_inserts_are_bounded_by_a_flag(tmp_path, provider: FakeProvider) -> None:
    """`kbsql serve --background-inserts 1`: a second insert waits for the first (its
    STARTED_AT stays empty) instead of competing with it; other statements still answer."""
    from kbsql.server.process import spawn

    provider.delay = 0.02
    server = spawn(tmp_path / "bounded", args=("--background-inserts", "1"))
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            model = json.dumps({"provider": "openai", "model_name": "e", "base_url": f"{provider.url}/v1"})
            register(http, "src", pd.DataFrame({"pk": range(200), "body": [f"t {i}" for i in range(200)]}))
            ids = []
            for kb in ("first", "second"):
                ok(http, f"CREATE KNOWLEDGE_BASE {kb} USING embedding_model = {model}, "
                         "content_columns = ['body'], id_column = 'pk'")
                started = rows(http, f"INSERT INTO {kb} SELECT pk, body FROM df.src USING batch_size = 5")
                ids.append(started[0]["ID"])
            _until(http, ids[0], lambda r: r["PROCESSED_ROWS"] >= 10)
            assert _query(http, ids[1])["STARTED_AT"] is None  # queued behind the first
            assert ok(http, "SELECT 1 AS one")["data"] == [[1]]
            ok(http, f"SELECT query_cancel({ids[0]})")
            _until(http, ids[1], lambda r: r["STARTED_AT"] is not None)
            ok(http, f"SELECT query_cancel({ids[1]})")
            assert "cancelled" in _until(http, ids[1], ended)["ERROR"]
    finally:
        server.stop()


# What MindsDB's own HTTP unit tests (mindsdb/mindsdb tests/unit/api/http/*) showed when their
# requests were sent to a real `kbsql serve` (the merged mdbtests branch): each test below is one
# of their findings, asserted as a user of the REST API would see it.
KBS = "/api/projects/mindsdb/knowledge_bases"


def keys_sent(provider: FakeProvider, since: int) -> list[str]:
    return [headers.get("Authorization", "") for path, _, headers in provider.requests[since:]
            if path == "/v1/embeddings"]


def test_a_knowledge_base_s_models_may_be_sent_inside_params(client: httpx.Client,
                                                             provider: FakeProvider) -> None:
    """knowledge_bases_test.py::test_update_kb_embeddings: the create body names its embedding
    model in `params` and the PUT rotates its key in `params`; both were ignored here (the
    knowledge base embedded with the default model, the PUT was a 400)."""
    model = {"provider": "openai", "model_name": "dummy_model", "api_key": "embed-key-1",
             "base_url": f"{provider.url}/v1"}
    before = len(provider.requests)
    created = client.post(KBS, json={"knowledge_base": {"name": "test_kb",
                                                        "params": {"embedding_model": model}}})
    assert created.status_code == 201, created.text
    assert keys_sent(provider, before) == ["Bearer embed-key-1"]  # the create checks the model
    shown = client.get(f"{KBS}/test_kb").json()["embedding_model"]
    assert (shown["provider"], shown["model_name"]) == ("openai", "dummy_model")

    before = len(provider.requests)
    rotated = client.put(f"{KBS}/test_kb", json={"knowledge_base": {
        "params": {"embedding_model": {"api_key": "embed-key-2"}}}})
    assert rotated.status_code == 200, rotated.text
    row = {"id": "1", "content": "hello"}
    inserted = client.put(f"{KBS}/test_kb", json={"knowledge_base": {"rows": [row]}})
    assert inserted.status_code == 200 and inserted.json()["inserted_rows"] == 1, inserted.text
    assert keys_sent(provider, before)[-1] == "Bearer embed-key-2"
    # a field sent beside `params` wins over the same field inside it
    both = client.put(f"{KBS}/test_kb", json={"knowledge_base": {
        "embedding_model": {"api_key": "embed-key-3"},
        "params": {"embedding_model": {"api_key": "ignored"}}}})
    assert both.status_code == 200, both.text
    before = len(provider.requests)
    client.put(f"{KBS}/test_kb", json={"knowledge_base": {"rows": [{"id": "2", "content": "again"}]}})
    assert keys_sent(provider, before) == ["Bearer embed-key-3"]


def zipped(member: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, "a,b\n1,2\n")
    return buffer.getvalue()


def test_a_zip_whose_file_climbs_out_is_named_a_path_traversal(client: httpx.Client) -> None:
    """files_test.py::test_zipfile_traversal: MindsDB names `../../../../etc/passwd` in an
    archive "Attempted Path Traversal in Zip File"; kbsql called it a file in a subfolder.
    (MindsDB answers 500, its catch-all for a failed unpack; a hostile upload is the
    client's error here: 400.)"""
    for member in ("../../../../etc/passwd", "/etc/passwd", "a/../../b.csv"):
        put = client.put("/api/files/archive", files={"file": ("archive.zip", zipped(member))})
        assert put.status_code == 400, put.text
        assert put.json()["title"] == "Error"
        assert put.json()["detail"] == "Attempted Path Traversal in Zip File", member
    put = client.put("/api/files/archive", files={"file": ("archive.zip", zipped("sub/a.csv"))})
    assert put.json()["detail"] == "Archive must contain data file in root."
    assert "archive" not in [f["name"] for f in client.get("/api/files").json()]


def test_jobs_routes_answer_as_mindsdb_s_jobs_test(client: httpx.Client) -> None:
    """MindsDB's tests/unit/api/http/jobs_test.py::test_jobs_flow (it was a 404 "No route"):
    the job made by POST is the one SQL lists, GET and history answer it, DELETE is 204. A
    query closing CREATE JOB's parentheses early is refused, nothing stored or run."""
    fmt = "%Y-%m-%d %H:%M:%S"
    start, end = (time.strftime(fmt, time.gmtime(time.time() + days * 86400)) for days in (1, 2))
    job = {"name": "TEST_job", "query": "select 1", "if_query": "select 2", "start_at": start,
           "end_at": end, "schedule_str": "every hour"}
    made = client.post("/api/projects/mindsdb/jobs", json={"job": job})
    assert made.status_code == 200, made.text
    assert {k: made.json()[k] for k in ("name", "query", "if_query", "schedule_str")} == {
        k: job[k] for k in ("name", "query", "if_query", "schedule_str")}
    assert start in made.json()["start_at"] and end in made.json()["end_at"]
    shown = client.post("/api/sql/query", json={"query": "SHOW JOBS"}).json()
    assert [row[:2] for row in shown["data"]] == [["TEST_job", "mindsdb"]]
    assert client.get("/api/projects/mindsdb/jobs/TEST_job").json()["query"] == "select 1"
    assert client.get("/api/projects/mindsdb/jobs/TEST_job/history").json() == []
    assert [j["name"] for j in client.get("/api/projects/mindsdb/jobs").json()] == ["TEST_job"]
    assert client.post("/api/projects/mindsdb/jobs", json={"job": job}).status_code == 409
    assert client.delete("/api/projects/mindsdb/jobs/TEST_job").status_code == 204
    assert client.get("/api/projects/mindsdb/jobs/TEST_job").status_code == 404
    assert client.get("/api/projects/nowhere/jobs").status_code == 404
    assert client.post("/api/projects/mindsdb/jobs", json={}).json()["title"] == "Missing parameter"
    sneaky = {"name": "j2", "query": "select 1) EVERY 1 minute IF (select 2"}
    refused = client.post("/api/projects/mindsdb/jobs", json={"job": sneaky})
    assert refused.status_code == 400 and "nothing was stored" in refused.json()["detail"]
    assert client.get("/api/projects/mindsdb/jobs").json() == []


def test_jobs_routes_read_names_in_any_case_as_sql_does(client: httpx.Client) -> None:
    """Project and job names are case-insensitive in SQL (DROP JOB MINDSDB.myjob drops
    mindsdb.MyJob): the routes matched them exactly, so a POST to /api/projects/MindsDB/jobs
    made the job and answered 404 'Job not found', and GET, history and DELETE of another
    case answered 404 for a job SQL finds."""
    made = client.post("/api/projects/MindsDB/jobs",
                       json={"job": {"name": "CaseJob", "query": "select 1", "schedule_str": "every hour"}})
    assert made.status_code == 200, made.text
    assert (made.json()["name"], made.json()["project"]) == ("CaseJob", "mindsdb")
    assert [j["name"] for j in client.get("/api/projects/MINDSDB/jobs").json()] == ["CaseJob"]
    assert client.get("/api/projects/mindsdb/jobs/casejob").json()["name"] == "CaseJob"
    assert client.get("/api/projects/MindsDB/jobs/CASEJOB/history").json() == []
    assert client.delete("/api/projects/MindsDB/jobs/casejob").status_code == 204
    assert client.get("/api/projects/mindsdb/jobs").json() == []


def test_a_job_posted_is_held_to_the_sql_size_limit_whole(client: httpx.Client) -> None:
    """The route checked --max-sql-kb (1024 KB) on query and if_query each, not on the CREATE
    JOB it builds: a 16 MB job name was parsed for 10 s on the SQL lane and stored, and every
    SHOW JOBS then answered 22 MB; a 16 MB start_at was parsed and echoed back whole; a query
    and an if_query of 1 MB each made a 2 MB statement. Each is now refused as SQL text over
    the limit, before parsing, nothing stored."""
    mb = 2**20
    for job in ({"name": "n" * (mb + 1), "query": "select 1"},
                {"name": "d", "query": "select 1", "start_at": "2" * (mb + 1)},
                {"name": "two", "query": "select '" + "x" * (mb // 2) + "'",
                 "if_query": "select '" + "y" * (mb // 2) + "'"}):
        refused = client.post("/api/projects/mindsdb/jobs", json={"job": job})
        assert refused.status_code == 400 and "--max-sql-kb" in refused.json()["detail"], refused.text[:300]
        assert len(refused.content) < 1000
    assert rows(client, "SHOW JOBS") == []


def test_a_backtick_in_a_job_or_project_name_is_named_not_a_parser_error(client: httpx.Client) -> None:
    """A job named a`b (or a project named so) answered 400 "Syntax error, unknown input:
    CREATE JOB `mindsdb`.`a``b` ..." (the route's own statement, which the user never wrote;
    SQL can make no such name either). Now a 400 naming the backtick, and a 404 project."""
    named = client.post("/api/projects/mindsdb/jobs", json={"job": {"name": "a`b", "query": "select 1"}})
    assert named.status_code == 400 and named.json()["detail"] == "A job's name cannot hold a backtick (`)"
    job = {"job": {"name": "j", "query": "select 1"}}
    for method in ("GET", "POST"):
        project = client.request(method, "/api/projects/m`db/jobs", json=job if method == "POST" else None)
        assert project.status_code == 404 and "SHOW JOBS" not in project.text, project.text
    assert rows(client, "SHOW JOBS") == []


def test_a_name_with_a_nul_a_line_break_or_only_spaces_is_refused_before_it_is_stored(
        client: httpx.Client) -> None:
    """A job POSTed as a<NUL>b answered 400 "Parser Error: unterminated quoted string" yet was
    stored and ran every hour (GET of it 400 too: only SQL's DROP JOB removed it); a view
    v<NUL>x beside v<NUL>w answered 500; projects, databases and jobs named with a line break,
    a tab or only spaces were stored. Each is now a 400 (an SQL error) naming why, nothing
    stored; a name with an inner space is still a name."""
    before = [rows(client, q) for q in ("SHOW JOBS", "SHOW DATABASES", "SHOW FULL TABLES")]
    for name in ("a\x00b", "a\nb", " ", "\t"):
        job = client.post("/api/projects/mindsdb/jobs",
                          json={"job": {"name": name, "query": "select 1", "schedule_str": "every hour"}})
        assert job.status_code == 400 and "control character" in job.json()["detail"], job.text
        view = client.post("/api/projects/mindsdb/views", json={"view": {"name": name, "query": "select 1"}})
        said = view.json()["detail"]  # a blank name is the route's own refusal (text_field)
        assert view.status_code == 400 and ("control character" in said or "only blanks" in said), view.text
        database = client.post("/api/databases", json={"database": {"name": name, "engine": "duckdb",
                                                                     "parameters": {}}})
        assert database.status_code == 400 and "control character" in database.text, database.text
        for statement in ("CREATE PROJECT `{}`", "CREATE JOB `{}` (SELECT 1) EVERY hour",
                          "CREATE VIEW `{}` AS (SELECT 1)"):
            refused = sql(client, statement.format(name))
            assert refused["type"] == "error" and "control character" in refused["error_message"], refused
    assert [rows(client, q) for q in ("SHOW JOBS", "SHOW DATABASES", "SHOW FULL TABLES")] == before
    for path in ("/api/projects/mindsdb/jobs/a%00b", "/api/projects/mindsdb/jobs/a%00b/history"):
        assert client.get(path).json()["title"] == "Job not found"  # was the parser's 400
    ok(client, "CREATE JOB `a spaced job` (SELECT 1) EVERY hour")
    ok(client, "DROP JOB `a spaced job`")


def test_a_jobs_statement_is_shown_with_its_secrets_masked(client: httpx.Client) -> None:
    """A job's statement is shown to every user of the server (SHOW JOBS, information_schema.
    jobs, the jobs routes, log.jobs_history): MindsDB shows it as written, and a job creating
    a knowledge base or a database showed its creator's api_key or password in everyone's
    answers. Shown masked; the job is stored and runs as written (the route still tells a
    statement that would escape CREATE JOB's parentheses from one that holds a secret)."""
    query = ('CREATE KNOWLEDGE_BASE keyed_kb USING embedding_model = {"provider": "openai", '
             '"model_name": "e1", "api_key": "sk-creator-secret-1"}')
    made = client.post("/api/projects/mindsdb/jobs",
                       json={"job": {"name": "keyed", "query": query, "start_at": "2030-01-01"}})
    assert made.status_code == 200, made.text
    shown = [made.text, client.get("/api/projects/mindsdb/jobs/keyed").text,
             str(rows(client, "SHOW JOBS")), str(rows(client, "SELECT * FROM information_schema.jobs"))]
    for said in shown:
        assert "sk-creator-secret-1" not in said and "******" in said, said
    ok(client, "DROP JOB keyed")
