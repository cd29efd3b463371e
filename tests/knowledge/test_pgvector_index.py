"""The HNSW index of a pgvector knowledge base: its knobs under CREATE INDEX ON KNOWLEDGE_BASE,
kept in PostgreSQL for every server, and filtered searches through it (real PostgreSQL 16 +
pgvector 0.8, the `pgvector_dsn` fixture)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import psycopg
import pytest

from kbsql.engine import Engine
from kbsql.engine.postgres import pg_hnsw
from tests.knowledge.conftest import HASH_MODEL, sql, sql_error, table
from tests.knowledge.test_pgvector_storage import create_vdb, engine_with_kb, exact_sims, rows_of


@pytest.fixture
def pg_engine(tmp_path, pgvector_dsn) -> Any:
    """Knowledge base `kb` in pgvector with 1,500 rows (its HNSW index built)."""
    with engine_with_kb(tmp_path / "engine", pgvector_dsn) as eng:
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "kb"), rows_of(1500))
        yield eng


def index_state(dsn: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    """(the index's oid, its build options, the settings in the table's comment)."""
    with psycopg.connect(dsn) as db:
        oid, options = db.execute("SELECT c.oid, c.reloptions FROM pg_index i JOIN pg_class c "
                                  "ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
                                  "WHERE i.indrelid = 'kb_chunks'::regclass AND a.amname = 'hnsw'").fetchone()
        comment = db.execute("SELECT obj_description('kb_chunks'::regclass, 'pg_class')").fetchone()[0]
    return oid, dict(o.split("=") for o in options), json.loads(comment or "{}").get("kbsql_hnsw", {})


def test_defaults_then_create_index_rebuilds_with_its_knobs(pg_engine, pgvector_dsn, tmp_path):
    oid, options, stored = index_state(pgvector_dsn)
    assert options == {"m": str(pg_hnsw.M), "ef_construction": str(pg_hnsw.EF_CONSTRUCTION)}
    assert stored == {}  # no comment: the defaults

    sql(pg_engine, "CREATE INDEX ON KNOWLEDGE_BASE kb WITH (m = 8, ef_construction = 40, ef_search = 50)")
    new_oid, options, stored = index_state(pgvector_dsn)
    assert new_oid != oid and options == {"m": "8", "ef_construction": "40"}
    assert stored == {"m": 8, "ef_construction": 40, "ef_search": 50}
    with psycopg.connect(pgvector_dsn) as db:  # one HNSW index, valid; nothing left of the build
        assert db.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'kb_chunks' "
                          "AND indexdef LIKE '%hnsw%'").fetchone()[0] == 1
        assert db.execute("SELECT bool_and(indisvalid) FROM pg_index WHERE indrelid = "
                          "'kb_chunks'::regclass").fetchone()[0]
    # another process (another server) sharing the table reads the same settings
    with Engine(tmp_path / "other") as other:
        create_vdb(other, pgvector_dsn)
        sql(other, "CREATE KNOWLEDGE_BASE kb USING storage = vdb.kb_chunks, "
                   f"embedding_model = {json.dumps(HASH_MODEL)}")
        storage = other.knowledge.handle(other.catalog.knowledge_base("mindsdb", "kb"))
        with storage.pool.connection() as conn:  # type: ignore[attr-defined]
            assert storage.index_settings(conn).ef_search == 50  # type: ignore[attr-defined]

    # ef_search alone: no rebuild
    sql(pg_engine, "CREATE INDEX ON KNOWLEDGE_BASE kb WITH (m = 8, ef_construction = 40, ef_search = 300)")
    assert index_state(pgvector_dsn)[0] == new_oid
    assert index_state(pgvector_dsn)[2]["ef_search"] == 300
    got = table(pg_engine, "SELECT id FROM kb WHERE content = 'weighs 3 kilograms' LIMIT 10")
    assert len(got) == 10

    # DROP INDEX: back to the defaults, rebuilt
    sql(pg_engine, "DROP INDEX ON KNOWLEDGE_BASE kb")
    _, options, stored = index_state(pgvector_dsn)
    assert options == {"m": str(pg_hnsw.M), "ef_construction": str(pg_hnsw.EF_CONSTRUCTION)}
    assert stored == {"m": pg_hnsw.M, "ef_construction": pg_hnsw.EF_CONSTRUCTION,
                      "ef_search": pg_hnsw.EF_SEARCH}


@pytest.mark.parametrize("params, message", [
    ("nprobe = 8", "unknown index parameter 'nprobe' for a pgvector knowledge base"),
    ("m = 1", "index parameter m must be an integer from 2 to 100"),
    ("m = 32, ef_construction = 40", "ef_construction (40) must be at least 2 * m (64)"),
    ("ef_search = 'high'", "index parameter ef_search must be an integer"),
])
def test_bad_knobs_are_refused_and_change_nothing(pg_engine, pgvector_dsn, params, message):
    before = index_state(pgvector_dsn)
    error = sql_error(pg_engine, f"CREATE INDEX ON KNOWLEDGE_BASE kb WITH ({params})")
    assert message in error
    assert "ef_construction" in error or "ef_search" in error or "from 2 to 100" in error
    assert index_state(pgvector_dsn) == before


@pytest.mark.parametrize("ef_search", [10, 200])
def test_filtered_searches_through_hnsw_are_never_short(pg_engine, pgvector_dsn, ef_search):
    """ef_search 10 with LIMIT 25: one pass of the graph holds fewer candidates than the
    answer needs; the iterative scan (or the exact fallback) still gives every row asked."""
    sql(pg_engine, f"CREATE INDEX ON KNOWLEDGE_BASE kb WITH (ef_search = {ef_search})")
    for where, sql_where, limit in [
            ("color = 'red'", "metadata->>'color' = 'red'", 25),                 # a third of the rows
            ("n < 300 AND color = 'blue'", "(metadata->>'n')::int < 300 AND metadata->>'color' = 'blue'", 25),
            ("n IN (1, 4, 7, 10, 13)", "(metadata->>'n')::int IN (1, 4, 7, 10, 13)", 25)]:  # five rows
        got = table(pg_engine, f"SELECT id, relevance FROM kb WHERE content = 'weighs 3 kilograms' "
                               f"AND {where} LIMIT {limit}")
        sims = exact_sims(pgvector_dsn, "weighs 3 kilograms", sql_where)
        assert len(got) == min(limit, len(sims)), where  # never short
        assert {r["id"] for r in got} <= set(sims)  # never outside the filter
        best = sorted(sims.values(), reverse=True)[:limit]
        found = sorted((sims[r["id"]] for r in got), reverse=True)
        # approximate, but close to the true top-k: tie-aware recall
        assert np.mean([f >= best[-1] - 1e-5 for f in found]) >= 0.9, where
