"""Fixtures of the knowledge-base tests: a real offline corpus, KBs on the cheap hash
embedder (where the model is not the point) and the default MiniLM loaded once per session."""

from __future__ import annotations

import pydoc_data.topics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbsql.engine import Engine
from kbsql.interface.results import OkResult, TableResult

HASH_MODEL = {"provider": "kbsql", "model_name": "hash-256"}


def sql(engine: Engine, query: str, **ctx: Any) -> Any:
    """Run SQL; fail the test with the server's message on an error answer."""
    result = engine.query(query, ctx or None)
    assert isinstance(result, TableResult | OkResult), getattr(result, "error_message", result)
    return result


def sql_error(engine: Engine, query: str) -> str:
    result = engine.query(query)
    assert result.type == "error", f"expected an error from {query!r}, got {result}"
    return result.error_message


def background(engine: Engine, query: str, timeout: float = 60.0) -> dict[str, Any]:
    """Run an `INSERT ... SELECT ... USING batch_size` (MindsDB runs those in the background:
    the statement answers the query's row at once) and wait for it to end; its
    information_schema.queries row (PROCESSED_ROWS, ERROR, ...)."""
    result = sql(engine, query)
    assert isinstance(result, TableResult) and result.column_names[0] == "ID", result
    return wait_query(engine, result.data[0][0], timeout)


def wait_query(engine: Engine, query_id: int, timeout: float = 60.0) -> dict[str, Any]:
    from tests.waiting import queries_sql, wait_for

    return wait_for(lambda: table(engine, queries_sql(query_id))[0], timeout=timeout)


def table(engine: Engine, query: str) -> list[dict[str, Any]]:
    result = sql(engine, query)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.data]


@pytest.fixture(scope="session")
def topics() -> dict[str, str]:
    """Python's own documentation topics (pydoc_data): real English text, offline."""
    return dict(pydoc_data.topics.topics)


@pytest.fixture(scope="session")
def minilm():
    """The default model, loaded once for the whole session."""
    from kbsql.engine.models import minilm

    return minilm.load_model()


@pytest.fixture
def kb_engine(tmp_path: Path) -> Iterator[Engine]:
    eng = Engine(tmp_path / "kb-engine")
    yield eng
    eng.close()
