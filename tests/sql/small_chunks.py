"""A knowledge base of many small chunks, for the tests that measure what reading them all
costs (test_kb_bounds, test_kb_stream)."""

from __future__ import annotations

from pathlib import Path

from kbsql.engine import Engine

HASH = "{'provider': 'kbsql', 'model_name': 'hash-64'}"


def store_small_chunks(folder: Path, rows: int, kb: str = "rk") -> None:
    """Knowledge base `kb` in `folder` with `rows` (a multiple of 200) chunks 'a <n>' of ids
    '0'..., stored with no deadline: a loaded CI machine once ran this INSERT past a 0.1 s
    one, and the test failed before it reached what it tested."""
    side = rows // 200
    with Engine(folder) as eng:
        eng.query(f"CREATE KNOWLEDGE_BASE {kb} USING embedding_model = {HASH}")
        made = eng.query(f"INSERT INTO {kb} (id, content) SELECT CAST(a * {side} + b AS VARCHAR) AS id, "
                         f"'a ' || (a * {side} + b) AS content FROM (SELECT unnest(range(200)) AS a) AS x, "
                         f"(SELECT unnest(range({side})) AS b) AS y").to_json()
        assert made.get("affected_rows") == rows, made
