"""Background inserts as MindsDB runs them (insert_data.mdx, "Insert Data using Partitions"):
`INSERT INTO kb SELECT ... USING batch_size = N` answers the query's row at once and runs
on; information_schema.queries and DESCRIBE KNOWLEDGE_BASE show its progress; query_cancel
stops it between batches keeping what was stored; query_resume continues it to an exact
final count. The embedder is a scripted OpenAI-compatible server on loopback that takes a
few milliseconds per call, so an insert lasts long enough to be stopped half-way."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kbsql.engine import Engine
from tests.knowledge.fakes import FakeProvider
from tests.waiting import ended, queries_sql, wait_for

ROWS = 120


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider()
    server.delay = 0.01
    yield server
    server.close()


@pytest.fixture
def engine(tmp_path: Path, fake: FakeProvider) -> Iterator[Engine]:
    eng = Engine(tmp_path / "data")
    _setup(eng, fake)
    yield eng
    eng.close()


def _setup(eng: Engine, fake: FakeProvider, rows: int = ROWS) -> None:
    model = {"provider": "openai", "model_name": "emb-1", "base_url": f"{fake.url}/v1"}
    ok(eng, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {json.dumps(model)}, "
            "content_columns = ['body'], id_column = 'pk', metadata_columns = ['grp']")
    # `grp` repeats (3 rows each): batches of 4 end inside a group, the case MindsDB's
    # `track_column > last` resume would lose rows in
    bodies = [f"document {i} about topic {i % 7}" for i in range(rows)]
    eng.register_dataframe("src", pd.DataFrame({"pk": range(rows), "grp": [i // 3 for i in range(rows)],
                                                "body": bodies}))


def ok(eng: Engine, query: str) -> Any:
    result = eng.query(query)
    assert result.type != "error", result.error_message
    return result


def rows(eng: Engine, query: str) -> list[dict[str, Any]]:
    result = ok(eng, query)
    return [dict(zip(result.column_names, r, strict=True)) for r in result.to_json()["data"]]


def query_row(eng: Engine, query_id: int) -> dict[str, Any]:
    return rows(eng, queries_sql(query_id))[0]


def wait(eng: Engine, query_id: int, until: Any) -> dict[str, Any]:
    return wait_for(lambda: query_row(eng, query_id), until)


def count(eng: Engine) -> int:
    return rows(eng, "SELECT count(*) AS n FROM kb")[0]["n"]


INSERT = "INSERT INTO kb SELECT pk, grp, body FROM df.src USING batch_size = 4, track_column = grp"


def test_answers_the_query_row_at_once_then_cancel_and_resume_mid_way_end_exact(engine: Engine) -> None:
    started = time.monotonic()
    answer = rows(engine, INSERT)
    assert time.monotonic() - started < 5  # 30 batches at >= 10 ms each: it did not run inline
    assert list(answer[0]) == ["ID", "SQL", "DATABASE", "STARTED_AT", "FINISHED_AT", "PARAMETERS",
                               "CONTEXT", "PROCESSED_ROWS", "ERROR", "UPDATED_AT"]
    query_id = answer[0]["ID"]
    assert answer[0]["FINISHED_AT"] is None and json.loads(answer[0]["PARAMETERS"]) == \
        {"batch_size": 4, "track_column": "grp"}
    running = wait(engine, query_id, lambda r: r["PROCESSED_ROWS"] >= 20)
    assert running["STARTED_AT"] is not None and running["ERROR"] is None
    ok(engine, f"SELECT query_cancel({query_id})")
    stopped = wait(engine, query_id, ended)
    assert "cancelled" in stopped["ERROR"] and stopped["FINISHED_AT"] is None
    assert 20 <= stopped["PROCESSED_ROWS"] < ROWS
    assert count(engine) == stopped["PROCESSED_ROWS"]  # what was stored stays; nothing else
    describe = rows(engine, "DESCRIBE KNOWLEDGE_BASE kb")[0]
    assert describe["QUERY_ID"] == query_id and describe["PROCESSED_ROWS"] == stopped["PROCESSED_ROWS"]
    assert describe["INSERT_STARTED_AT"] == running["STARTED_AT"]
    assert describe["ERROR"] == stopped["ERROR"]
    ok(engine, f"SELECT query_cancel({query_id})")  # cancelling a stopped insert changes nothing
    assert query_row(engine, query_id)["ERROR"] == stopped["ERROR"]
    resumed = rows(engine, f"SELECT query_resume({query_id})")[0]
    assert resumed["ID"] == query_id and resumed["ERROR"] is None
    done = wait(engine, query_id, ended)
    assert done["ERROR"] is None and done["FINISHED_AT"] is not None and done["PROCESSED_ROWS"] == ROWS
    assert count(engine) == ROWS
    assert sorted(int(r["id"]) for r in rows(engine, "SELECT id FROM kb")) == list(range(ROWS))
    describe = rows(engine, "DESCRIBE KNOWLEDGE_BASE kb")[0]
    assert describe["INSERT_FINISHED_AT"] == done["FINISHED_AT"] and describe["ERROR"] is None
    assert "already finished" in engine.query(f"SELECT query_resume({query_id})").error_message


def test_a_failure_half_way_is_recorded_keeps_what_was_stored_and_resume_finishes(
        engine: Engine, fake: FakeProvider) -> None:
    fake.fail_marker = "document 61 "
    query_id = rows(engine, INSERT)[0]["ID"]
    failed = wait(engine, query_id, ended)
    assert "HTTP 500" in failed["ERROR"] and failed["FINISHED_AT"] is None
    stored = count(engine)
    assert 0 < stored == failed["PROCESSED_ROWS"] < ROWS
    assert {int(r["id"]) for r in rows(engine, "SELECT id FROM kb")} == set(range(stored))
    fake.fail_marker = None
    ok(engine, f"SELECT query_resume({query_id})")
    assert wait(engine, query_id, ended)["PROCESSED_ROWS"] == ROWS and count(engine) == ROWS


def test_queries_are_server_wide_and_a_stopped_engine_s_insert_resumes_in_another(
        tmp_path: Path, fake: FakeProvider) -> None:
    first = Engine(tmp_path / "data")
    _setup(first, fake)
    query_id = rows(first, INSERT)[0]["ID"]
    wait(first, query_id, lambda r: r["PROCESSED_ROWS"] >= 8)
    second = Engine(tmp_path / "data")  # another connection, process or server on the same state
    try:
        listed = query_row(second, query_id)
        assert listed["SQL"].startswith("INSERT INTO kb SELECT") and listed["FINISHED_AT"] is None
        assert "running already" in second.query(f"SELECT query_resume({query_id})").error_message
        first.close()  # stops the insert after its batch: recorded, resumable
        stopped = query_row(second, query_id)
        assert "stopped" in stopped["ERROR"] and count(second) == stopped["PROCESSED_ROWS"] < ROWS
        ok(second, f"SELECT query_resume({query_id})")
        assert wait(second, query_id, ended)["ERROR"] is None and count(second) == ROWS
    finally:
        first.close()
        second.close()


def test_a_cancel_through_another_engine_stops_the_insert(tmp_path: Path, fake: FakeProvider) -> None:
    first = Engine(tmp_path / "data")
    _setup(first, fake)
    second = Engine(tmp_path / "data")
    try:
        query_id = rows(first, INSERT)[0]["ID"]
        wait(first, query_id, lambda r: r["PROCESSED_ROWS"] >= 8)
        ok(second, f"SELECT query_cancel({query_id})")  # the owner reads the request between batches
        stopped = wait(second, query_id, ended)
        assert "cancelled" in stopped["ERROR"] and count(first) == stopped["PROCESSED_ROWS"] < ROWS
    finally:
        first.close()
        second.close()


def test_other_statements_run_while_an_insert_runs(engine: Engine, fake: FakeProvider) -> None:
    fake.delay = 0.05
    query_id = rows(engine, INSERT)[0]["ID"]
    wait(engine, query_id, lambda r: r["PROCESSED_ROWS"] >= 4)
    started = time.monotonic()
    assert rows(engine, "SELECT 1 AS one") == [{"one": 1}]
    assert rows(engine, "SELECT count(*) AS n FROM df.src") == [{"n": ROWS}]
    assert time.monotonic() - started < 2
    ok(engine, f"SELECT query_cancel({query_id})")
    wait(engine, query_id, ended)


@pytest.mark.parametrize("statement,message", [
    ("INSERT INTO kb SELECT pk, body FROM df.src USING batch_size = 0", "batch_size"),
    ("INSERT INTO kb SELECT pk, body FROM df.src USING batch_size = 4, track_column = nope", "track_column"),
    ("INSERT INTO kb SELECT pk, body FROM df.nowhere USING batch_size = 4", "nowhere"),
    ("INSERT INTO kb SELECT pk, nope FROM df.src USING batch_size = 4", "nope"),
    ("SELECT query_cancel(424242)", "Query not found: 424242"),
    ("SELECT query_resume()", "one query id"),
])
def test_a_statement_that_cannot_run_fails_at_once_and_records_nothing(engine: Engine, statement: str,
                                                                        message: str) -> None:
    result = engine.query(statement)
    assert result.type == "error" and message in result.error_message, result
    assert rows(engine, "SELECT count(*) AS n FROM information_schema.queries") == [{"n": 0}]


def test_without_a_tracked_column_a_stopped_insert_cannot_resume(engine: Engine) -> None:
    ok(engine, "CREATE KNOWLEDGE_BASE plain USING embedding_model = {\"provider\": \"kbsql\", "
               "\"model_name\": \"hash-64\"}, content_columns = ['body']")
    query_id = rows(engine, "INSERT INTO plain SELECT body FROM df.src USING batch_size = 4")[0]["ID"]
    done = wait(engine, query_id, ended)
    assert done["ERROR"] is None and done["PROCESSED_ROWS"] == ROWS
    assert json.loads(done["CONTEXT"]).get("track_column") is None


def test_an_insert_waiting_for_a_worker_is_recorded_stopped_when_the_engine_closes(
        tmp_path: Path, fake: FakeProvider) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.json").write_text(json.dumps({"background_inserts": 1}))
    first = Engine(tmp_path / "data")
    _setup(first, fake)
    ok(first, "CREATE KNOWLEDGE_BASE kb2 USING embedding_model = {\"provider\": \"kbsql\", "
              "\"model_name\": \"hash-64\"}, content_columns = ['body'], id_column = 'pk'")
    running = rows(first, INSERT)[0]["ID"]
    waiting = rows(first, "INSERT INTO kb2 SELECT pk, body FROM df.src USING batch_size = 50")[0]["ID"]
    wait(first, running, lambda r: r["PROCESSED_ROWS"] >= 4)
    assert query_row(first, waiting)["STARTED_AT"] is None  # one worker: it waits its turn
    first.close()
    second = Engine(tmp_path / "data")
    try:
        for query_id in (running, waiting):
            assert "stopped" in query_row(second, query_id)["ERROR"]
            ok(second, f"SELECT query_resume({query_id})")
        assert wait(second, waiting, ended)["PROCESSED_ROWS"] == ROWS
        assert wait(second, running, ended)["PROCESSED_ROWS"] == ROWS
        assert rows(second, "SELECT count(*) AS n FROM kb2") == [{"n": ROWS}] and count(second) == ROWS
    finally:
        second.close()


@pytest.mark.parametrize(("delay", "stored"), [(0.5, ROWS // 4), (1.6, 0)])
def test_each_background_batch_runs_under_the_statement_deadline(tmp_path: Path, fake: FakeProvider,
                                                                 delay: float, stored: int) -> None:
    """README: a background insert's deadline is renewed when a batch is stored, so each batch
    runs under it. Three batches of 10 rows at 0.5 s a model call under a 1 s deadline all go
    in (1.5 s in all); at 1.6 s the first batch runs past it and the insert fails saying so, with
    nothing stored (before, every batch went in whatever it took)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.json").write_text(json.dumps({"statement_timeout": 1}))
    with Engine(tmp_path / "data") as eng:
        _setup(eng, fake, rows=ROWS // 4)
        fake.delay = delay
        query_id = rows(eng, "INSERT INTO kb SELECT pk, grp, body FROM df.src USING batch_size = 10")[0]["ID"]
        done = wait(eng, query_id, ended)
        assert count(eng) == stored == done["PROCESSED_ROWS"], done
        if stored:
            assert done["ERROR"] is None and done["FINISHED_AT"] is not None, done
        else:
            assert "time limit (1 s" in done["ERROR"], done
