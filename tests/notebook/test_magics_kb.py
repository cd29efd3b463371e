"""Knowledge-base SQL through `%%kbsql`: DataFrame shapes and dtypes of search results."""

from __future__ import annotations

import json
import math
from urllib.parse import urlparse

import pandas as pd
import pytest

KB_COLUMNS = ["id", "chunk_id", "chunk_content", "metadata", "relevance", "distance"]

CREATE = """%%kbsql
CREATE KNOWLEDGE_BASE docs
USING embedding_model = {"provider": "kbsql", "model_name": "hash-64"},
      metadata_columns = ['product'], id_column = 'id'{storage}
"""

INSERT = """%%kbsql
INSERT INTO docs (id, content, product) VALUES
  (1, 'The pump moves water through the pipes.', 'pump'),
  (2, 'The fan cools the server room.', 'fan'),
  (3, 'Replace the pump seal every year.', 'pump')
"""


@pytest.fixture(params=["local", "pgvector"])
def kb(cells, request):
    """A KB in the local store, and one a notebook keeps in a team's PostgreSQL (pgvector)."""
    storage = ""
    if request.param == "pgvector":
        url = urlparse(request.getfixturevalue("pgvector_dsn"))
        params = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"),
                  "user": url.username, "password": url.password}
        result, out = cells.run(f"%kbsql CREATE DATABASE vdb WITH ENGINE = 'pgvector', "
                                f"PARAMETERS = {json.dumps(params)}")
        assert result.success, out
        storage = ", storage = vdb.docs_chunks"
    result, out = cells.run(CREATE.replace("{storage}", storage))
    assert result.success and out.strip() == "OK.", out
    result, out = cells.run(INSERT)
    assert result.success and "3 rows affected" in out, out
    return cells


def test_semantic_search_frame_has_the_contract_columns_and_float_scores(kb):
    frame = kb.ok("%kbsql SELECT * FROM docs WHERE content = 'water pump' LIMIT 2")
    assert list(frame.columns) == KB_COLUMNS
    assert frame.shape == (2, 6)
    assert frame["relevance"].dtype == "float64" and frame["distance"].dtype == "float64"
    assert frame["relevance"].is_monotonic_decreasing  # best first
    assert frame.iloc[0]["id"] == "1"
    meta = frame.iloc[0]["metadata"]
    assert isinstance(meta, dict) and meta["product"] == "pump"


def test_plain_select_has_nan_scores_and_bound_search_text(kb):
    frame = kb.ok("%kbsql SELECT * FROM docs")
    assert frame.shape == (3, 6)
    assert frame["relevance"].dtype == "float64"
    assert all(math.isnan(v) for v in frame["relevance"]) and all(math.isnan(v) for v in frame["distance"])
    kb.ns["question"] = "seal' OR '1'='1"
    kb.ns["product"] = "pump"
    hits = kb.ok("%%kbsql hits <<\nSELECT id, chunk_content FROM docs\n"
                 "WHERE content = :question AND product = :product")
    assert hits is None
    stored = kb.ns["hits"]
    assert isinstance(stored, pd.DataFrame) and set(stored["id"]) <= {"1", "3"}
    assert list(stored.columns) == ["id", "chunk_content"]


def test_kb_error_is_short(kb):
    result, out = kb.run("%kbsql SELECT * FROM nowhere_kb WHERE content = 'x'")
    assert not result.success
    assert "nowhere_kb" in out and "Traceback" not in out
