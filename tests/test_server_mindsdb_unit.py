"""What MindsDB's own HTTP unit tests (mindsdb/mindsdb tests/unit/api/http/*) showed when
their requests were sent to a real `kbsql serve`: each test here is one of their findings,
asserted as a user of the REST API would see it."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import start_server, stop_server
from tests.knowledge.fakes import FakeProvider

KBS = "/api/projects/mindsdb/knowledge_bases"


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    proc, url = start_server(tmp_path_factory.mktemp("mindsdb_unit") / "server")
    with httpx.Client(base_url=url, timeout=60) as http:
        yield http
    stop_server(proc)


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
