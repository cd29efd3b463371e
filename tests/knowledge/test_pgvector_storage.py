"""Knowledge bases stored in a real PostgreSQL 16 + pgvector (the `pgvector_dsn` fixture).

What a user would notice: the chunks are in the named table (and nowhere on local disk),
filtered searches give the true top-k (never fewer rows than match, also when HNSW is
used), hybrid search finds a keyword, upserts replace, a failed insert leaves nothing, and
a storage that is not a pgvector database is refused without creating anything.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import numpy as np
import psycopg
import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge.service import KnowledgeService
from kbsql.engine.models.providers import ModelProviders
from kbsql.engine.postgres import pg_nearest, pgvector
from tests.knowledge.conftest import HASH_MODEL, background, sql, sql_error, table


def create_vdb(engine: Engine, dsn: str, name: str = "vdb") -> None:
    url = urlparse(dsn)
    params = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"),
              "user": url.username, "password": url.password}
    sql(engine, f"CREATE DATABASE {name} WITH ENGINE = 'pgvector', PARAMETERS = {json.dumps(params)}")


def engine_with_kb(path: Any, dsn: str) -> Engine:
    """An engine with pgvector database `vdb` and knowledge base `kb` in table kb_chunks."""
    eng = Engine(path)
    create_vdb(eng, dsn)
    sql(eng, "CREATE KNOWLEDGE_BASE kb USING storage = vdb.kb_chunks, "
             f"embedding_model = {json.dumps(HASH_MODEL)}, metadata_columns = ['color', 'n']")
    return eng


@pytest.fixture
def pg_engine(tmp_path, pgvector_dsn) -> Any:
    eng = engine_with_kb(tmp_path / "engine", pgvector_dsn)
    yield eng
    eng.close()


def rows_of(n: int) -> list[dict[str, Any]]:
    colors = ["red", "green", "blue"]
    return [{"id": i, "content": f"item number {i} is {colors[i % 3]} and weighs {i % 17} kilograms",
             "color": colors[i % 3], "n": i} for i in range(n)]


def exact_sims(dsn: str, query: str, where: str = "TRUE") -> dict[str, float]:
    """Brute force in numpy over the table's own vectors: id -> cosine similarity."""
    vec = ModelProviders().embedder(HASH_MODEL).embed([query])[0]
    with psycopg.connect(dsn) as db:
        got = db.execute(f"SELECT id, embedding::text FROM kb_chunks WHERE {where}").fetchall()
    vectors = np.array([json.loads(r[1]) for r in got], np.float32)
    return dict(zip([r[0] for r in got], (vectors @ vec).tolist(), strict=True))


def assert_true_top_k(got: list[str], sims: dict[str, float], k: int) -> None:
    """`got` are k rows of the best similarities (ties may come in any order)."""
    assert len(got) == min(k, len(sims)) and len(set(got)) == len(got)
    best = sorted(sims.values(), reverse=True)[:k]
    assert np.allclose([sims[i] for i in got], best, atol=1e-5)


def test_chunks_live_in_the_named_table_not_on_local_disk(pg_engine, pgvector_dsn, tmp_path):
    pg_engine.insert_rows(pg_engine.catalog.knowledge_base("mindsdb", "kb"), rows_of(30))
    with psycopg.connect(pgvector_dsn) as db:
        assert db.execute("SELECT count(*) FROM kb_chunks").fetchone()[0] == 30
        kinds = {r[0] for r in db.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'kb_chunks'")}
    assert any("hnsw" in k and "vector_cosine_ops" in k for k in kinds)
    assert not (tmp_path / "engine" / "knowledge_bases").exists() or \
        not any((tmp_path / "engine" / "knowledge_bases").iterdir())
    found = table(pg_engine, "SELECT id, metadata, relevance FROM kb WHERE content = 'item number 7' LIMIT 3")
    assert len(found) == 3 and found[0]["relevance"] > 0
    assert len(table(pg_engine, "SELECT id FROM kb")) == 30
    # the pgvector database is also a read-only SQL source
    assert table(pg_engine, "SELECT count(*) AS c FROM vdb.kb_chunks")[0]["c"] == 30


# iterative False: the path for pgvector < 0.8 (no iterative index scans), on this server;
# exact_max 5 forces HNSW under the filter there
@pytest.mark.parametrize("iterative, exact_max", [(True, 20_000), (False, 20_000), (False, 5)])
def test_filtered_search_is_the_true_top_k(pg_engine, pgvector_dsn, monkeypatch, iterative, exact_max):
    monkeypatch.setattr(pg_nearest, "EXACT_MAX", exact_max)
    record = pg_engine.catalog.knowledge_base("mindsdb", "kb")
    pg_engine.insert_rows(record, rows_of(600))
    pg_engine.knowledge.handle(record).iterative = iterative
    got = table(pg_engine, "SELECT id FROM kb WHERE content = 'weighs 3 kilograms' AND color = 'red' "
                           "AND n < 400 LIMIT 25")
    sims = exact_sims(pgvector_dsn, "weighs 3 kilograms",
                      "metadata->>'color' = 'red' AND (metadata->>'n')::int < 400")
    assert_true_top_k([r["id"] for r in got], sims, 25)
    # a filter matching fewer rows than LIMIT gives all of them, no more, no fewer
    few = table(pg_engine, "SELECT id FROM kb WHERE content = 'blue' AND n IN (2, 5, 8, 9) LIMIT 10")
    assert sorted(r["id"] for r in few) == ["2", "5", "8", "9"]
    # unfiltered, LIMIT above HNSW's default ef_search (40): all 100 rows come back
    assert len(table(pg_engine, "SELECT id FROM kb WHERE content = 'kilograms' LIMIT 100")) == 100


def test_hybrid_search_finds_the_keyword(pg_engine):
    rows = [*rows_of(200), {"id": "needle", "content": "the zyzzyva beetle hides here", "color": "red",
                            "n": 1}]
    pg_engine.insert_rows(pg_engine.catalog.knowledge_base("mindsdb", "kb"), rows)
    got = table(pg_engine, "SELECT id FROM kb WHERE content = 'zyzzyva' AND hybrid_search = true "
                           "AND hybrid_search_alpha = 0.2 LIMIT 3")
    assert got[0]["id"] == "needle"


def test_hybrid_search_ranks_alike_in_pgvector_and_the_local_store(pg_engine, tmp_path):
    """One fusion for both storages: the same rows and hybrid queries give the same first row
    with the same relevance, and with alpha = 0 (the keyword ranking alone) the same keyword
    matches in the same order (each query word is in one row, so BM25 and ts_rank_cd agree on
    the order; their scores, hence the second row's relevance, differ).
    A row sharing only stop words with the question is no keyword match (relevance 0)."""
    texts = {"beetle": "the zyzzyva beetle hides here", "stop": "what is it that the one of them is",
             "quokka": "a quokka smiles at everyone", "rain": "heavy rain is expected on monday",
             "bread": "bake bread with flour, water and salt", "chess": "a knight moves in an L shape"}
    rows = [{"id": key, "content": text, "color": "red", "n": i}
            for i, (key, text) in enumerate(texts.items())]
    pg_engine.insert_rows(pg_engine.catalog.knowledge_base("mindsdb", "kb"), rows)
    with Engine(tmp_path / "local") as local:
        sql(local, f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {json.dumps(HASH_MODEL)}, "
                   "metadata_columns = ['color', 'n']")
        local.insert_rows(local.catalog.knowledge_base("mindsdb", "kb"), rows)

        def both(where: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            query = f"SELECT id, relevance FROM kb WHERE {where} LIMIT 10"
            return table(local, query), table(pg_engine, query)

        for where, first in (("content = 'what is the zyzzyva' AND hybrid_search = true", "beetle"),
                             ("content = 'quokka' AND hybrid_search = true", "quokka"),  # a lookup
                             ("content = 'a smiling quokka' AND hybrid_search_alpha = 0.7", "quokka")):
            here, there = both(where)
            assert here[0]["id"] == there[0]["id"] == first, where
            assert here[0]["relevance"] == pytest.approx(there[0]["relevance"]), where
            assert all(0 <= r["relevance"] <= 1 for r in here + there)
        here, there = both("content = 'zyzzyva and the quokka' AND hybrid_search_alpha = 0")
        # alpha 0: relevance is the keyword score alone (BM25 / ts_rank_cd over the best one's)
        matches = [r["id"] for r in here if r["relevance"] > 0]
        assert matches == [r["id"] for r in there if r["relevance"] > 0]
        assert matches in (["beetle", "quokka"], ["quokka", "beetle"])
        assert there[0]["relevance"] == pytest.approx(1.0)
        assert here[0]["relevance"] == pytest.approx(1.0)
        assert {r["id"]: r["relevance"] for r in here}["stop"] == 0


def test_upsert_delete_and_failed_insert_leave_a_whole_state(pg_engine, pgvector_dsn, monkeypatch):
    record = pg_engine.catalog.knowledge_base("mindsdb", "kb")
    pg_engine.insert_rows(record, rows_of(10))
    pg_engine.insert_rows(record, [{"id": 3, "content": "replaced text", "color": "red", "n": 3}])
    assert [r["chunk_content"] for r in table(pg_engine, "SELECT chunk_content FROM kb WHERE id = 3")] \
        == ["replaced text"]
    sql(pg_engine, "DELETE FROM kb WHERE color = 'green'")
    assert len(table(pg_engine, "SELECT id FROM kb")) == 7

    from kbsql.engine.knowledge import service

    calls = {"n": 0}
    real = service.KnowledgeService._embed

    def failing(embedder, texts, *progress):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("embedding server went away")
        return real(embedder, texts, *progress)

    monkeypatch.setattr(service, "ROW_BATCH", 5)
    monkeypatch.setattr(service.KnowledgeService, "_embed", staticmethod(failing))
    with pytest.raises(RuntimeError):
        pg_engine.insert_rows(record, [{"id": 100 + i, "content": f"new {i}"} for i in range(12)])
    with psycopg.connect(pgvector_dsn) as db:  # the first batch was not kept either
        assert db.execute("SELECT count(*) FROM kb_chunks").fetchone()[0] == 7


def test_one_table_holds_one_knowledge_base(pg_engine):
    message = sql_error(pg_engine, "CREATE KNOWLEDGE_BASE kb2 USING storage = vdb.KB_CHUNKS, "
                                   f"embedding_model = {json.dumps(HASH_MODEL)}")
    assert "already stores knowledge base mindsdb.kb" in message
    assert [r["NAME"] for r in table(pg_engine, "SHOW KNOWLEDGE_BASES")] == ["kb"]


def test_storage_that_is_not_pgvector_is_refused(tmp_path, pgvector_dsn):
    with Engine(tmp_path / "e") as eng:
        message = sql_error(eng, f"CREATE KNOWLEDGE_BASE kb2 USING storage = nowhere.t, "
                                 f"embedding_model = {json.dumps(HASH_MODEL)}")
        assert "not a pgvector database" in message
        assert table(eng, "SHOW KNOWLEDGE_BASES") == []
        # a pgvector database whose server went down since: a clear error, nothing created
        eng.catalog.create_datasource("down", "pgvector", {"host": "127.0.0.1", "port": 1, "database": "x",
                                                           "user": "u", "password": "topsecret"})
        message = sql_error(eng, f"CREATE KNOWLEDGE_BASE kb3 USING storage = down.t, "
                                 f"embedding_model = {json.dumps(HASH_MODEL)}")
        assert "Cannot connect to PostgreSQL at 127.0.0.1:1/x" in message and "topsecret" not in message
        assert table(eng, "SHOW KNOWLEDGE_BASES") == []
        shown = json.dumps(table(eng, "SELECT * FROM information_schema.databases"), default=str)
        assert "topsecret" not in shown


def test_rest_create_with_storage_object(client, pgvector_dsn):
    url = urlparse(pgvector_dsn)
    params = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"),
              "user": url.username, "password": url.password}
    client.sql(f"CREATE DATABASE vdb WITH ENGINE = 'pgvector', PARAMETERS = {json.dumps(params)}")
    kb = client.knowledge_bases.create("rest_kb", embedding_model=HASH_MODEL,
                                       storage={"database": "vdb", "table": "rest_chunks"})
    assert kb.to_json()["vector_database"] == "vdb"
    client.knowledge_bases.insert("rest_kb", [{"id": 1, "content": "refunds take five days"}])
    with psycopg.connect(pgvector_dsn) as db:
        stored = db.execute("SELECT id, content FROM rest_chunks").fetchall()
    assert stored == [("1", "refunds take five days")]
    frame = client.sql("SELECT id FROM rest_kb WHERE content = 'refund' LIMIT 5").to_pandas()
    assert list(frame["id"]) == ["1"]
    client.knowledge_bases.delete("rest_kb")
    with psycopg.connect(pgvector_dsn) as db:
        assert db.execute("SELECT to_regclass('rest_chunks')").fetchone()[0] is None


def test_reranker_rescored_on_top_of_pgvector(tmp_path, pgvector_dsn):
    from tests.knowledge.fakes import FakeProvider

    fake = FakeProvider()
    try:
        with Engine(tmp_path / "e") as eng:
            create_vdb(eng, pgvector_dsn)
            reranker = {"provider": "cohere", "model_name": "rr-1", "base_url": fake.url}
            sql(eng, "CREATE KNOWLEDGE_BASE kb USING storage = vdb.rr_chunks, "
                     f"embedding_model = {json.dumps(HASH_MODEL)}, reranking_model = {json.dumps(reranker)}")
            sql(eng, "INSERT INTO kb (id, content) VALUES (1, 'apples and pears are fruit'), "
                     "(2, 'cars and trucks drive on roads'), (3, 'fruit salad with apples'), "
                     "(4, 'trucks carry fruit to markets')")
            got = table(eng, "SELECT id, relevance FROM kb WHERE content = 'apples fruit salad' "
                             "AND relevance >= 0.5")
            # the fake scores by shared words: doc 3 all three, doc 1 two, the rest < 0.5 (cut by
            # the bound; query.mdx: a reranked search keeps every row unless relevance sets one)
            assert [g["id"] for g in got] == ["3", "1"]
            assert [g["relevance"] for g in got] == pytest.approx([1.0, 2 / 3], abs=1e-3)
    finally:
        fake.close()


def test_concurrent_upserts_of_one_id_from_two_engines_keep_one_copy(tmp_path, pgvector_dsn):
    """Two processes' worth of writers (two engines, each with its own pool) upsert the same
    ids at once: the per-table lock serialises them, so no id ends up stored twice."""
    import threading

    engines = [Engine(tmp_path / f"e{i}") for i in range(2)]
    try:
        create_vdb(engines[0], pgvector_dsn)
        sql(engines[0], "CREATE KNOWLEDGE_BASE kb USING storage = vdb.up_chunks, "
                        f"embedding_model = {json.dumps(HASH_MODEL)}")
        # the second engine points at the same table through its own catalog entry
        create_vdb(engines[1], pgvector_dsn)
        records = [engines[0].catalog.knowledge_base("mindsdb", "kb")]
        engines[1].catalog.create_knowledge_base("mindsdb", "kb", records[0].spec)
        records.append(engines[1].catalog.knowledge_base("mindsdb", "kb"))

        def writer(i: int) -> None:
            for round_ in range(8):
                engines[i].insert_rows(records[i], [{"id": d, "content": f"writer {i} round {round_}"}
                                                    for d in range(300)])

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        with psycopg.connect(pgvector_dsn) as db:
            counts = db.execute("SELECT id, count(*) FROM up_chunks GROUP BY id ORDER BY id").fetchall()
        assert sorted(counts) == sorted((str(d), 1) for d in range(300))
    finally:
        for e in engines:
            e.close()


def test_threaded_insert_writes_each_batch_once_in_row_order(pg_engine, pgvector_dsn):
    """`USING threads = 4` (batches embedded in parallel, stored in order): every id once in
    the table, holding the content of its last row, as `threads = 1` would leave it."""
    import pandas as pd

    rows = [{"id": i % 9, "content": f"version {i} of item {i % 9}", "color": "red", "n": i}
            for i in range(30)]
    pg_engine.register_dataframe("src", pd.DataFrame(rows))
    done = background(pg_engine, "INSERT INTO kb SELECT * FROM df.src USING batch_size = 4, threads = 4")
    assert done["PROCESSED_ROWS"] == 30 and done["ERROR"] is None
    with psycopg.connect(pgvector_dsn) as db:
        got = dict(db.execute("SELECT id, content FROM kb_chunks").fetchall())
        assert db.execute("SELECT count(*) FROM kb_chunks").fetchone()[0] == 9
    assert got == {str(r["id"]): r["content"] for r in rows}  # later rows replace earlier ones


def test_queries_over_every_chunk_read_them_in_batches(pg_engine, monkeypatch):
    """count, GROUP BY, DISTINCT and a join over a pgvector knowledge base read its chunks
    on a server-side cursor in batches (kb_stream), and answer as the whole-frame path did."""
    record = pg_engine.catalog.knowledge_base("mindsdb", "kb")
    pg_engine.insert_rows(record, rows_of(60))
    statements = ["SELECT count(*) FROM kb",
                  "SELECT color, count(*) AS c, sum(n) AS s FROM kb GROUP BY color ORDER BY color",
                  "SELECT DISTINCT color FROM kb", "SELECT count(*) FROM kb WHERE n >= 30",
                  "SELECT a.metadata->>'color' AS c, count(*) FROM kb AS a "
                  "JOIN (SELECT 1 AS x) AS t ON t.x = 1 GROUP BY 1 ORDER BY 1"]
    read: list[int] = []
    batches = pgvector.PgVectorStorage.plain_batches

    def counted(self, filters, size):
        read.append(size)
        yield from batches(self, filters, size)

    counts: list[object] = []
    count_matching = pgvector.PgVectorStorage.count_matching

    def counting(self, filters):
        counts.append(filters)
        return count_matching(self, filters)

    monkeypatch.setattr(pgvector.PgVectorStorage, "plain_batches", counted)
    monkeypatch.setattr(pgvector.PgVectorStorage, "count_matching", counting)
    streamed = [sql(pg_engine, s).data for s in statements]
    assert len(read) >= 3 and len(counts) == 2  # the counts are PostgreSQL's: no chunk is sent
    assert streamed[0] == [[60]] and streamed[3] == [[30]]
    assert streamed[1] == [["blue", 20, sum(range(2, 60, 3))], ["green", 20, sum(range(1, 60, 3))],
                           ["red", 20, sum(range(0, 60, 3))]]
    assert streamed[2] == [["red"], ["green"], ["blue"]]
    monkeypatch.setattr(KnowledgeService, "plain_batches", lambda *args: None)  # the whole-frame path
    assert [sql(pg_engine, s).data for s in statements] == streamed


def test_a_filter_on_a_key_no_chunk_holds_is_an_unknown_column(tmp_path, pgvector_dsn):
    """As in the local store (tests/dialect/test_kb_executor.py): without metadata_columns a
    filter may name any key some chunk holds, null-valued too; a key none holds is an error."""
    eng = Engine(tmp_path / "engine")
    create_vdb(eng, pgvector_dsn)
    sql(eng, "CREATE KNOWLEDGE_BASE kbu USING storage = vdb.kbu_chunks, "
             f"embedding_model = {json.dumps(HASH_MODEL)}")
    sql(eng, "INSERT INTO kbu (id, content, col1, col4) VALUES (1, 'cont1', 'val1', NULL)")
    assert [r["id"] for r in table(eng, "SELECT id FROM kbu WHERE col1 = 'val1'")] == ["1"]
    assert [r["id"] for r in table(eng, "SELECT id FROM kbu WHERE col4 IS NULL")] == ["1"]
    assert "Unknown column 'col3'" in sql_error(eng, "SELECT id FROM kbu WHERE col3 = 'val1'")
    eng.close()
