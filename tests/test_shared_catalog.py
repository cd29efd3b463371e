"""Several kbsql servers sharing one PostgreSQL catalog (`--catalog` / KBSQL_CATALOG_URL).

Real components: a PostgreSQL 16 + pgvector (the `pgvector_dsn` fixture, a fresh database
per test) and real `kbsql serve` processes on loopback, each with its own data directory.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pandas as pd
import psycopg
import pytest

import kbsql
from kbsql.engine import Engine
from kbsql.engine.catalog import Catalog
from kbsql.engine.postgres.catalog_pg import MIGRATIONS
from kbsql.engine.settings_table import SettingError
from kbsql.interface import NotFound, ServiceError, SqlError
from kbsql.server.process import spawn

HASH_MODEL = {"provider": "kbsql", "model_name": "hash-64"}


@pytest.fixture
def two_servers(tmp_path, pgvector_dsn):
    # the second server's operator made data sources read-only (nothing else differs)
    servers = [spawn(tmp_path / f"server{i}", env={"KBSQL_CATALOG_URL": pgvector_dsn},
                     args=("--read-only-sources",) if i == 2 else ()) for i in (1, 2)]
    yield servers
    for server in servers:
        server.stop()


def test_create_through_one_server_serve_through_the_other(two_servers, pgvector_dsn, tmp_path):
    one, two = (kbsql.connect(s.url) for s in two_servers)
    try:
        one.knowledge_bases.create("docs", embedding_model=HASH_MODEL, metadata_columns=["product"])
        one.knowledge_bases.insert("docs", [
            {"id": 1, "content": "Refunds take five days to reach your card.", "product": "shop"},
            {"id": 2, "content": "Refunds of gift cards are not possible.", "product": "gifts"},
            {"id": 3, "content": "Shipping takes two days.", "product": "shop"}])
        one.agents.create("helper", data={"knowledge_bases": ["mindsdb.docs"]})
        one.register("sales", pd.DataFrame({"region": ["n", "s", "n"], "amount": [1, 2, 3]}))

        kb = two.knowledge_bases.get("docs")
        assert kb.to_json()["vector_database"] == "kbsql_pgvector"  # the default on a shared catalog
        found = two.sql("SELECT id, metadata FROM docs WHERE content = 'refund' AND product = 'shop' "
                        "LIMIT 5").to_pandas()
        assert list(found["id"]) == ["1", "3"]
        answer = two.agents.completion("helper", "How long do refunds take?")
        assert "five days" in str(answer)
        totals = two.query("SELECT region, sum(amount) AS total FROM df.sales GROUP BY region "
                           "ORDER BY region")
        assert totals["total"].tolist() == [4, 2]
        # a row inserted through the second is found through the first
        two.knowledge_bases.insert("docs", [{"id": 4, "content": "Refunds by bank transfer",
                                             "product": "bank"}])
        assert list(one.sql("SELECT id FROM docs WHERE product = 'bank'").to_pandas()["id"]) == ["4"]
        # nothing of it lives on either server's disk
        for i in (1, 2):
            assert not (tmp_path / f"server{i}" / "catalog.sqlite").exists()
            assert not list((tmp_path / f"server{i}").glob("knowledge_bases/*/chunks.sqlite"))
        _views_and_writes_across_servers(one, two, tmp_path)
        # and a drop through one is seen by the other
        one.knowledge_bases.delete("docs")
        with pytest.raises(NotFound):
            two.knowledge_bases.get("docs")
    finally:
        one.close()
        two.close()


def _views_and_writes_across_servers(one: kbsql.Client, two: kbsql.Client, tmp_path) -> None:
    """A view made through one server (a search joined with a table) is read through the
    other; a write to a data source is refused in one line by the read-only server and done
    by the other, whose rows the view then reads; a view dropped through one is gone."""
    path = tmp_path / "notes.sqlite"
    with sqlite3.connect(path) as lite:
        lite.executescript("CREATE TABLE notes (doc TEXT, note TEXT); "
                           "INSERT INTO notes VALUES ('1', 'card'), ('3', 'ship');")
    one.sql(f"CREATE DATABASE notes_src WITH ENGINE = 'sqlite', PARAMETERS = {{'db_file': '{path}'}}")
    one.sql("CREATE VIEW mindsdb.refund_notes AS (SELECT k.id, n.note FROM docs AS k JOIN notes_src.notes "
            "AS n ON k.id = n.doc WHERE k.content = 'refund')")
    assert two.query("SELECT id, note FROM refund_notes ORDER BY id").values.tolist() == [["1", "card"],
                                                                                           ["3", "ship"]]
    assert ["refund_notes"] == [r[0] for r in two.sql("SHOW VIEWS").to_pandas().values]
    with pytest.raises(SqlError) as refused:
        two.sql("INSERT INTO notes_src.notes (doc, note) VALUES ('2', 'gift')")
    assert "--read-only-sources" in str(refused.value) and "\n" not in str(refused.value)
    assert one.sql("INSERT INTO notes_src.notes (doc, note) VALUES ('2', 'gift')").affected_rows == 1
    assert two.query("SELECT note FROM refund_notes ORDER BY id")["note"].tolist() == ["card", "gift", "ship"]
    two.sql("DROP VIEW refund_notes")
    with pytest.raises(SqlError):
        one.sql("SELECT * FROM refund_notes")
    one.sql("DROP DATABASE notes_src")


INSERTER = textwrap.dedent("""
    import sys, kbsql
    client = kbsql.connect(sys.argv[1])
    batch = 0
    while True:
        rows = [{"id": f"{batch}-{i}", "content": f"batch {batch} row {i} " + "words " * 40,
                 "batch": batch} for i in range(int(sys.argv[2]))]
        client.knowledge_bases.insert("kb", rows)
        print(f"acked {batch}", flush=True)
        batch += 1
""")


def test_kill_9_mid_inserts_keeps_every_acknowledged_insert_whole(two_servers):
    victim, survivor = two_servers
    rows_per_insert = 40
    with kbsql.connect(survivor.url) as client:
        client.knowledge_bases.create("kb", embedding_model=HASH_MODEL, metadata_columns=["batch"])
        child = subprocess.Popen([sys.executable, "-c", INSERTER, victim.url, str(rows_per_insert)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        acked: list[int] = []
        reader = threading.Thread(target=lambda: acked.extend(
            int(line.split()[1]) for line in child.stdout if line.startswith("acked")), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while len(acked) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(random.uniform(0.0, 0.3))  # land the kill somewhere inside an insert
        victim.process.kill()  # SIGKILL: no cleanup of any kind
        victim.process.wait()
        child.wait(timeout=30)
        reader.join(timeout=10)
        assert len(acked) >= 3
        frame = client.sql("SELECT id, metadata FROM kb").to_pandas()
        per_batch = pd.Series([m["batch"] for m in frame["metadata"]]).value_counts().to_dict()
        for batch in acked:  # every acknowledged insert is there, whole
            assert per_batch.get(batch) == rows_per_insert, (batch, per_batch)
        for batch, count in per_batch.items():  # and no statement is there in part
            assert count == rows_per_insert, (batch, count)
        # the survivor still serves searches and writes
        client.knowledge_bases.insert("kb", [{"id": "after", "content": "after the crash", "batch": -1}])
        hits = client.sql("SELECT id FROM kb WHERE content = 'after the crash' LIMIT 1").to_pandas()
        assert list(hits["id"]) == ["after"]


def test_concurrent_first_starts_migrate_once(pgvector_dsn):
    errors: list[BaseException] = []
    catalogs: list[Catalog] = []

    def start() -> None:
        try:
            catalogs.append(Catalog(pgvector_dsn))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with psycopg.connect(pgvector_dsn) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM kbsql.schema_version ORDER BY version")]
        projects = db.execute("SELECT name FROM kbsql.projects").fetchall()
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    assert projects == [("mindsdb",)]  # the default project made once
    for c in catalogs:
        c.close()


def test_embedded_engine_on_a_shared_catalog_and_its_errors(tmp_path, pgvector_dsn):
    with Engine(tmp_path / "a", catalog_url=pgvector_dsn) as a, \
            Engine(tmp_path / "b", catalog_url=pgvector_dsn) as b:
        a.query("CREATE PROJECT team")
        assert {p["name"] for p in b.list_projects()} == {"mindsdb", "team"}
        # names stay case-insensitive, as with SQLite
        assert b.query("CREATE PROJECT TEAM").type == "error"
        # a local-disk store would be visible to one server only: refused with the reason
        error = a.query("CREATE KNOWLEDGE_BASE kb USING storage = kbsql_faiss.kb, "
                        f"embedding_model = {json.dumps(HASH_MODEL)}")
        assert error.type == "error" and "shares its catalog" in error.error_message
    bad = "postgresql://postgres:wrong-pw@127.0.0.1:1/nothing"
    with pytest.raises(ServiceError) as exc:
        Engine(tmp_path / "c", catalog_url=bad)
    assert "Cannot connect to the catalog at postgresql://postgres:******@127.0.0.1:1/nothing" \
        in str(exc.value)
    assert "wrong-pw" not in str(exc.value)


def test_serve_with_an_unreachable_catalog_stops_with_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--port", "0", "--data-dir",
                          str(tmp_path / "d"), "--catalog", "postgresql://kb:s3cret-pw@127.0.0.1:1/kb"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "Cannot connect to the catalog at postgresql://kb:******@127.0.0.1:1/kb" in lines[0]
    assert "s3cret-pw" not in run.stderr + run.stdout


def test_a_catalog_that_is_no_postgresql_url_is_refused_not_made_a_local_file(tmp_path):
    """`--catalog 'host=... password=...'` (libpq's key=value form): it used to be taken for a
    SQLite path, so the server started on a new local catalog file named after the string,
    password and all, in its working directory, not on the shared catalog the operator named
    (audit51). Now it stops with one line, the password nowhere, no file made."""
    dsn = "host=127.0.0.1 port=1 user=kb password=kv-s3cret-55 dbname=kb"
    for how in (["--catalog", dsn], []):
        run = subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--port", "0", "--data-dir",
                              str(tmp_path / "d"), *how], capture_output=True, text=True, timeout=60,
                             cwd=tmp_path, env={**os.environ, "KBSQL_CATALOG_URL": dsn})
        shown = run.stdout + run.stderr
        assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1, shown
        assert "must be a postgresql:// URL" in shown and "kv-s3cret" not in shown, shown
        assert [p.name for p in tmp_path.iterdir() if p.name != "d"] == [], list(tmp_path.iterdir())
    with pytest.raises(SettingError, match="must be a postgresql:// URL"):
        Engine(tmp_path / "e", catalog_url=dsn)


def test_serve_and_migrate_never_print_a_urls_password(tmp_path):
    """Passwords with '@', '/' or ':' unencoded or a raw newline, and a URI libpq cannot parse
    (its error echoes the URI): not one character of the password in any output (issue 39)."""
    import kbsql

    with kbsql.connect(data_dir=tmp_path / "home") as client:
        client.sql("CREATE PROJECT moved")
    password = "pa@ss/w:rd-77"
    parts = ("pa@ss", "ss/w", "w:rd", "rd-77")
    urls = [(f"postgresql://kb:{password}@127.0.0.1:1/kb", parts),
            (f"postgresql://kb:{password}@[::1/kb", parts),  # unparsable: libpq quotes it back
            ("postgresql://kb:nlx7\npass-88@127.0.0.1:1/kb", ("nlx7", "pass-88"))]  # a raw newline
    for url, parts in urls:
        for command in (["serve", "--port", "0", "--data-dir", str(tmp_path / "d"), "--catalog", url],
                        ["migrate", "--data-dir", str(tmp_path / "home"), "--to", url]):
            run = subprocess.run([sys.executable, "-m", "kbsql.cli", *command],
                                 capture_output=True, text=True, timeout=60)
            shown = run.stdout + run.stderr
            assert run.returncode == 1 and "******@" in shown, shown
            for part in parts:
                assert part not in shown, shown


def test_files_queries_and_agent_params_are_shared_by_every_engine(tmp_path, pgvector_dsn):
    """Issue 23 on a shared catalog: an uploaded file (`files.<name>`), the queries of
    information_schema.queries (server-wide) and an agent's params, made through one
    engine, are seen through another."""
    from tests.files import makers

    with Engine(tmp_path / "a", catalog_url=pgvector_dsn) as a, \
            Engine(tmp_path / "b", catalog_url=pgvector_dsn) as b:
        a.upload_file("orders", makers.csv_bytes(), "orders.csv")
        assert b.query("SELECT count(*) FROM files.orders").to_json()["data"] == [[3]]
        assert [f["name"] for f in b.list_files()] == ["orders"]
        a.query(f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {json.dumps(HASH_MODEL)}, "
                "content_columns = ['notes'], id_column = 'order_id'")
        started = a.query("INSERT INTO kb SELECT order_id, notes FROM files.orders USING batch_size = 2")
        query_id = started.to_json()["data"][0][0]
        deadline = time.monotonic() + 30
        while True:
            row = b.query(f"SELECT FINISHED_AT, PROCESSED_ROWS FROM information_schema.queries "
                          f"WHERE ID = {query_id}").to_json()["data"]
            if row and row[0][0] is not None:
                break
            assert time.monotonic() < deadline, row
            time.sleep(0.05)
        assert row[0][1] == 3 and b.query("SELECT count(*) FROM kb").to_json()["data"] == [[3]]
        a.create_agent("mindsdb", {"name": "timed", "params": {"timeout": 12}})
        assert b.get_agent("mindsdb", "timed").params == {"timeout": 12}
        b.delete_file("orders")
        assert a.list_files() == []


def test_frames_read_from_a_shared_catalog_are_kept_within_a_bound(tmp_path, pgvector_dsn, monkeypatch):
    """Every frame a server read from PostgreSQL stayed in its memory for good (in the
    store's cache and on every pooled cursor that read it); now the least recently read go
    first past `frame_store_pg.CACHE_BYTES` and `duck.SLOT_MAX_BYTES`, and every frame still
    answers."""
    import pandas as pd
    import pyarrow as pa

    from kbsql.engine.postgres import frame_store_pg
    from kbsql.engine.sql.tables import duck

    monkeypatch.setattr(frame_store_pg, "CACHE_BYTES", 3 * 1024 * 1024, raising=False)
    monkeypatch.setattr(duck, "SLOT_MAX_BYTES", 2 * 1024 * 1024, raising=False)
    with Engine(tmp_path / "a", catalog_url=pgvector_dsn) as a:
        for i in range(6):  # 1.4 MB each as Arrow
            a.register_dataframe(f"wide{i}", pd.DataFrame({"txt": ["x" * 20] * 50_000}))
        base = pa.total_allocated_bytes()
        for _ in range(2):
            for i in range(6):
                assert a.query(f"SELECT count(*) FROM df.wide{i}").to_json()["data"] == [[50_000]]
        assert a.sql.frames._versions and sum(t.nbytes for _, t in a.sql.frames._versions.values()) \
            <= frame_store_pg.CACHE_BYTES
        assert pa.total_allocated_bytes() - base < 5.5 * 1024 * 1024  # all six: 8.4 MB
