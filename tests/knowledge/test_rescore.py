"""The exact re-score of an approximate index's candidates (knowledge/local.py `_rescored`)
reads from SQLite only the candidates whose float16 score can still reach the top k: what a
user gets must be what re-scoring every candidate gives (rows, order, distances), on the scan
and on IVF, filtered or not; rows with equal scores come lower id first whichever others were
read; and a candidate deleted meanwhile never shortens the answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge import index as index_mod
from kbsql.engine.knowledge import local
from kbsql.engine.knowledge.search import Filter, SearchRequest
from kbsql.engine.models.embeddings import HashEmbedder
from tests.knowledge.test_index import _kb, _rows

QUERIES = ["river castle", "ocean lake castle", "bridge", "glacier meadow volcano harbor road",
           "a question about the valley and the island", "tower"]
COPY = "river castle bridge tower ocean glacier road river lake"


def _every_candidate(store, query, approx, seqs, k):
    return local._exact(store, query, seqs, k)


@pytest.fixture(params=["scan", "ivf"])
def kb(request, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(index_mod, "APPROX_THRESHOLD", 500)
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 10**9 if request.param == "scan" else 0)
    rows = _rows(2000)
    for i in range(12):  # the same text at ids spread over the rows: equal scores
        rows[150 * i + 7]["content"] = COPY
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        record = eng.catalog.knowledge_base("mindsdb", "kb")
        assert eng.knowledge.handle(record).index.kind == request.param
        yield eng, record


def test_the_answer_is_what_re_scoring_every_candidate_gives(kb, monkeypatch) -> None:
    eng, record = kb
    for filters in ([], [Filter("group", "=", 3)], [Filter("tag", "!=", "t1")]):
        for text in [*QUERIES, COPY]:
            for limit in (1, 10, 25):
                request = SearchRequest(query=text, limit=limit, filters=filters)
                got = eng.knowledge.search(record, request)
                with monkeypatch.context() as m:
                    m.setattr(local, "_rescored", _every_candidate)
                    assert eng.knowledge.search(record, request) == got, (text, filters, limit)
                assert len(got) == limit


def test_rows_with_equal_scores_come_lower_id_first(kb) -> None:
    eng, record = kb
    copies = sorted(150 * i + 7 for i in range(12))
    for limit in (7, 10):  # (the index answers 2 x limit candidates: all 12 copies)
        for filters, allowed in (([], copies), ([Filter("group", "in", [0, 1, 2, 3, 4, 5])],
                                                [c for c in copies if c % 7 != 6])):
            got = eng.knowledge.search(record, SearchRequest(query=COPY, limit=limit, filters=filters))
            assert [int(r[0]) for r in got] == allowed[:limit], (limit, filters)
            assert len({r[5] for r in got}) == 1  # one distance, to the bit


def test_float16_scores_stay_within_the_bound_the_pool_assumes(kb) -> None:
    eng, record = kb
    handle = eng.knowledge.handle(record)
    emb = HashEmbedder(256)
    worst = 0.0
    for query in emb.embed([*QUERIES, COPY]):
        approx, seqs, exact = handle.index.search(query, 50)
        assert not exact
        scores, ids = local._exact(handle.store, query, seqs, len(seqs))
        truth = dict(zip(ids.tolist(), scores.tolist(), strict=True))
        pairs = zip(seqs.tolist(), approx.tolist(), strict=True)
        worst = max(worst, *(abs(truth[s] - a) for s, a in pairs))
    assert worst <= local.FP16_ERROR


def test_a_candidate_deleted_before_its_row_is_read_does_not_shorten_the_answer(kb) -> None:
    eng, record = kb
    handle = eng.knowledge.handle(record)
    query = HashEmbedder(256).embed(["ocean lake castle"])[0]
    approx, seqs, _ = handle.index.search(query, 10)
    assert np.sort(approx)[-10] - approx.min() > 2 * local.FP16_ERROR  # a pool smaller than the candidates
    best = int(seqs[0])
    with handle.store.write() as db:  # behind the index's back, as another process would
        db.execute("DELETE FROM chunks WHERE seq = ?", (best,))
    scores, ids = local._rescored(handle.store, query, approx, seqs, 10)
    rest = seqs[seqs != best]
    expected_scores, expected_ids = local._exact(handle.store, query, rest, 10)
    assert ids.tolist() == expected_ids.tolist() and len(ids) == 10
    np.testing.assert_array_equal(scores, expected_scores)
