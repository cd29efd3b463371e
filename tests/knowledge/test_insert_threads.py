"""`INSERT INTO kb SELECT ... USING threads = N` embeds N batches at once against a scripted
OpenAI-compatible server on loopback (which sleeps per call and counts the calls in flight),
and stores exactly what `threads = 1` stores: same ids, chunks, metadata, search results,
upserts, `error = 'skip'` / `'raise'` outcomes. With `batch_size` the insert runs in the
background as MindsDB's partitioned inserts do (kb_background.py): `background()` waits for
it and gives its information_schema.queries row (PROCESSED_ROWS, ERROR)."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kbsql.client.bars import ProgressBars
from kbsql.engine import Engine
from kbsql.engine.sql.kb.kb_insert import MAX_THREADS, options_of
from kbsql.interface.errors import SqlError
from kbsql.interface.progress import EMBEDDING, STORING
from tests.knowledge.conftest import background, sql, sql_error, table
from tests.knowledge.fakes import FakeProvider


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider()
    yield server
    server.close()


def _kb(engine: Engine, fake: FakeProvider, name: str) -> None:
    model = {"provider": "openai", "model_name": "emb-1", "base_url": f"{fake.url}/v1"}
    sql(engine, f"CREATE KNOWLEDGE_BASE {name} USING embedding_model = {json.dumps(model)}, "
                "metadata_columns = ['kind', 'seq']")


def _register(engine: Engine, rows: list[dict[str, Any]]) -> None:
    engine.register_dataframe("src", pd.DataFrame(rows))


def _rows(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "content": f"document {i} about topic {i % 5} and more words", "kind": f"k{i % 3}",
             "seq": i} for i in range(n)]


@pytest.mark.parametrize("threads", [1, 4])
def test_threads_sets_how_many_embedding_calls_run_at_once(engine: Engine, fake: FakeProvider,
                                                           threads: int) -> None:
    _kb(engine, fake, "kb")
    _register(engine, _rows(24))
    fake.delay, fake.max_active, calls = 0.15, 0, fake.embed_calls
    done = background(engine, f"INSERT INTO kb SELECT * FROM df.src USING batch_size = 3, "
                              f"threads = {threads}")
    assert done["PROCESSED_ROWS"] == 24 and done["ERROR"] is None
    assert fake.embed_calls - calls == 8  # one call per batch: each batch embedded exactly once
    if threads == 1:
        assert fake.max_active == 1
    else:
        assert 2 <= fake.max_active <= threads
    assert table(engine, "SELECT count(*) AS n FROM kb") == [{"n": 24}]


def _state(engine: Engine, kb: str) -> dict[str, Any]:
    chunks = table(engine, f"SELECT id, chunk_id, chunk_content, metadata FROM {kb}")
    for c in chunks:  # the insert's time differs between the two runs, nothing else may
        c["metadata"] = {k: v for k, v in (c["metadata"] or {}).items() if k != "_updated_at"}
    search = table(engine, f"SELECT id, chunk_id, relevance FROM {kb} WHERE content = 'topic 3 words' "
                           "LIMIT 7")
    return {"chunks": sorted(chunks, key=lambda c: c["chunk_id"]), "search": search}


def test_threads_4_stores_what_threads_1_stores_upserts_included(engine: Engine, fake: FakeProvider) -> None:
    # 40 rows naming 17 ids: a repeated id lands in several batches, and the rows come
    # shuffled, so track_column = seq decides which version is the last (the one kept)
    rows = [{"id": i % 17, "content": f"version {i} of document {i % 17} topic {i % 4} words",
             "kind": f"k{i % 3}", "seq": i} for i in range(40)]
    random.Random(7).shuffle(rows)
    _register(engine, rows)
    states = []
    for kb, threads in (("kb1", 1), ("kb4", 4)):
        _kb(engine, fake, kb)
        sql(engine, f"INSERT INTO {kb} (id, content, kind, seq) VALUES (3, 'an older version', 'old', -1)")
        done = background(engine, f"INSERT INTO {kb} SELECT * FROM df.src "
                                  f"USING batch_size = 4, threads = {threads}, track_column = seq")
        assert done["PROCESSED_ROWS"] == 40 and done["ERROR"] is None
        states.append(_state(engine, kb))
    assert states[0] == states[1]
    latest = {r["id"]: r for r in sorted(rows, key=lambda r: r["seq"])}  # the last seq of each id wins
    got = {c["id"]: c for c in states[1]["chunks"]}
    assert sorted(got) == sorted(str(i) for i in latest)
    for doc_id, row in latest.items():
        assert got[str(doc_id)]["chunk_content"] == row["content"]
        assert got[str(doc_id)]["metadata"]["seq"] == row["seq"]


def test_error_skip_stores_every_other_row_and_reports_the_failed_one(
        engine: Engine, fake: FakeProvider, caplog: pytest.LogCaptureFixture) -> None:
    _kb(engine, fake, "kb")
    rows = _rows(20)
    rows[9]["content"] = "POISON text the model cannot embed"
    _register(engine, rows)
    fake.fail_marker = "POISON"
    with caplog.at_level(logging.WARNING, logger="kbsql"):
        done = background(engine, "INSERT INTO kb SELECT * FROM df.src USING batch_size = 4, threads = 4, "
                                  "error = 'skip'")
    assert done["PROCESSED_ROWS"] == 20 and done["ERROR"] is None  # 20 read; 19 stored, below
    stored = {r["id"] for r in table(engine, "SELECT id FROM kb")}
    assert stored == {str(i) for i in range(20)} - {"9"}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("1 of 20 rows failed" in m and "HTTP 500" in m for m in warned), warned


def test_error_raise_keeps_the_batches_before_the_failing_one_and_none_after(
        engine: Engine, fake: FakeProvider) -> None:
    _kb(engine, fake, "kb")
    rows = _rows(20)
    rows[9]["content"] = "POISON text the model cannot embed"  # batch 2 of 5 (rows 8..11)
    _register(engine, rows)
    fake.fail_marker, fake.delay, calls = "POISON", 0.05, fake.embed_calls
    message = background(engine, "INSERT INTO kb SELECT * FROM df.src USING batch_size = 4, "
                                  "threads = 4")["ERROR"]
    assert "HTTP 500" in message and "cannot embed" in message
    assert fake.embed_calls - calls >= 4  # later batches were embedded meanwhile...
    stored = {r["id"] for r in table(engine, "SELECT id FROM kb")}
    assert stored == {str(i) for i in range(8)}  # ...and yet only the batches before are stored
    fake.fail_marker = None  # the same statement again completes it: nothing was stored twice
    assert background(engine, "INSERT INTO kb SELECT * FROM df.src USING batch_size = 4, threads = 4"
                      )["PROCESSED_ROWS"] == 20
    assert table(engine, "SELECT count(*) AS n FROM kb") == [{"n": 20}]


@pytest.mark.parametrize("value", ["0", "2.5", "1000000", "'many'", "'-2'", str(MAX_THREADS + 1)])
def test_an_unusable_threads_value_is_one_clear_error(engine: Engine, fake: FakeProvider, value: str) -> None:
    _kb(engine, fake, "kb")
    _register(engine, _rows(3))
    calls = fake.embed_calls
    message = sql_error(engine, f"INSERT INTO kb SELECT * FROM df.src USING threads = {value}")
    assert f"threads must be a whole number from 1 to {MAX_THREADS}, or true/false" in message
    assert fake.embed_calls == calls and table(engine, "SELECT count(*) AS n FROM kb") == [{"n": 0}]


def test_a_negative_threads_value_is_refused_before_anything_runs(engine: Engine, fake: FakeProvider) -> None:
    _kb(engine, fake, "kb")
    _register(engine, _rows(3))
    calls = fake.embed_calls
    assert "Syntax error" in sql_error(engine, "INSERT INTO kb SELECT * FROM df.src USING threads = -2")
    with pytest.raises(SqlError, match="threads must be a whole number from 1 to"):
        options_of({"threads": -2})  # should a parser ever let it through
    assert fake.embed_calls == calls


@pytest.mark.parametrize("value", ["true", "false", str(MAX_THREADS)])
def test_threads_true_false_and_the_maximum_are_accepted(engine: Engine, fake: FakeProvider,
                                                         value: str) -> None:
    _kb(engine, fake, "kb")
    _register(engine, _rows(6))
    assert background(engine, f"INSERT INTO kb SELECT * FROM df.src USING batch_size = 2, threads = {value}"
                      )["PROCESSED_ROWS"] == 6


def test_progress_moves_from_the_calling_thread_only(engine: Engine, fake: FakeProvider) -> None:
    _kb(engine, fake, "kb")
    fake.delay = 0.02
    caller, bars = threading.get_ident(), []

    class Recorder:
        def __init__(self, description: str, total: int, unit: str):
            self.total, self.updates, self.closed = total, [], None
            bars.append(self)

        def update(self, phase: str, done: float, total: int) -> None:
            assert threading.get_ident() == caller  # a notebook display is never drawn from a worker
            self.updates.append((phase, done))

        def close(self, error: BaseException | None = None) -> None:
            self.closed = error or "done"

    record = engine.catalog.knowledge_base("mindsdb", "kb")
    rows = _rows(300)
    batches = [rows[i:i + 50] for i in range(0, 300, 50)]
    bars_of = ProgressBars(Recorder, always=True)
    assert engine.kbs.insert_batches(record, batches, threads=3, progress=bars_of) == 300
    (bar,) = bars
    done = [d for _, d in bar.updates]
    assert bar.total == 300 and done == sorted(done) and done[-1] == 300 and bar.closed == "done"
    phases = {p for p, _ in bar.updates}
    assert {EMBEDDING, STORING} <= phases
    assert len([p for p, _ in bar.updates if p == EMBEDDING]) >= 6  # at least once per batch


def test_batches_are_read_once_each_and_only_a_few_ahead_of_storing(engine: Engine,
                                                                   fake: FakeProvider) -> None:
    """An INSERT ... SELECT's batches are built from the frame as they are read
    (`FrameBatches`): the insert reads each once, and at most 2 x threads + 1 are read and
    not yet stored at any moment, so a large insert never holds the whole frame as dicts."""
    from kbsql.engine.sql.kb.kb_insert import FrameBatches

    _kb(engine, fake, "kb")
    record = engine.catalog.knowledge_base("mindsdb", "kb")
    reads: list[int] = []
    stored_before: list[int] = []

    class Counting(FrameBatches):
        def __getitem__(self, index):  # type: ignore[override]
            batch = super().__getitem__(index)  # past the end: IndexError, the end of iteration
            reads.append(index)
            stored_before.append(len(table(engine, "SELECT id FROM kb LIMIT 10000")))
            return batch

    frame = pd.DataFrame(_rows(400))
    batches = Counting(frame, 20)
    assert len(batches) == 20 and batches[19][-1]["id"] == frame.iloc[-1]["id"]
    reads.clear()
    stored_before.clear()
    assert engine.kbs.insert_batches(record, batches, threads=3, total_rows=batches.rows) == 400
    assert sorted(reads) == list(range(20))  # each batch built exactly once
    for index, stored in zip(reads, stored_before, strict=True):  # rows stored before batch i was read
        assert stored >= (index - 2 * 3 - 1) * 20
    assert len(table(engine, "SELECT id FROM kb LIMIT 10000")) == 400


@pytest.mark.parametrize("using", ["", "USING threads = 1", "USING threads = 4"])
def test_an_inline_insert_stops_at_its_deadline_whatever_the_threads(tmp_path: Path, fake: FakeProvider,
                                                                     using: str) -> None:
    """The statement deadline is checked by the calling thread between batches (issue 39):
    an inline insert of 2,000 rows whose embedding takes longer than its 1 s stops with the
    deadline's line and stores nothing, one transaction or batches of 1,000 embedded by 1 or
    4 threads alike. Before, each went on to its end and stored every row."""
    (tmp_path / "config.json").write_text(json.dumps({"statement_timeout": 1}))
    with Engine(tmp_path) as engine:
        _kb(engine, fake, "kb")
        _register(engine, _rows(2000))
        fake.delay = 0.2
        start = time.monotonic()
        message = sql_error(engine, f"INSERT INTO kb SELECT * FROM df.src {using}")
        assert "time limit (1 s" in message and "nothing stored" in message, message
        assert "USING batch_size" in message, message
        assert time.monotonic() - start < 6  # at most a batch late (8 calls of 0.2 s with threads = 1)
        fake.delay = 0.0
        assert table(engine, "SELECT count(*) AS n FROM kb") == [{"n": 0}]
