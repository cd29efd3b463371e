"""Two engines in one process keep their own outbound policy (issue 22, "a shared server is
shared"): where model calls may go, how many run at once per model host, and whether an
error answer's body is shown.

The policy used to be one per process, set by the last engine built: a notebook's engine
beside a test server, or two engines with different bounds, silently ran under the other's
hosts and lane limit. Here each engine is confined to its own scripted OpenAI-compatible
server on loopback (`tests/knowledge/fakes.py` for embeddings, `tests/agents/fakes.py` for
an agent's chat), and the two insert at the same time, each under its own lane limit.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kbsql.engine import Engine
from kbsql.engine.config import EngineConfig
from kbsql.interface.errors import ProviderError
from tests.agents.fakes import FakeLLM, text
from tests.knowledge.conftest import sql, sql_error, table, wait_query
from tests.knowledge.fakes import FakeProvider


def host_of(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0]


def confined(folder: Path, *urls: str, concurrency: int) -> Engine:
    """A served engine (as `kbsql serve --allow-model-host ... --model-concurrency N` builds
    it) whose model calls may go only to the hosts of `urls`, `concurrency` at once."""
    config = EngineConfig.load(folder)
    config.served = True
    config.allowed_model_hosts = tuple(host_of(u) for u in urls)
    config.model_concurrency = concurrency
    return Engine(config=config)


def embedding(fake: FakeProvider) -> str:
    return json.dumps({"provider": "openai", "model_name": "emb-1", "base_url": f"{fake.url}/v1"})


class Timed:
    """Records when each embedding call to a fake was being answered (start, end)."""

    def __init__(self, fake: FakeProvider) -> None:
        self.spans: list[tuple[float, float]] = []
        answer: Callable[[str, dict[str, Any]], tuple[int, Any]] = fake.answer

        def timed(path: str, body: dict[str, Any]) -> tuple[int, Any]:
            start = time.monotonic()
            try:
                return answer(path, body)
            finally:
                self.spans.append((start, time.monotonic()))

        fake.answer = timed  # type: ignore[method-assign]


@pytest.fixture
def fakes() -> Iterator[tuple[FakeProvider, FakeProvider]]:
    first, second = FakeProvider(), FakeProvider()
    yield first, second
    first.close()
    second.close()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM("openai", [text("an answer from the allowed model")]) as fake:
        yield fake


def test_each_engine_calls_only_its_own_model_hosts(tmp_path: Path, fakes: tuple[FakeProvider, FakeProvider],
                                                     llm: FakeLLM) -> None:
    a_fake, b_fake = fakes
    a = confined(tmp_path / "a", a_fake.url, concurrency=1)
    b = confined(tmp_path / "b", b_fake.url, llm.base_url, concurrency=4)  # built last
    open_engine = Engine(tmp_path / "open")  # embedded, no bounds: anything goes
    try:
        sql(a, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {embedding(a_fake)}")
        sql(b, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {embedding(b_fake)}")
        a_calls, b_calls = a_fake.embed_calls, b_fake.embed_calls
        assert a_calls >= 1 and b_calls >= 1

        refused = sql_error(a, f"CREATE KNOWLEDGE_BASE other USING embedding_model = {embedding(b_fake)}")
        assert f"model calls to {host_of(b_fake.url)} are not allowed on this server" in refused
        refused = sql_error(b, f"CREATE KNOWLEDGE_BASE other USING embedding_model = {embedding(a_fake)}")
        assert f"model calls to {host_of(a_fake.url)} are not allowed" in refused
        assert (a_fake.embed_calls, b_fake.embed_calls) == (a_calls, b_calls)  # nothing was sent

        # the embedded engine of the same process is bound by neither
        sql(open_engine, f"CREATE KNOWLEDGE_BASE ka USING embedding_model = {embedding(a_fake)}")
        sql(open_engine, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {embedding(b_fake)}")

        # an error answer: a confined engine names it in kbsql's words, the open one shows
        # the provider's own sentence (its user needs it to fix the call)
        a_fake.fail_marker = "poison"
        hidden = sql_error(a, "INSERT INTO kb (id, content) VALUES (1, 'poison pill')")
        shown = sql_error(open_engine, "INSERT INTO ka (id, content) VALUES (1, 'poison pill')")
        assert "answered HTTP 500" in hidden and "cannot embed" not in hidden
        assert "the model cannot embed this text" in shown

        # an agent's chat provider (its model is checked at CREATE AGENT): allowed on b
        # only, refused on a in a line naming the host
        model = {"provider": "openai", "model_name": "m1", "base_url": llm.base_url}
        with pytest.raises(ProviderError, match=f"model calls to {host_of(llm.base_url)} are not allowed"):
            a.create_agent("mindsdb", {"name": "helper", "model": model})
        b.create_agent("mindsdb", {"name": "helper", "model": model})
        answer = b.complete("mindsdb", "helper", [{"question": "hi"}])
        assert answer["message"]["content"] == "an answer from the allowed model"
        assert llm.chat_calls == 1
    finally:
        for engine in (a, b, open_engine):
            engine.close()


def test_two_engines_inserting_at_once_each_keep_their_own_lane_limit(
        tmp_path: Path, fakes: tuple[FakeProvider, FakeProvider]) -> None:
    a_fake, b_fake = fakes
    a = confined(tmp_path / "a", a_fake.url, concurrency=1)
    b = confined(tmp_path / "b", b_fake.url, concurrency=4)
    try:
        rows = pd.DataFrame([{"id": i, "content": f"document {i} about topic {i % 5}"} for i in range(24)])
        for engine, fake in ((a, a_fake), (b, b_fake)):
            sql(engine, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {embedding(fake)}")
            engine.register_dataframe("src", rows)
        a_spans, b_spans = Timed(a_fake), Timed(b_fake)
        for fake in fakes:
            fake.delay, fake.max_active = 0.15, 0
        started: dict[str, int] = {}

        def insert(name: str, engine: Engine) -> None:  # 8 batches, 4 threads asking at once
            result = sql(engine, "INSERT INTO kb SELECT * FROM df.src USING batch_size = 3, threads = 4")
            started[name] = result.data[0][0]

        threads = [threading.Thread(target=insert, args=item) for item in (("a", a), ("b", b))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name, engine in (("a", a), ("b", b)):
            done = wait_query(engine, started[name])
            assert done["PROCESSED_ROWS"] == 24 and done["ERROR"] is None, done
            assert table(engine, "SELECT count(*) AS n FROM kb") == [{"n": 24}]

        assert a_fake.max_active == 1  # a's lane: one call at a time, though 4 threads asked
        assert 2 <= b_fake.max_active <= 4  # b's lane, not a's, bounds b's calls
        assert len(a_spans.spans) == 8 and len(b_spans.spans) == 8
        overlapping = [s for s in b_spans.spans
                       if any(s[0] < end and start < s[1] for start, end in a_spans.spans)]
        assert overlapping, "the two engines' calls did not run at the same time"
    finally:
        a.close()
        b.close()


def test_an_embedded_engine_says_where_its_bounds_are_set(tmp_path: Path,
                                                          fakes: tuple[FakeProvider, FakeProvider]) -> None:
    """Bounds from an embedded engine's own config: the refusal names the engine and its
    config, not a server and a flag the user never started."""
    a_fake, b_fake = fakes
    config = EngineConfig.load(tmp_path / "e")
    config.allowed_model_hosts = (host_of(a_fake.url),)
    eng = Engine(config=config)
    try:
        refused = sql_error(eng, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {embedding(b_fake)}")
        assert f"model calls to {host_of(b_fake.url)} are not allowed in this engine" in refused
        assert "the allowed_model_hosts setting" in refused and "server" not in refused
        assert b_fake.embed_calls == 0
    finally:
        eng.close()
