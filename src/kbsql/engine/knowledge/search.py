"""Search and plain reads over one knowledge base.

Filters are SQL on the chunk rows (metadata via json_extract), so a filtered search is the
true top-k among the matching rows: the filter yields candidate ids first and FAISS searches
only those (an IDSelector; exact on a flat index; an IVF index's candidates, or a small
filtered subset, are scored exactly from the stored vectors), never a post-filtered short
list. Result rows are always (id, chunk_id, chunk_content, metadata, relevance, distance),
best first; distance is the cosine distance and, without a reranker, relevance = 1 / (1 + distance)
(a hybrid search's relevance: `hybrid_relevance`; its order: `fused`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kbsql.engine.models.embeddings import embed_query
from kbsql.interface.control import checkpoint
from kbsql.interface.errors import BadRequest

DEFAULT_LIMIT = 10
# query.mdx: "When the ranking model is provided, the default `relevance` is equal or greater
# than 0, unless defined otherwise in the WHERE clause" (MindsDB's reranker default is 0.0 too)
RERANK_THRESHOLD = 0.0
SEARCH_ATTEMPTS = 4  # index-then-rows reads redone when a concurrent write removed rows between
# Hybrid search (see `fused`): weighted reciprocal rank fusion of the vector ranking and the
# keyword ranking (SQLite FTS5 BM25 locally, ts_rank_cd in pgvector): a row scores
# alpha / (RRF_K + its vector rank) + w_k / (RRF_K + its keyword rank), w_k = (1 - alpha) x
# max(KEYWORD_SHARE, KEYWORD_LEAD / terms), `terms` the query's distinct words that are not stop
# words (the words the keyword side searches). Ranks, not scores, so BM25 and ts_rank_cd fuse
# the same way whatever their scales. At alpha 0.5 a question (4+ terms) counts its keyword
# ranking half as much as its vector ranking; a lookup of one word lets the keyword ranking lead
# (two words: equal), the words being the point. RRF_K 5 (not the usual 60): only the first
# ranks of each list should matter. Chosen on the tuning sets (bench_retrieval.py, results/
# retrieval.json): it beats the vector search on all three, where equal-weight RRF (any k)
# lost on stdlib and the cosine + weighted BM25 blend it replaced lost on tickets; it loses on
# the held-out set, so hybrid search stays an option. Stop words are left out of the keyword
# query (as PostgreSQL's english configuration does): with them every fusion tried did worse.
RRF_K = 5
KEYWORD_SHARE = 0.5
KEYWORD_LEAD = 2.0
WORD = re.compile(r"\w+", re.UNICODE)
"""A word of a keyword search (the local store and pgvector split text the same way)."""

STOP_WORDS = frozenset("""a about all also an and any are as at be been being both but by can could
did do does doing done each few for from further get got had has have how i if in into is it its
just like make me more most my no nor not now of on once only or other our out over own same
should so some such than that the their them then there these they this those to too under up
use using very want was we were what when where which who whom whose why will with would you
your""".split())
_OPS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
        "in": "IN", "not in": "NOT IN", "like": "LIKE", "not like": "NOT LIKE",
        "is": "IS", "is not": "IS NOT"}


@dataclass
class Filter:
    column: str
    op: str
    value: Any


@dataclass
class FilterGroup:
    """Filters combined with `and` / `or`, or one negated (`not`): the OR, NOT, BETWEEN and
    nested parentheses of a WHERE clause, still rendered as one SQL condition so a filtered
    search stays the true top-k among the matching rows."""

    op: str
    items: list[Filter | FilterGroup]
    column: str = ""  # a group names no single column (callers that check columns skip it)


Condition = Filter | FilterGroup
Conditions = Sequence[Condition]


@dataclass
class SearchRequest:
    query: str | None = None
    filters: list[Condition] = field(default_factory=list)
    min_relevance: float | None = None
    strict: bool = False  # `relevance > x` rather than `>=`
    limit: int | None = None
    hybrid: bool = False
    alpha: float = 0.5  # weight of the vector ranking in a hybrid search
    rerank: bool = True


class SearchableStorage(Protocol):
    """What a search needs from where a KB's chunks live (storage.KbStorage extends it with
    writes). Rows are addressed by integer keys the storage hands out."""

    def sync(self) -> None: ...

    def plain_rows(self, filters: Conditions, limit: int | None, offset: int = 0) -> list[list[Any]]: ...

    def vector_top(self, query: np.ndarray, k: int, filters: Conditions) -> tuple[np.ndarray, np.ndarray]:
        """(cosine similarities, keys) of the true top-k rows matching `filters`, best first."""
        ...

    def keyword_top(self, text: str, k: int, filters: Conditions) -> dict[int, float]:
        """key -> full-text score scaled to [0, 1] by the best, for rows matching `filters`."""
        ...

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]: ...

    def load_rows(self, keys: list[int]) -> dict[int, tuple[Any, ...]]:
        """key -> (id, chunk_id, content, metadata as JSON text)."""
        ...


def op_sql(f: Filter) -> str:
    """The SQL operator of a filter (the same set for every storage), or a clear error."""
    op = _OPS.get(f.op.lower())
    if op is None:
        raise BadRequest(f"operator {f.op!r} is not supported on knowledge-base column {f.column!r}")
    return op


def group_sql(group: FilterGroup, render: Callable[[Condition], str], true: str, false: str) -> str:
    """A group as one SQL condition, its items rendered by `render` (each storage's dialect;
    `true`/`false`: its literals, for an empty AND / OR)."""
    inner = [render(i) for i in group.items]
    if group.op == "not":
        return f"NOT ({inner[0]})"
    joiner = " OR " if group.op == "or" else " AND "
    return "(" + joiner.join(inner or [true if group.op == "and" else false]) + ")"


def check_request(request: SearchRequest) -> None:
    """Refuse options outside their range rather than quietly clamping them."""
    if request.limit is not None and int(request.limit) < 0:
        raise BadRequest(f"LIMIT must be >= 0, not {request.limit}")
    if not 0.0 <= float(request.alpha) <= 1.0:
        raise BadRequest(f"hybrid_search_alpha must be between 0 and 1, not {request.alpha}")


def _ranked(storage: SearchableStorage, query: np.ndarray, fetch: int, request: SearchRequest,
            hybrid: bool) -> tuple[list[int], dict[int, float], dict[int, float]]:
    """(seqs best first, seq -> cosine similarity, seq -> keyword score on 0..1, empty
    unless hybrid) of one search."""
    scores, ids = storage.vector_top(query, fetch, request.filters)
    order = ids.tolist()
    sims = dict(zip(order, scores.tolist(), strict=True))
    if not hybrid:  # the ranking is the similarity: no second dict, no tuple keys (same order)
        return sorted(sims, key=lambda s: -sims[s]), sims, {}
    terms = keyword_terms(request.query or "")
    keyword = storage.keyword_top(" ".join(terms), fetch, request.filters) if terms else {}
    missing = [s for s in keyword if s not in sims]
    sims.update(storage.similarities(query, missing))
    # a row a concurrent writer removed after the keyword read has no vector: it is gone
    keyword = {s: score for s, score in keyword.items() if s in sims}
    ranking = fused(order, keyword, len(terms), float(request.alpha))
    for seq in sims:
        ranking.setdefault(seq, 0.0)
    return sorted(ranking, key=lambda s: (-ranking[s], -sims[s])), sims, keyword


def keyword_terms(query: str) -> list[str]:
    """The words a hybrid search's keyword side looks for: the query's distinct words, stop
    words left out, in order. Distinct regardless of case, as both keyword indexes match
    (FTS5's unicode61, PostgreSQL's tsvector): "Loop loop" is one term, not one counted twice
    and weighing as two in `weights`. Only case is folded here: forms the indexes merge by
    stem or accent ("loop" and "loops", "cafe" and "café") stay separate terms."""
    distinct: dict[str, str] = {}
    for word in WORD.findall(query):
        key = word.lower()
        if key not in STOP_WORDS:
            distinct.setdefault(key, word)
    return list(distinct.values())


def weights(terms: int, alpha: float) -> tuple[float, float]:
    """(vector, keyword) weights of `fused` (see RRF_K)."""
    return alpha, (1.0 - alpha) * max(KEYWORD_SHARE, KEYWORD_LEAD / max(1, terms))


def fused(vector: list[int], keyword: dict[int, float], terms: int, alpha: float) -> dict[int, float]:
    """Each row's weighted reciprocal rank fusion score over 1 / (RRF_K + 1) x the weights' sum,
    so 1 is a row first in both rankings and 0 one in neither. `vector`: keys best first;
    `keyword`: key -> score (the ranking is its order, best first)."""
    w_vector, w_keyword = weights(terms, alpha)
    scale = (w_vector + w_keyword) / (RRF_K + 1)
    out: dict[int, float] = {}
    for rank, seq in enumerate(vector, 1):
        out[seq] = out.get(seq, 0.0) + w_vector / (RRF_K + rank) / scale
    for rank, seq in enumerate(sorted(keyword, key=lambda s: -keyword[s]), 1):
        out[seq] = out.get(seq, 0.0) + w_keyword / (RRF_K + rank) / scale
    return out


def hybrid_relevance(vector_relevance: float, keyword_score: float, alpha: float) -> float:
    """A hybrid search row's `relevance`, as MindsDB documents it: the weighted average
    (alpha: the vector side) of its embedding relevance (1 / (1 + distance)) and its keyword
    score (BM25 or ts_rank_cd over the best one's, 0..1). It says how well the row matches,
    so `relevance >= x` keeps its meaning under hybrid search; the rows' order is the
    fused ranking (`fused`), which is what decides which rows come first."""
    return alpha * vector_relevance + (1.0 - alpha) * keyword_score


def search(storage: SearchableStorage, embedder: Any, reranker: Any,
           request: SearchRequest) -> list[list[Any]]:
    """Semantic (optionally hybrid, optionally reranked) search over any storage (see
    storage.py); rows in KB_COLUMNS order."""
    check_request(request)
    if request.query is None:
        return storage.plain_rows(request.filters, request.limit)
    limit = DEFAULT_LIMIT if request.limit is None else int(request.limit)
    if limit == 0:
        return []
    query = embed_query(embedder, request.query)
    use_reranker = reranker is not None and request.rerank
    # alpha = 1 weighs the vector ranking alone: the plain search, with its relevance
    hybrid = request.hybrid and float(request.alpha) < 1.0
    fetch = max(limit, 50) if (hybrid or use_reranker) else limit
    # The index and the rows are read one after the other: a writer committing in between
    # (another thread or process upserting) can remove rows the index still returned. Then
    # the index is synced again and the search redone, so the rows come from one state.
    # Should writers keep winning, the last attempt holds this process's writers off while
    # it reads (a storage that can: `writers_held`), so it never answers with rows missing:
    # under load two upserting threads won four times in a row and a search answered none.
    for attempt in range(SEARCH_ATTEMPTS):
        last = attempt == SEARCH_ATTEMPTS - 1
        hold = getattr(storage, "writers_held", None) if last else None
        with hold() if hold is not None else contextlib.nullcontext():
            storage.sync()
            order, sims, keyword = _ranked(storage, query, fetch, request, hybrid)
            rows = storage.load_rows(order)
        if len(rows) == len(order) or last:
            break
    out = []
    for n, seq in enumerate(order):
        if n % 4096 == 4095:
            checkpoint()
        if seq not in rows:
            continue
        doc_id, chunk_id, content, metadata = rows[seq]
        distance = float(1.0 - sims[seq])
        relevance = 1.0 / (1.0 + distance)
        if hybrid:  # MindsDB's hybrid relevance (see hybrid_relevance); the order stays the fused one
            relevance = hybrid_relevance(relevance, keyword.get(seq, 0.0), float(request.alpha))
        out.append([doc_id, chunk_id, content, metadata, relevance, distance])  # (JSON text: `_decoded`)
    floor = request.min_relevance
    if use_reranker:
        candidates = out[:max(limit * 3, limit)]
        scores_r = reranker.score(request.query, [r[2] for r in candidates])
        for row, score in zip(candidates, scores_r, strict=True):
            row[4] = float(score)
        out = sorted(candidates, key=lambda r: -r[4])
        floor = RERANK_THRESHOLD if floor is None else floor  # the query's bound replaces it
        out = [r for r in out if r[4] > floor or (r[4] >= floor and not request.strict)]
    elif floor is not None:
        out = [r for r in out if r[4] > floor or (r[4] >= floor and not request.strict)]
    return _decoded(out[:limit])


def _decoded(rows: list[list[Any]]) -> list[list[Any]]:
    """The rows answered, their metadata JSON text parsed: only theirs, since a hybrid or
    reranked search reads 50 rows or more (`fetch`) to answer `limit` of them, and parsing
    every one cost it ~2 us a row (issue 37)."""
    for n, row in enumerate(rows):
        if n % 4096 == 4095:
            checkpoint()
        row[3] = json.loads(row[3])
    return rows
