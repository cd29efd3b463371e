"""A model's answer is bounded (`kbsql serve --model-answer-mb`, default 8; issue 39), measured
against a real server (3 s statement deadline, 256 MB for SQL) as the doors13 audit measured
it: the server's peak RSS growth (VmHWM after clear_refs), its CPU-seconds and the time to the
answer. A model server that streamed 1 MB deltas without end grew the server by 21 GB in an
agent's 300 s wall time (here the agent's params.timeout of 10 s stops a server without the
bound, after hundreds of MB); one 50 MB line cost +200 MB before anything looked at it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from kbsql.server.process import ServerProcess, spawn
from tests.agents.fakes import FakeLLM, flood, line
from tests.files.served import cost

MB = 1 << 20


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with spawn(tmp_path_factory.mktemp("answer-bounds"),
               args=("--statement-timeout", "3", "--sql-memory-mb", "256")) as proc:
        yield proc


def agent(server: ServerProcess, name: str, fake: FakeLLM) -> None:
    answer = httpx.post(f"{server.url}/api/projects/mindsdb/agents", timeout=30, json={"agent": {
        "name": name, "model": {"provider": "openai", "model_name": "m1", "api_key": "sk-test-123",
                                "base_url": fake.base_url},
        "params": {"timeout": 10}}})
    assert answer.status_code == 201, answer.text


def ask(server: ServerProcess, door: str, name: str) -> httpx.Response:
    if door == "sql":
        return httpx.post(f"{server.url}/api/sql/query", timeout=120,
                          json={"query": f"SELECT answer FROM {name} WHERE question = 'hi'"})
    suffix = "/stream" if door == "stream" else ""
    return httpx.post(f"{server.url}/api/projects/mindsdb/agents/{name}/completions{suffix}",
                      json={"messages": [{"question": "hi", "answer": None}]}, timeout=120)


@pytest.mark.parametrize("door", ["completions", "stream", "sql"])
def test_a_model_that_never_stops_answering_fails_at_the_bound(served: ServerProcess, door: str) -> None:
    """1 MB deltas for ever: the call fails once 8 MB have come, in one line naming the flag,
    on each door an agent answers through (before: it read until the run's deadline)."""
    with FakeLLM("openai", [flood(MB)]) as fake:
        agent(served, f"flood_{door}", fake)
        start = time.monotonic()
        answer, cpu, grown = cost(served, lambda: ask(served, door, f"flood_{door}"))
        seconds = time.monotonic() - start
    assert "more than 8 MB (kbsql serve --model-answer-mb)" in answer.text, answer.text[:500]
    assert seconds < 6 and cpu < 6, (seconds, cpu)
    assert grown < 120, grown


def test_one_long_line_is_cut_before_it_ends(served: ServerProcess) -> None:
    """One 50 MB `data:` line: refused once 8 MB of it have come (before: read whole, +200 MB
    and answered with all of it)."""
    with FakeLLM("openai", [line(50 * MB)]) as fake:
        agent(served, "one_line", fake)
        answer, _, grown = cost(served, lambda: ask(served, "completions", "one_line"))
    assert "more than 8 MB (kbsql serve --model-answer-mb)" in answer.text, answer.text[:500]
    assert grown < 100, grown


def test_a_long_answer_under_the_bound_still_arrives(served: ServerProcess) -> None:
    """Two 1 MB deltas (each one line) make a 2 MB answer, whole."""
    with FakeLLM("openai", []) as fake:
        fake.script = [{"text": "ab"}]
        fake.openai_events = lambda turn: [  # type: ignore[method-assign]
            *(f'data: {{"choices": [{{"index": 0, "delta": {{"content": "{c * MB}"}}}}]}}\n\n' for c in "ab"),
            "data: [DONE]\n\n"]
        agent(served, "long_ok", fake)
        answer = ask(served, "completions", "long_ok")
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["message"]["content"] == "a" * MB + "b" * MB


def test_an_embedding_answer_is_bounded_by_what_was_asked(served: ServerProcess) -> None:
    """An embedding server answering one text with a vector of 25 M numbers (100 MB): an
    insert grew the server by 1,243 MB and a search by 1,146 MB, answering 3.2 s past its
    deadline while another client waited 4.5 s; now refused once what one vector may take
    (8,192 numbers) has come, while ordinary vectors still embed."""
    with FakeLLM("openai", []) as fake:
        fake.embedding_size = 25_000_000
        model = ("{'provider': 'openai', 'model_name': 'e1', 'api_key': 'sk-test-123', "
                 f"'base_url': '{fake.base_url}'}}")
        made = httpx.post(f"{served.url}/api/sql/query", timeout=60, json={
            "query": f"CREATE KNOWLEDGE_BASE huge_emb USING embedding_model = {model}"}).json()
        if made.get("type") == "error":  # the embedding check at create time already fails
            assert "more than 8 MB (kbsql serve --model-answer-mb)" in made["error_message"], made
            fake.embedding_size = 8
            made = httpx.post(f"{served.url}/api/sql/query", timeout=60, json={
                "query": f"CREATE KNOWLEDGE_BASE huge_emb USING embedding_model = {model}"}).json()
            assert made["type"] == "ok", made
            fake.embedding_size = 25_000_000
        answer, _, grown = cost(served, lambda: httpx.post(
            f"{served.url}/api/sql/query", timeout=120,
            json={"query": "INSERT INTO huge_emb (id, content) VALUES ('1', 'hello')"}))
        assert "more than 8 MB (kbsql serve --model-answer-mb)" in answer.text, answer.text[:500]
        assert grown < 150, grown
        fake.embedding_size = 8
        ok = httpx.post(f"{served.url}/api/sql/query", timeout=60, json={
            "query": "INSERT INTO huge_emb (id, content) VALUES ('2', 'hello')"}).json()
        assert ok.get("affected_rows") == 1, ok
