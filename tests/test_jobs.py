"""Jobs (CREATE JOB with LAST, issue #35): knowledge bases and tables that stay fresh.

Time is driven, never slept through: the embedded tests turn the scheduler's thread off
(`jobs_poll_s` 0) and call `run_due(now=...)` with the moments a clock would reach; the
served tests shrink every period (`jobs_time_scale`: a minute lasts a second or less) and
poll. Real components: SQLite files as data sources, knowledge bases on the offline hash
model, `kbsql serve` processes, an IPython shell with `%load_ext kbsql`, and (when
KBSQL_TEST_POSTGRES_DSN names a server) PostgreSQL, a fresh database per test.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pandas as pd
import pytest

import kbsql
from kbsql.engine import Engine
from kbsql.engine.jobs.job_store import STOPPED
from kbsql.engine.jobs.schedule import utcnow
from kbsql.interface.results import ErrorResult
from kbsql.server.process import ServerProcess, spawn
from tests.knowledge.fakes import FakeProvider
from tests.notebook.conftest import Cells, global_shell

HASH = '{"provider": "kbsql", "model_name": "hash-64"}'
SHOW_JOBS = ["NAME", "PROJECT", "START_AT", "END_AT", "NEXT_RUN_AT", "SCHEDULE_STR", "QUERY", "IF_QUERY",
             "VARIABLES"]  # MindsDB's JobsTable: SHOW JOBS, <project>.jobs, information_schema.jobs
HISTORY = ["name", "project", "run_start", "run_end", "error", "query"]
FAST = {"KBSQL_JOBS_POLL_S": "0.1", "KBSQL_JOBS_TIME_SCALE": "0.005"}  # a minute lasts 0.3 s


def run(engine: Engine, text: str) -> Any:
    result = engine.sql.execute(text, {})
    assert not isinstance(result, ErrorResult), f"{text}: {result.error_message}"
    return result


def frame(engine: Engine, text: str) -> pd.DataFrame:
    return run(engine, text).to_pandas()


def source(path: Path, rows: range) -> None:
    """A SQLite table `t` (id, body) holding `rows`, plus an empty `copied` and a `gate`."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER, body TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS copied (id INTEGER, body TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS gate (flag INTEGER)")
        db.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"note {i} about refunds") for i in rows])


def add(path: Path, rows: range) -> None:
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"note {i} about refunds") for i in rows])


def ids(engine: Engine, table: str) -> list[int]:
    """Every id of `table`, duplicates kept, sorted."""
    return sorted(int(i) for i in frame(engine, f"SELECT id FROM {table}")["id"])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Engine, Path]]:
    """An engine without a scheduler thread (time is driven), a SQLite source `src` with
    rows 1-5 in `t`, and a knowledge base `kb` holding them."""
    path = tmp_path / "src.sqlite"
    source(path, range(1, 6))
    engine = Engine(tmp_path / "data", settings={"jobs_poll_s": 0})
    run(engine, f"CREATE DATABASE src WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': '{path}'}}")
    run(engine, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {HASH}, content_columns = ['body'], "
                "id_column = 'id'")
    run(engine, "INSERT INTO kb SELECT id, body FROM src.t")
    yield engine, path
    engine.close()


SYNC = ("CREATE JOB sync (INSERT INTO kb SELECT id, body FROM src.t WHERE id > LAST; "
        "SELECT * FROM src.gate; "
        "INSERT INTO src.copied SELECT id, body FROM src.t WHERE id > COALESCE(LAST, 0)) EVERY hour")


def test_incremental_sync_exact_counts_a_failed_run_retried_and_a_restart(world, tmp_path) -> None:
    engine, path = world
    start = utcnow()
    run(engine, SYNC)
    assert engine.jobs.run_due(start + timedelta(seconds=1)) == 1
    # the first run sees no row of a bare LAST (MindsDB's), all of COALESCE(LAST, 0)
    assert ids(engine, "kb") == [1, 2, 3, 4, 5] and ids(engine, "src.copied") == [1, 2, 3, 4, 5]
    assert engine.jobs.run_due(start + timedelta(minutes=30)) == 0  # not due before the hour
    add(path, range(6, 9))
    assert engine.jobs.run_due(start + timedelta(hours=1, seconds=1)) == 1
    assert ids(engine, "kb") == list(range(1, 9)) and ids(engine, "src.copied") == list(range(1, 9))

    # a run failing at its second statement: the rows it put in the knowledge base stay,
    # the third statement does not run, LAST does not move, the error is one line
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE gate")
    add(path, range(9, 11))
    assert engine.jobs.run_due(start + timedelta(hours=2, seconds=1)) == 1
    history = frame(engine, "SELECT * FROM log.jobs_history")
    assert list(history.columns) == HISTORY and len(history) == 3
    assert "gate" in history["error"].iloc[-1] and "\n" not in history["error"].iloc[-1]
    assert history["error"].iloc[:2].isna().all()
    assert ids(engine, "src.copied") == list(range(1, 9))
    variables = frame(engine, "SHOW JOBS")["VARIABLES"].iloc[0]
    assert "8" in variables and "10" not in variables  # LAST still at the last good run's rows

    # retried over the same rows: nothing twice, nothing missed
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE gate (flag INTEGER)")
    add(path, range(11, 12))
    assert engine.jobs.run_due(start + timedelta(hours=3, seconds=1)) == 1
    assert ids(engine, "kb") == list(range(1, 12)) and ids(engine, "src.copied") == list(range(1, 12))

    # a restart (a new process on the directory) continues from the stored LAST
    engine.close()
    again = Engine(tmp_path / "data", settings={"jobs_poll_s": 0})
    try:
        add(path, range(12, 14))
        assert again.jobs.run_due(start + timedelta(hours=4, seconds=1)) == 1
        assert ids(again, "kb") == list(range(1, 14)) and ids(again, "src.copied") == list(range(1, 14))
    finally:
        again.close()


def test_if_skips_a_run_start_end_and_drop(world) -> None:
    engine, path = world
    start = utcnow()
    # IF: the statements run only when the IF query returns a row; a skipped run moves no LAST
    run(engine, "CREATE JOB gated (INSERT INTO src.copied SELECT id, body FROM src.t WHERE id > "
                "COALESCE(LAST, 0)) EVERY hour IF (SELECT * FROM src.gate WHERE flag = 1)")
    assert engine.jobs.run_due(start + timedelta(seconds=1)) == 1
    assert ids(engine, "src.copied") == []
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO gate VALUES (1)")
    assert engine.jobs.run_due(start + timedelta(hours=1, seconds=1)) == 1
    assert ids(engine, "src.copied") == [1, 2, 3, 4, 5]
    # DROP stops it; IF EXISTS makes a second drop no error, without it one line
    run(engine, "DROP JOB gated")
    add(path, range(6, 8))
    assert engine.jobs.run_due(start + timedelta(hours=2, seconds=1)) == 0
    assert ids(engine, "src.copied") == [1, 2, 3, 4, 5]
    run(engine, "DROP JOB IF EXISTS gated")
    assert "gated" in engine.sql.execute("DROP JOB gated", {}).error_message

    # START in the future, END after two more periods: three runs, then the job is gone
    run(engine, "CREATE JOB mindsdb.bounded (INSERT INTO kb SELECT id, body FROM src.t WHERE id > "
                "COALESCE(LAST, 0)) START '2030-01-01 00:00:00' END '2030-01-01 02:30:00' EVERY hour")
    listed = frame(engine, "SELECT * FROM information_schema.jobs")
    assert list(listed.columns) == SHOW_JOBS
    assert listed["START_AT"].iloc[0].startswith("2030-01-01 00:00:00")
    assert engine.jobs.run_due(datetime(2029, 12, 31, 23)) == 0
    ran = [engine.jobs.run_due(datetime(2030, 1, 1, hour, 0, 1)) for hour in range(4)]
    assert ran == [1, 1, 1, 0]
    assert frame(engine, "SHOW JOBS").empty  # ended: MindsDB deletes a job with no run left
    runs = frame(engine, "SELECT name, error FROM log.jobs_history WHERE name = 'bounded'")
    assert len(runs) == 3 and runs["error"].isna().all()
    assert ids(engine, "kb") == [1, 2, 3, 4, 5, 6, 7]


def test_start_datetime_variables_are_filled_in_as_mindsdb(world) -> None:
    """MindsDB's test_jobs.py::test_job runs `b > '{{PREVIOUS_START_DATETIME}}'`; its docs name
    tables `result_{{START_DATE}}`. The text went to the source as written: on SQLite a
    text column compared with '{{...' matched no row, silently, and a table got the braces."""
    engine, path = world
    now = utcnow()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE stamped (id INTEGER, at TEXT)")
        db.executemany("INSERT INTO stamped VALUES (?, ?)", [
            (1, (now - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")),  # before the job: not new
            (2, (now + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S"))])
    run(engine, "CREATE JOB stamps (INSERT INTO src.copied SELECT id, at AS body FROM src.stamped "
                "WHERE at > '{{PREVIOUS_START_DATETIME}}'; "
                "CREATE TABLE src.`result_{{START_DATE}}` (SELECT '{{START_DATETIME}}' AS started)"
                ") EVERY hour")
    assert engine.jobs.run_due(now + timedelta(seconds=1)) == 1
    history = frame(engine, "SELECT error, query FROM log.jobs_history")
    assert history["error"].isna().all(), history["error"].iloc[0]
    assert ids(engine, "src.copied") == [2]  # after the job was made (its first run's previous)
    run_start = pd.Timestamp(frame(engine, "SELECT run_start FROM log.jobs_history")["run_start"].iloc[0])
    started = frame(engine, f"SELECT started FROM src.`result_{run_start:%Y-%m-%d}`")["started"].iloc[0]
    assert started == f"{run_start:%Y-%m-%d %H:%M:%S}"
    assert "{{" not in history["query"].iloc[0]  # the log shows what ran


def test_project_jobs_and_show_jobs_answer_as_mindsdb(world) -> None:
    """MindsDB's test_jobs.py::test_job reads `select * from jobs` (in proj1) and `proj2.jobs`
    by `row.NAME`, `row.SCHEDULE_STR`: its project table and SHOW JOBS are
    information_schema.jobs filtered to the project (upper case; kbsql answered lower case),
    and SHOW JOBS takes FROM, LIKE and WHERE (its docs: `SHOW JOBS WHERE name = '...'`)."""
    engine, _ = world
    run(engine, "CREATE DATABASE proj1")
    run(engine, "CREATE DATABASE proj2")
    created = engine.sql.execute("CREATE JOB j1 (SELECT 1; SELECT 2)", {"db": "proj1"})
    assert not isinstance(created, ErrorResult)
    run(engine, "CREATE JOB proj2.j2 (SELECT * FROM src.t) START NOW EVERY hour")
    run(engine, "CREATE JOB proj2.j3 (SELECT 1) EVERY day")
    mine = engine.sql.execute("SELECT * FROM jobs", {"db": "proj1"}).to_pandas()
    assert list(mine.columns) == SHOW_JOBS and mine["NAME"].tolist() == ["j1"]
    assert mine["START_AT"].notna().all() and mine["NEXT_RUN_AT"].notna().all()
    assert mine["SCHEDULE_STR"].isna().all()
    theirs = frame(engine, "SELECT * FROM proj2.jobs WHERE name = 'j2'")
    assert theirs["NAME"].tolist() == ["j2"] and theirs["SCHEDULE_STR"].tolist() == ["every hour"]
    assert frame(engine, "SHOW JOBS FROM proj2")["NAME"].tolist() == ["j2", "j3"]
    assert frame(engine, "SHOW JOBS FROM proj2 LIKE '%3'")["NAME"].tolist() == ["j3"]
    assert frame(engine, "SHOW JOBS FROM proj2 WHERE schedule_str = 'every hour'")["NAME"].tolist() == ["j2"]
    shown = engine.sql.execute("SHOW JOBS WHERE name = 'j1'", {"db": "proj1"}).to_pandas()
    assert list(shown.columns) == SHOW_JOBS and shown["NAME"].tolist() == ["j1"]
    assert "nowhere" in engine.sql.execute("SHOW JOBS FROM nowhere", {}).error_message


def test_create_job_refusals_name_the_problem(world) -> None:
    engine, _ = world
    for text, said in [
        ("CREATE JOB bad (SELECT * FROM src.t) EVERY fortnight", "EVERY"),
        ("CREATE JOB bad (SELECT * FROM src.t) START '2030-02-01' END '2030-01-01' EVERY day", "END"),
        ("CREATE JOB bad (SELECT * FROM src.t) START 'tomorrow'", "date"),
        ("CREATE JOB bad (SELECT * FROM src.t WHERE id < LAST) EVERY day", None),
    ]:
        result = engine.sql.execute(text, {})
        if said is None:  # stored; its run fails with the reason, one line
            assert not isinstance(result, ErrorResult)
        else:
            assert isinstance(result, ErrorResult) and said in result.error_message, (text, result)
    engine.jobs.run_due(utcnow() + timedelta(seconds=1))
    error = frame(engine, "SELECT error FROM log.jobs_history")["error"].iloc[0]
    assert "LAST" in error and "\n" not in error
    run(engine, "CREATE JOB IF NOT EXISTS bad (SELECT 1)")  # exists: no error, unchanged
    # jobs.mdx's examples 1 and 3 and its conditional job: a statement the engine refuses
    # (RETRAIN, DROP MODEL, FINETUNE) was stored, then failed at every run
    for text, what in [
        ("CREATE JOB retrain (RETRAIN mindsdb.m USING join_learn_process = true; SELECT 1) EVERY 2 days",
         "ML models (RETRAIN), in the job's statements"),
        ("CREATE JOB drop_model (DROP MODEL mindsdb.m) START '2023-04-01'",
         "ML models (DROP MODEL), in the job's statements"),
        ("CREATE JOB cond (SELECT 1) EVERY 1 min IF (SHOW MODELS)", "ML models (SHOW MODELS), in the "
         "job's IF statements")]:
        message = engine.sql.execute(text, {}).error_message
        assert message == f"not supported by the local engine: {what}", message
    assert frame(engine, "SELECT NAME AS n FROM information_schema.jobs")["n"].tolist() == ["bad"]
    assert "already exists" in engine.sql.execute("CREATE JOB bad (SELECT 1)", {}).error_message


def test_a_schedule_past_the_calendar_never_holds_the_due_runs(world) -> None:
    """A period beyond any calendar is refused when the job is made; a next run past year
    9999 ends the job after this run. Before, such a job failed before its run was claimed,
    at every poll, and stayed due: no history row, and its creator's other jobs never ran."""
    engine, _ = world
    for every in ("99999999999999999999 minute", "9999999 weeks", "200000 months"):
        result = engine.sql.execute(f"CREATE JOB huge (SELECT 1) EVERY {every}", {})
        assert isinstance(result, ErrorResult) and "at most 100 years" in result.error_message, result
    run(engine, "CREATE JOB last_one (SELECT 1) START '9999-12-31 23:59:00' EVERY hour")
    run(engine, "CREATE JOB other (SELECT 2) START '9999-12-31 23:59:00'")
    assert engine.jobs.run_due(datetime(9999, 12, 31, 23, 59, 30)) == 2
    runs = frame(engine, "SELECT name, error FROM log.jobs_history ORDER BY name")
    assert list(runs["name"]) == ["last_one", "other"] and runs["error"].isna().all(), runs
    assert frame(engine, "SELECT count(*) AS n FROM information_schema.jobs")["n"][0] == 0


def test_missed_periods_are_caught_up_with_one_run(world) -> None:
    """A job whose periods passed while nothing ran runs once, then a period later; its
    next run was set to the moment of the late run, so it was due again and ran twice."""
    engine, _ = world
    run(engine, "CREATE JOB hourly (SELECT 1) START '2030-01-01 00:00:00' EVERY hour")
    assert engine.jobs.run_due(datetime(2030, 1, 1, 5, 30)) == 1
    assert engine.jobs.run_due(datetime(2030, 1, 1, 5, 30, 1)) == 0
    assert engine.jobs.run_due(datetime(2030, 1, 1, 6, 29)) == 0
    assert engine.jobs.run_due(datetime(2030, 1, 1, 6, 31)) == 1
    assert frame(engine, "SELECT count(*) AS n FROM log.jobs_history")["n"][0] == 2


def test_the_history_keeps_the_newest_runs_and_each_jobs_last(tmp_path) -> None:
    """log.jobs_history keeps the newest `jobs_history_rows` runs (each holds its statements'
    text: a job every minute grew the catalog without end), and always each job's last run,
    which gives its next run {{PREVIOUS_START_DATETIME}}."""
    (tmp_path / "config.json").write_text('{"jobs_history_rows": 3, "jobs_poll_s": 0}')
    with Engine(tmp_path) as engine:
        run(engine, "CREATE JOB rare (SELECT 1) START '2030-01-01 00:00:00' EVERY week")
        run(engine, "CREATE JOB often (SELECT 2) START '2030-01-01 00:00:00' EVERY hour")
        for hour in range(8):
            engine.jobs.run_due(datetime(2030, 1, 1, hour, 1))
        runs = frame(engine, "SELECT name, run_start FROM log.jobs_history ORDER BY run_start")
        assert list(runs["name"]) == ["rare", "often", "often", "often"], runs  # rare: its last
        run(engine, f"CREATE JOB wordy (SELECT '{'x' * 100_000}' AS x) START '2030-01-01 00:00:00'")
        engine.jobs.run_due(datetime(2030, 1, 1, 9, 0))
        kept = frame(engine, "SELECT query FROM log.jobs_history WHERE name = 'wordy'")["query"][0]
        assert len(kept) < 5000 and kept.endswith("more characters]"), len(kept)


def test_an_engine_without_jobs_starts_no_thread(tmp_path) -> None:
    engine = Engine(tmp_path / "data")
    try:
        run(engine, "SELECT 1")
        assert engine._jobs is None  # no job: no scheduler, no thread
        run(engine, "CREATE JOB later (SELECT 1) START '2031-01-01'")
        thread = engine.jobs._thread  # started by CREATE JOB
        assert thread is not None and thread.is_alive()
    finally:
        engine.close()
    assert not thread.is_alive()  # stopped by close()
    reopened = Engine(tmp_path / "data")  # a job in the catalog: started on open
    try:
        assert reopened.jobs.started
    finally:
        reopened.close()


# served: a `kbsql serve` with short periods, driven from a notebook ------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `kbsql serve` for this file's served tests, every period shrunk (FAST)."""
    with spawn(tmp_path_factory.mktemp("served"), env=FAST) as proc:
        yield proc


def wait_for(check: Callable[[], Any], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_one_users_long_jobs_never_hold_another_users_due_run(tmp_path: Path) -> None:
    """Two job workers (the default): a token's two jobs each wait 6 s on a slow model; a job
    another user (ann's login) creates meanwhile runs at once, not after both (issue 39: one
    thread ran every due run in turn), and the token's second run waits for its first (its
    share is one of the two workers)."""
    provider = FakeProvider()
    token = "tok-jobs"
    args = ("--token", token, "--user", "ann", "--password", "pw-ann",
            "--allow-model-host", provider.url.split("//", 1)[1])
    try:
        with spawn(tmp_path / "d", env=FAST, args=args) as srv:
            session = httpx.post(f"{srv.url}/api/login", json={"username": "ann", "password": "pw-ann"},
                                 timeout=30).json()["token"]

            def sql(credential: str, text: str) -> Any:
                answer = httpx.post(f"{srv.url}/api/sql/query", json={"query": text}, timeout=60,
                                    headers={"Authorization": f"Bearer {credential}"}).json()
                assert answer["type"] != "error", (text, answer)
                return answer

            def ended() -> dict[str, tuple[str, str]]:
                rows = sql(token, "SELECT name, run_start, run_end FROM log.jobs_history")["data"]
                return {name: (start, end) for name, start, end in rows if end}

            sql(token, "CREATE KNOWLEDGE_BASE slow_kb USING embedding_model = {'provider': 'openai', "
                       f"'model_name': 'emb-1', 'base_url': '{provider.url}/v1', 'api_key': 'k'}}")
            sql(token, "INSERT INTO slow_kb (id, content) VALUES (1, 'refunds take five days')")
            provider.delay = 6.0  # every search's embedding call from now on
            for name in ("slow1", "slow2"):
                sql(token, f"CREATE JOB {name} (SELECT id FROM slow_kb WHERE content = 'refund')")
            assert wait_for(lambda: provider.active >= 1, timeout=10)
            created = time.monotonic()
            sql(session, "CREATE JOB quick (SELECT 1)")
            assert wait_for(lambda: "quick" in ended(), timeout=15), ended()
            assert time.monotonic() - created < 3  # while the token's first run still waits
            assert not {"slow1", "slow2"} & set(ended()) and provider.active == 1
            runs = wait_for(lambda: len(ended()) == 3 and ended(), timeout=40)
            assert runs, ended()
            first, second = sorted([runs["slow1"], runs["slow2"]])
            assert second[0] >= first[1] and provider.max_active == 1  # one at a time: its share
    finally:
        provider.delay = 0.0
        provider.close()


@pytest.fixture
def cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> Iterator[Cells]:
    """IPython's test shell with `%load_ext kbsql` on an embedded engine in a temp dir."""
    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    shell = global_shell()
    shell.config.pop("KbSql", None)
    shell.extension_manager.load_extension("kbsql")
    yield Cells(shell, capsys)
    shell.extension_manager.unload_extension("kbsql")
    shell.config.pop("KbSql", None)


def test_a_job_created_from_a_notebook_on_a_server_keeps_its_knowledge_base_fresh(
        server, cells, tmp_path) -> None:
    path = tmp_path / "served.sqlite"
    source(path, range(1, 4))
    cells.ok(f"%kbsql_connect {server.url} --alias served")
    cells.ok(f"%kbsql CREATE DATABASE notes WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': '{path}'}}")
    cells.ok(f"%kbsql CREATE KNOWLEDGE_BASE fresh USING embedding_model = {HASH}, "
             "content_columns = ['body'], id_column = 'id'")
    cells.ok("%%kbsql\nCREATE JOB keep_fresh (\n  INSERT INTO fresh SELECT id, body FROM notes.t\n"
             "  WHERE id > COALESCE(LAST, 0)\n) EVERY minute")
    client = kbsql.connect(server.url)
    try:
        def synced(n: int) -> Callable[[], bool]:
            return lambda: sorted(int(i) for i in client.query("SELECT id FROM fresh")["id"]) == \
                list(range(1, n + 1))

        assert wait_for(synced(3)), client.query("SELECT * FROM log.jobs_history")
        add(path, range(4, 7))
        assert wait_for(synced(6)), client.query("SELECT * FROM log.jobs_history")
        jobs = cells.ok("%kbsql SHOW JOBS")
        assert isinstance(jobs, pd.DataFrame) and list(jobs.columns) == SHOW_JOBS
        assert jobs["NAME"].tolist() == ["keep_fresh"] and jobs["SCHEDULE_STR"].iloc[0] == "every minute"
        history = cells.ok("%kbsql SELECT * FROM log.jobs_history WHERE name = 'keep_fresh'")
        assert isinstance(history, pd.DataFrame) and list(history.columns) == HISTORY
        assert len(history) >= 2 and history["error"].isna().all()
        cells.ok("%kbsql DROP JOB keep_fresh")
        time.sleep(0.5)  # a run claimed before the drop ends
        runs = len(client.query("SELECT * FROM log.jobs_history WHERE name = 'keep_fresh'"))
        add(path, range(7, 8))
        time.sleep(1)  # three periods: a job still there would have run
        assert len(client.query("SELECT * FROM log.jobs_history WHERE name = 'keep_fresh'")) == runs
        assert not synced(7)()
    finally:
        client.close()
        cells.ok("%kbsql_connect --close served")


def test_create_job_in_an_embedded_notebook(cells) -> None:
    cells.ok("%%kbsql\nCREATE JOB nightly (SELECT 1) START '2031-01-01' EVERY day")
    jobs = cells.ok("%kbsql SELECT * FROM mindsdb.jobs")
    assert isinstance(jobs, pd.DataFrame) and jobs["NAME"].tolist() == ["nightly"]
    assert jobs["NEXT_RUN_AT"].iloc[0].startswith("2031-01-01")
    cells.ok("%kbsql DROP JOB nightly")
    assert cells.ok("%kbsql SHOW JOBS").empty


# PostgreSQL: several servers on one catalog -------------------------------------------------

PG_ENV = "KBSQL_TEST_POSTGRES_DSN"


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh database on the server at KBSQL_TEST_POSTGRES_DSN (dropped afterwards)."""
    dsn = os.environ.get(PG_ENV)
    if not dsn:
        pytest.skip(f"no postgres server: set {PG_ENV} to run this test")
    import psycopg

    name = f"kbsql_jobs_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    head, _, _ = dsn.rpartition("/")
    yield f"{head}/{name}"
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_catalog_migrated_by_the_previous_version_upgrades(pg_database, monkeypatch, tmp_path) -> None:
    """A database at schema version 4 (views: the version before jobs) gains the job tables."""
    import psycopg
    from psycopg.rows import dict_row

    from kbsql.engine.postgres import catalog_pg

    monkeypatch.setattr(catalog_pg, "MIGRATIONS", catalog_pg.MIGRATIONS[:4])
    with psycopg.connect(pg_database, autocommit=True, row_factory=dict_row) as db:
        assert catalog_pg.migrate(db) == 4
    monkeypatch.undo()
    engine = Engine(tmp_path / "data", catalog_url=pg_database, settings={"jobs_poll_s": 0})
    try:
        run(engine, "CREATE JOB later (SELECT 1) START '2031-01-01'")
        assert frame(engine, "SHOW JOBS")["NAME"].tolist() == ["later"]
    finally:
        engine.close()
    with psycopg.connect(pg_database) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM kbsql.schema_version ORDER BY version")]
    assert versions == [1, 2, 3, 4, 5]


def _pg_source(url: str) -> str:
    """Tables `t` (the growing one) and `synced` (the job's target, whose trigger makes each
    inserted row take 0.3 s, so a run lasts long enough to be killed in the middle)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE TABLE t (id int, body text); CREATE TABLE synced (id int, body text);"
                   "CREATE FUNCTION slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(0.3); "
                   "RETURN NEW; END $$ LANGUAGE plpgsql;"
                   "CREATE TRIGGER slow BEFORE INSERT ON synced FOR EACH ROW EXECUTE FUNCTION slow()")
    u = urlparse(url)
    return (f"CREATE DATABASE pgsrc WITH ENGINE = 'postgres', PARAMETERS = {{'host': '{u.hostname}', "
            f"'port': {u.port or 5432}, 'user': '{u.username}', 'password': '{u.password}', "
            f"'database': '{u.path.lstrip('/')}'}}")


def test_three_servers_one_killed_mid_run_each_run_once_nothing_twice(pg_database, tmp_path) -> None:
    import psycopg

    create_source = _pg_source(pg_database)
    env = {**FAST, "KBSQL_CATALOG_URL": pg_database, "KBSQL_JOBS_TIME_SCALE": "0.02"}  # a minute: 1.2 s
    servers = [spawn(tmp_path / f"server{i}", env=env) for i in range(3)]
    db = psycopg.connect(pg_database, autocommit=True)

    def rows(query: str) -> list[tuple[Any, ...]]:
        return db.execute(query).fetchall()

    def synced_ids() -> list[int]:
        return sorted(r[0] for r in rows("SELECT id FROM synced"))

    def add_rows(numbers: range) -> None:
        db.execute("INSERT INTO t SELECT g, 'row ' || g FROM generate_series(%s::int, %s::int) g",
                   (numbers.start, numbers.stop - 1))

    try:
        client = kbsql.connect(servers[0].url)
        client.sql(create_source)
        add_rows(range(1, 5))
        client.sql("CREATE JOB pgsync (INSERT INTO pgsrc.synced SELECT id, body FROM pgsrc.t "
                   "WHERE id > COALESCE(LAST, 0)) EVERY minute")
        client.close()
        assert wait_for(lambda: synced_ids() == [1, 2, 3, 4]), rows("SELECT * FROM kbsql.jobs_history")
        add_rows(range(5, 15))  # ten rows: a run of ~3 s
        by_pid = {s.process.pid: s for s in servers}
        # a run inserting (its rows' trigger sleeping) is the one run in flight: runs never overlap
        assert wait_for(lambda: rows("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND wait_event = 'PgSleep'"))
        running = rows("SELECT id, owner FROM kbsql.jobs_history WHERE run_end IS NULL")
        assert len(running) == 1, rows("SELECT * FROM kbsql.jobs_history")
        killed_run, owner = running[0]
        victim = by_pid[int(owner.split(":")[1])]
        time.sleep(0.4)  # a row or two into its insert
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        assert synced_ids() == [1, 2, 3, 4]  # its half-done insert is not there
        # another server records the killed run as failed and runs it again over the same rows
        assert wait_for(lambda: synced_ids() == list(range(1, 15))), rows("SELECT * FROM kbsql.jobs_history")
        assert rows(f"SELECT error FROM kbsql.jobs_history WHERE id = {killed_run}") == [(STOPPED,)]
        add_rows(range(15, 17))
        assert wait_for(lambda: synced_ids() == list(range(1, 17)))
        history = rows("SELECT due_at, run_start, run_end, error, owner FROM kbsql.jobs_history ORDER BY id")
        dues = [h[0] for h in history]
        assert len(dues) == len(set(dues))  # each due run once
        assert len({h[4] for h in history}) >= 2  # the runs went to more than one server
        for before, after in itertools.pairwise(history):
            assert before[2] <= after[1]  # runs of one job never overlap
        assert [h[3] for h in history].count(STOPPED) == 1
    finally:
        db.close()
        for server in servers:
            server.stop()


def test_jobs_run_refuses_a_folder_that_is_no_data_directory(tmp_path, capsys):
    """`kbsql jobs run --data-dir` with a mistyped path made an empty data directory there and
    printed "0 run(s)": from cron, a quiet hour forever. It now says so in one line, exit 2,
    and makes nothing; a real data directory runs as before."""
    from kbsql.cli import main

    typo = tmp_path / "kbsq1"
    assert main(["jobs", "run", "--data-dir", str(typo)]) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1 and "not a kbsql data directory" in said.err
    assert not typo.exists()
    Engine(tmp_path / "real").close()
    assert main(["jobs", "run", "--data-dir", str(tmp_path / "real")]) == 0
    assert capsys.readouterr().out == "kbsql jobs run: 0 run(s)\n"
