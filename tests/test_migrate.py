"""`kbsql migrate --to postgresql://...`: a local data directory moved to a shared catalog
and served from there as it was served locally (a real PostgreSQL + pgvector, the real CLI,
a real `kbsql serve` afterwards)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import psycopg

import kbsql
from kbsql.engine import Engine
from kbsql.server.process import spawn

HASH_MODEL = {"provider": "kbsql", "model_name": "hash-64"}
QUERIES = ["refund policy for cards", "shipping to islands", "warranty repair"]


def cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbsql.cli", "migrate", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "KBSQL_CATALOG_URL": url})


def dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


def searches(client: kbsql.Client) -> list[tuple[list[float], set[str]]]:
    """Per query: the relevance of each row in order, and the ids above the last one's
    relevance (rows tied at the cut may come in any order)."""
    out = []
    for q in QUERIES:
        frame = client.sql(f"SELECT id, relevance FROM docs WHERE content = '{q}' AND grp < 5 "
                           "LIMIT 8").to_pandas()
        relevance = [round(r, 4) for r in frame["relevance"]]
        out.append((relevance, {i for i, r in zip(frame["id"], relevance, strict=True) if r > relevance[-1]}))
    return out


def test_migrate_round_trip(tmp_path, pgvector_dsn):
    local = tmp_path / "local"
    words = "refund card shipping island warranty repair invoice parcel delay bank".split()
    rows = [{"id": i, "content": f"document {i}: " + " ".join(words[(i * k) % 10] for k in range(1, 9)),
             "grp": i % 10, "day": f"2024-01-{1 + i % 28:02d}"} for i in range(400)]
    url = urlparse(pgvector_dsn)
    vdb = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"), "user": url.username,
           "password": url.password}
    with Engine(local) as eng:
        eng.query("CREATE PROJECT team")
        eng.query(f"CREATE DATABASE vdb WITH ENGINE = 'pgvector', PARAMETERS = {json.dumps(vdb)}")
        eng.create_knowledge_base("mindsdb", {"name": "docs", "embedding_model": HASH_MODEL,
                                              "metadata_columns": ["grp", "day"]})
        docs = eng.catalog.knowledge_base("mindsdb", "docs")
        eng.insert_rows(docs, rows[:250])
        eng.insert_rows(docs, rows[250:])  # a second insert: another updated_at
        eng.insert_rows(docs, [{"id": 7, "content": "replaced: refund card", "grp": 7, "day": "2024-02-01"}])
        eng.create_knowledge_base("team", {"name": "notes", "embedding_model": HASH_MODEL})
        eng.insert_rows(eng.catalog.knowledge_base("team", "notes"),
                        [{"id": "n1", "content": "a long note " * 400}])  # several chunks
        eng.create_knowledge_base("mindsdb", {"name": "remote", "embedding_model": HASH_MODEL,
                                              "storage": {"database": "vdb", "table": "remote_chunks"}})
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "remote"), rows[:20])
        eng.create_agent("mindsdb", {"name": "helper", "data": {"knowledge_bases": ["mindsdb.docs"]}})
        eng.register_dataframe("sales", pd.DataFrame({"region": ["n", "s", "n"], "amount": [1, 2, 3]}))
        eng.upload_file("prices", b"item,price\ncard,3\nparcel,5\n", "prices.csv")  # files.prices
        eng.query("CREATE VIEW team.cheap AS (SELECT item FROM files.prices WHERE price < 4)")
        notes_chunks = len(eng.query("SELECT chunk_id FROM team.notes").to_json()["data"])
    with kbsql.connect(data_dir=local) as before:
        expected = searches(before)
        kbs_before = {(k.name, k.created_at) for k in before.knowledge_bases.list()}
    source_before = dump(local / "catalog.sqlite")

    run = cli("--data-dir", str(local), url=pgvector_dsn)
    assert run.returncode == 0, run.stderr + run.stdout
    assert "verify: ok" in run.stdout and "400 chunks -> table kb_mindsdb_docs" in run.stdout
    assert url.password not in run.stdout + run.stderr
    assert dump(local / "catalog.sqlite") == source_before  # the source is only read

    server = spawn(tmp_path / "server", env={"KBSQL_CATALOG_URL": pgvector_dsn})
    try:
        with kbsql.connect(server.url) as after:
            assert {(k.name, k.created_at) for k in after.knowledge_bases.list()} == kbs_before
            assert after.knowledge_bases.get("docs").to_json()["vector_database"] == "kbsql_pgvector"
            assert after.knowledge_bases.get("remote").to_json()["vector_database"] == "vdb"
            assert searches(after) == expected  # same relevance, same rows
            assert len(after.sql("SELECT id FROM docs").to_pandas()) == 400
            replaced = after.sql("SELECT chunk_content, metadata FROM docs WHERE id = '7'").to_pandas()
            assert list(replaced["chunk_content"]) == ["replaced: refund card"]
            assert len(after.sql("SELECT chunk_id FROM team.notes").to_pandas()) == notes_chunks > 1
            assert len(after.sql("SELECT id FROM remote").to_pandas()) == 20
            assert after.query("SELECT sum(amount) AS s FROM df.sales")["s"].tolist() == [6]
            assert after.query("SELECT sum(price) AS s FROM files.prices")["s"].tolist() == [8]
            assert after.query("SELECT item FROM team.cheap")["item"].tolist() == ["card"]  # views move
            assert [a.name for a in after.agents.list()] == ["helper"]
            assert {p["name"] for p in after.api.list_projects()} == {"mindsdb", "team"}
            after.knowledge_bases.insert("docs", [{"id": 1000, "content": "after the move", "grp": 1}])
            assert len(after.sql("SELECT id FROM docs").to_pandas()) == 401
            after.knowledge_bases.delete("docs")
            after.knowledge_bases.create("fresh", embedding_model=HASH_MODEL)  # ids keep counting
            assert after.knowledge_bases.get("fresh").to_json()["id"] > max(
                k.to_json()["id"] for k in after.knowledge_bases.list() if k.name != "fresh")
    finally:
        server.stop()

    again = cli("--data-dir", str(local), url=pgvector_dsn)  # not onto a catalog that holds things
    assert again.returncode == 1
    assert "already holds" in again.stderr and len(again.stderr.strip().splitlines()) == 1


def test_verify_finds_a_difference_and_a_failed_copy_leaves_nothing(tmp_path, pgvector_dsn):
    local = tmp_path / "local"
    with Engine(local) as eng:
        eng.create_knowledge_base("mindsdb", {"name": "docs", "embedding_model": HASH_MODEL})
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "docs"),
                        [{"id": i, "content": f"row {i} of the test"} for i in range(50)])
    assert cli("--data-dir", str(local), url=pgvector_dsn).returncode == 0
    assert cli("--data-dir", str(local), "--verify", url=pgvector_dsn).returncode == 0
    with psycopg.connect(pgvector_dsn, autocommit=True) as db:
        db.execute("DELETE FROM kb_mindsdb_docs WHERE id = '3'")
    failed = cli("--data-dir", str(local), "--verify", url=pgvector_dsn)
    assert failed.returncode == 1 and "MISMATCH" in failed.stdout
    assert "50 rows here, 49 there" in failed.stdout

    # a directory whose chunks cannot be read: nothing of it stays in the target
    other = tmp_path / "other"
    with Engine(other) as eng:
        eng.create_knowledge_base("mindsdb", {"name": "broken", "embedding_model": HASH_MODEL})
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "broken"), [{"id": 1, "content": "x"}])
        kb_id = eng.catalog.knowledge_base("mindsdb", "broken").id
    (other / "knowledge_bases" / str(kb_id) / "chunks.sqlite").write_bytes(b"not a database")
    with psycopg.connect(pgvector_dsn, autocommit=True) as db:
        db.execute("DROP SCHEMA kbsql CASCADE")
        db.execute("DROP TABLE kb_mindsdb_docs")
    run = cli("--data-dir", str(other), url=pgvector_dsn)
    assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    with psycopg.connect(pgvector_dsn) as db:
        assert db.execute("SELECT to_regclass('public.kb_mindsdb_broken')").fetchone()[0] is None
        assert db.execute("SELECT count(*) FROM kbsql.knowledge_bases").fetchone()[0] == 0


def test_both_built_in_storages_export_their_chunks_for_migrate():
    """`kbsql migrate` reads and verifies chunks only through the storage protocol
    (`kbsql.spi.ExportsChunks`), never through a storage's own tables."""
    from kbsql.engine.knowledge.local import LocalStorage
    from kbsql.engine.postgres.pgvector import PgVectorStorage
    from kbsql.spi import ExportsChunks, KbStorage

    for storage in (LocalStorage, PgVectorStorage):
        assert {"export", "chunks_by_id"} <= set(vars(storage)), storage
    assert ExportsChunks not in KbStorage.__mro__  # optional: a plugin storage need not have it
    source = (Path(__file__).parents[1] / "src" / "kbsql" / "migrate.py").read_text()
    assert "FROM chunks" not in source and "kb_mindsdb" not in source and "embedding" not in source
