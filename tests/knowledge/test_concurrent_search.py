"""Searches while other threads upsert the same knowledge base (review finding 3).

The index is read first and the rows after: an upsert committing in between removes rows
the index still returned. Every search must still answer, with full results."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge import search as search_mod
from kbsql.engine.knowledge.search import SearchRequest, search
from kbsql.engine.models.embeddings import HashEmbedder
from tests.knowledge.conftest import HASH_MODEL

DOCS = 200
ROUNDS = 15


@pytest.mark.parametrize("attempts", [search_mod.SEARCH_ATTEMPTS, 1])
def test_search_while_upserting_in_other_threads(kb_engine: Engine, attempts: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With one attempt, every search is the last: the writers always get a chance to win
    between the index and the rows, and the held writers are what keeps the rows whole."""
    monkeypatch.setattr(search_mod, "SEARCH_ATTEMPTS", attempts)
    kb_engine.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": HASH_MODEL})
    record = kb_engine.catalog.knowledge_base("mindsdb", "kb")
    topics = ["rivers", "mountains", "forests", "deserts"]
    kb_engine.insert_rows(record, [{"id": i, "content": f"note {i} about {topics[i % 4]}"}
                                   for i in range(DOCS)])
    failures: list[str] = []
    answers: list[int] = []
    writing = threading.Event()
    writing.set()

    def writer(tag: int) -> None:
        try:
            for n in range(ROUNDS):
                kb_engine.insert_rows(record, [{"id": i, "content": f"note {i} round {n} by {tag} about "
                                                f"{topics[(i + n) % 4]}"} for i in range(DOCS)])
        except Exception as exc:  # a failed writer is a failure too
            failures.append(f"writer: {exc!r}")

    def searcher() -> None:
        searches = 0
        while (writing.is_set() or searches < 5) and searches < 5000:
            searches += 1
            result = kb_engine.query("SELECT id, chunk_content FROM kb WHERE content = 'about rivers' "
                                     "LIMIT 5")
            if result.type != "table":
                failures.append(result.error_message)
            else:
                answers.append(len(result.data))

    writers = [threading.Thread(target=writer, args=(t,)) for t in range(2)]
    searchers = [threading.Thread(target=searcher) for _ in range(2)]
    for t in writers + searchers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    writing.clear()
    for t in searchers:
        t.join(timeout=120)
    assert failures == []
    assert len(answers) >= 10 and set(answers) == {5}  # every search saw a whole state: 200 docs
    final = kb_engine.query("SELECT id FROM kb")
    assert sorted(int(r[0]) for r in final.data) == list(range(DOCS))


class _RowRemovedMidSearch:
    """A storage where a writer removes row 3 between the keyword read and the vector read."""

    def sync(self) -> None: ...

    def vector_top(self, query: np.ndarray, k: int, filters: object) -> tuple[np.ndarray, np.ndarray]:
        return np.array([0.9, 0.5], np.float32), np.array([1, 2], np.int64)

    def keyword_top(self, text: str, k: int, filters: object) -> dict[int, float]:
        return {3: 1.0, 2: 0.5}

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]:
        return {}  # row 3 is gone by now

    def load_rows(self, keys: list[int]) -> dict[int, tuple[object, ...]]:
        return {k: (str(k), f"{k}:0", f"text {k}", "{}") for k in keys if k != 3}


def test_a_hybrid_search_answers_when_a_keyword_match_is_removed_mid_search() -> None:
    """Was a KeyError (a 500) from the hybrid ranking: the keyword side's row had no vector."""
    request = SearchRequest(query="rivers", hybrid=True, limit=5)
    rows = search(_RowRemovedMidSearch(), HashEmbedder(8), None, request)
    assert [r[0] for r in rows] == ["2", "1"]  # matched by both rankings, then the vector's first
