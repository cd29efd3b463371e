"""The Jupyter server routes behind the sidebar and the chat (`/kbsql/catalog`, `/kbsql/search`,
`/kbsql/agents/stream`), called as the page calls them, against a real JupyterLab server:
the embedded engine next to a notebook, a real `kbsql serve`, and a scripted server that
records what it is sent (to see the token go out as a Bearer header and nowhere else)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import kbsql
from tests.labextension.helpers import Lab, free_port

HASH = {"provider": "kbsql", "model_name": "hash-64"}
TOKEN = "tok-3f9c1e-never-shown"
ROWS = [{"id": 1, "body": "Refunds take five days to reach your card. " * 40, "product": "shop"},
        {"id": 2, "body": "Shipping is free above 50 euros.", "product": "shop"},
        {"id": 3, "body": "Support answers within one hour.", "product": "help"}]


def seed(target: str | Path, token: str | None = None) -> None:
    """One knowledge base with three documents (one long: several chunks) and one agent."""
    with kbsql.connect(target, token=token) as client:
        client.knowledge_bases.create("docs", embedding_model=HASH, content_columns=["body"],
                                      metadata_columns=["product"])
        client.knowledge_bases.insert("docs", ROWS)
        client.agents.create("helper", data={"knowledge_bases": ["mindsdb.docs"]})


def seed_job(data_dir: Path) -> None:
    """A daily job whose one run so far failed (its source does not exist)."""
    from kbsql.engine import Engine

    with Engine(data_dir, settings={"jobs_poll_s": 0}) as engine:
        engine.sql.execute("CREATE JOB nightly (INSERT INTO docs SELECT id, body FROM gone.t "
                           "WHERE id > LAST) EVERY day", {})
        assert engine.jobs.run_due() == 1


def post(lab: Lab, route: str, body: dict) -> httpx.Response:
    url, token, _root = lab
    return httpx.post(f"{url}/kbsql/{route}", json=body, headers={"Authorization": f"token {token}"},
                      timeout=60)


def test_embedded_catalog_search_and_agent_stream_of_the_notebooks_folder(jupyterlab):
    _url, _token, root = jupyterlab
    (root / "work").mkdir()
    seed(root / "work" / ".kbsql")
    seed_job(root / "work" / ".kbsql")

    answer = post(jupyterlab, "catalog", {"notebook": jupyterlab.path("work/a.ipynb")})
    assert answer.status_code != 404, "the server extension is not installed: pip install ./labextension"
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["connection"] == {"kind": "embedded", "where": jupyterlab.path("work/.kbsql"),
                                  "source": "notebook folder", "token": False}
    (project,) = [p for p in body["projects"] if p["name"] == "mindsdb"]
    (kb,) = project["knowledge_bases"]
    chunks = kbsql.connect(root / "work" / ".kbsql").sql("SELECT chunk_id FROM docs").data
    assert kb == {"name": "docs", "content_columns": ["body"], "metadata_columns": ["product"],
                  "id_column": "id", "embedding_model": "kbsql/hash-64", "reranking_model": None,
                  "rows": 3, "chunks": len(chunks)}
    assert len(chunks) > 3  # the long document is several chunks: rows and chunks differ
    assert project["agents"] == [{"name": "helper", "model": "kbsql/retrieval",
                                  "knowledge_bases": ["mindsdb.docs"], "tables": []}]
    assert {"name": "df", "tables": []} in body["datasources"]
    (job,) = project["jobs"]  # with its last run; log (the runs) is not listed as a data source
    assert job["name"] == "nightly" and job["schedule"] == "every day" and job["last_run_end"]
    assert "gone" in job["last_error"] and job["next_run_at"] > job["last_run"]
    assert "log" not in {d["name"] for d in body["datasources"]}

    hits = post(jupyterlab, "search", {"notebook": jupyterlab.path("work/a.ipynb"), "project": "mindsdb",
                                       "knowledge_base": "docs", "text": "how long do refunds take"})
    assert hits.status_code == 200, hits.text
    found = hits.json()
    assert found["sql"] == ("SELECT * FROM mindsdb.docs WHERE content = 'how long do refunds take' LIMIT 10")
    assert found["hits"] and {h["id"] for h in found["hits"]} <= {"1", "2", "3"}
    assert all(0 < h["relevance"] <= 1 for h in found["hits"])

    # Another folder has no data directory: an empty catalog, and looking does not create one.
    empty = post(jupyterlab, "catalog", {"notebook": jupyterlab.path("other/b.ipynb")}).json()
    assert empty["exists"] is False and empty["projects"] == []
    assert not (root / "other" / ".kbsql").exists()
    # Outside the server's root: refused.
    outside = post(jupyterlab, "catalog", {"notebook": "../../x.ipynb"})
    assert outside.status_code == 400 and "outside" in outside.json()["detail"]
    # Bad searches say what is wrong.
    blank = post(jupyterlab, "search", {"notebook": jupyterlab.path("work/a.ipynb"), "project": "mindsdb",
                                        "knowledge_base": "docs", "text": "  "})
    assert blank.status_code == 400 and blank.json()["detail"] == "Type something to search for"
    missing = post(jupyterlab, "search", {"notebook": jupyterlab.path("work/a.ipynb"), "project": "mindsdb",
                                          "knowledge_base": "nope", "text": "x"})
    assert missing.status_code == 400 and "nope" in missing.json()["detail"]

    # The agent stream: the contract's chunks, one JSON object a line, history accepted.
    notebook = jupyterlab.path("work/a.ipynb")
    answer = post(jupyterlab, "agents/stream", {"notebook": notebook, "project": "mindsdb",
                                                "agent": "helper", "question": "How long do refunds take?",
                                                "history": [{"question": "hi", "answer": "hello"}]})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    chunks = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    kinds = [c.get("type") or next(k for k in ("actions", "steps", "output") if k in c) for c in chunks]
    assert kinds[0] == "start" and kinds[-1] == "end" and "output" in kinds, kinds
    assert kinds.index("actions") < kinds.index("steps") < kinds.index("output")
    actions = [a for c in chunks for a in c.get("actions", [])]
    query = next(a for a in actions if a["tool"] == "kb_query_tool")
    assert query["tool_input"].upper().startswith("SELECT") and "FROM docs" in query["tool_input"]
    assert "five days" in chunks[kinds.index("output")]["output"]

    unknown = post(jupyterlab, "agents/stream", {"notebook": notebook, "project": "mindsdb",
                                                 "agent": "nobody", "question": "q"})
    assert unknown.status_code == 400 and "nobody" in unknown.json()["detail"]


class Recorder(BaseHTTPRequestHandler):
    """A scripted kbsql-like server: answers /api/projects with 401 unless the Bearer token
    is right, and records every Authorization header it receives."""

    seen: list[str | None] = []

    def _answer(self, status: int, body: object) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:  # the http.server API
        if self._allowed():
            self._answer(200, [])  # GET /api/projects: none

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._allowed():  # POST /api/sql/query (SHOW DATABASES): an empty table
            self._answer(200, {"type": "table", "column_names": ["Database"], "data": []})

    def _allowed(self) -> bool:
        Recorder.seen.append(self.headers.get("Authorization"))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"title": "Unauthorized", "detail": "A valid token is required"})
            return False
        return True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_catalog_sends_the_token_as_bearer_and_never_echoes_it(jupyterlab, recorder, server_url):
    answer = post(jupyterlab, "catalog", {"url": recorder, "token": TOKEN})
    assert answer.status_code == 200, answer.text
    assert Recorder.seen and set(Recorder.seen) == {f"Bearer {TOKEN}"}
    assert TOKEN not in answer.text
    assert answer.json()["connection"] == {"kind": "remote", "where": recorder, "source": "settings",
                                           "token": True}

    refused = post(jupyterlab, "catalog", {"url": recorder, "token": "wrong-" + TOKEN})
    assert refused.status_code == 400 and "token is required" in refused.json()["detail"]
    assert "(the token in Settings → kbsql, else $KBSQL_TOKEN of the Jupyter server, was refused)" \
        in refused.json()["detail"]
    assert TOKEN not in refused.text
    # The notebook's kernel is connected there without a token: one line says where one goes.
    kernel = {"kind": "remote", "location": recorder, "alias": "x", "project": None, "key": False}
    nowhere = post(jupyterlab, "catalog", {"kernel": kernel})
    assert nowhere.status_code == 400, nowhere.text
    assert nowhere.json()["detail"].endswith(
        "(a token goes in the notebook: %kbsql_connect URL --token-env VAR, or in Settings → kbsql "
        "for the sidebar and chat)")
    # ... with one, but a kernel this Jupyter server does not know cannot lend it: it says so.
    unknown = post(jupyterlab, "catalog", {"kernel": {**kernel, "key": True}, "kernel_id": "no-such-kernel"})
    assert unknown.status_code == 400 and "did not lend it yet" in unknown.json()["detail"], unknown.text
    # A URL that is not http(s), and a server that is down: one clear sentence each.
    bad = post(jupyterlab, "catalog", {"url": "file:///etc/passwd"})
    assert bad.status_code == 400 and "http://" in bad.json()["detail"]
    dead = f"http://127.0.0.1:{free_port()}"
    down = post(jupyterlab, "catalog", {"url": dead, "token": TOKEN})
    assert down.status_code == 502 and dead in down.json()["detail"] and TOKEN not in down.text
    # Not logged in to Jupyter: refused before anything is opened.
    url, _token, _root = jupyterlab
    assert httpx.post(f"{url}/kbsql/catalog", json={}, timeout=30).status_code == 403
    # Jupyter's own log never holds the token (it travelled in a POST body only).

    # A real `kbsql serve`: its catalog with counts.
    seed(server_url)
    body = post(jupyterlab, "catalog", {"url": server_url}).json()
    assert body["connection"]["kind"] == "remote" and body["connection"]["where"] == server_url
    (project,) = [p for p in body["projects"] if p["name"] == "mindsdb"]
    assert project["knowledge_bases"][0]["rows"] == 3 and project["knowledge_bases"][0]["chunks"] > 3
    assert [a["name"] for a in project["agents"]] == ["helper"]
    # Jupyter's own log never holds the token (it travelled in POST bodies only).
    assert TOKEN not in jupyterlab.log.read_text()
