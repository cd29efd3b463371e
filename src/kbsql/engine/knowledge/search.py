"""Search and plain reads over one knowledge base.

Filters are SQL on the chunk rows (metadata via json_extract), so a filtered search is the
true top-k among the matching rows: the filter yields candidate ids first and FAISS searches
only those (an IDSelector; exact on a flat index; an IVF index's candidates, or a small
filtered subset, are scored exactly from the stored vectors), never a post-filtered short
list. Result rows are always (id, chunk_id, chunk_content, metadata, relevance, distance),
best first; distance is the cosine distance and, without a reranker, relevance = 1 / (1 + distance).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kbsql.engine.knowledge.embeddings import embed_query
from kbsql.interface.errors import BadRequest

DEFAULT_LIMIT = 10
# query.mdx: "When the ranking model is provided, the default `relevance` is equal or greater
# than 0, unless defined otherwise in the WHERE clause" (MindsDB's reranker default is 0.0 too)
RERANK_THRESHOLD = 0.0
SEARCH_ATTEMPTS = 4  # index-then-rows reads redone when a concurrent write removed rows between
# Hybrid search (see `fused`): cosine + w x (BM25 / best BM25), w = (1 - alpha) / alpha x
# min(KEYWORD_MAX, KEYWORD_WEIGHT / terms^2), `terms` the query's distinct words that are not
# stop words. The keyword score breaks near-ties between vector matches of a question (four
# terms: w 0.044 at alpha 0.5) and leads for a lookup of one or two words (w 0.5, 0.175),
# where the words are the point. Measured on every evaluation set (bench_retrieval.py,
# results/retrieval.json); the blend it replaced (alpha / (2 - cosine) + (1 - alpha) x
# scaled keyword) let the keyword side lead every question and lost 0.15 MRR on two of
# three sets, and reciprocal rank fusion (k 10-60) won on one set and lost on another.
KEYWORD_WEIGHT = 0.7
KEYWORD_MAX = 0.5
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


def _ranked(storage: SearchableStorage, query: np.ndarray, fetch: int,
            request: SearchRequest) -> tuple[list[int], dict[int, float], dict[int, float]]:
    """(seqs best first, seq -> cosine similarity, seq -> ranking score) of one search."""
    scores, ids = storage.vector_top(query, fetch, request.filters)
    sims = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    ranking = dict(sims)  # seq -> ranking score
    if request.hybrid:
        keyword = storage.keyword_top(request.query or "", fetch, request.filters)
        missing = [s for s in keyword if s not in sims]
        sims.update(storage.similarities(query, missing))
        ranking = fused(sims, keyword, request.query or "", float(request.alpha))
    return sorted(ranking, key=lambda s: -ranking[s]), sims, ranking


def keyword_weight(query: str, alpha: float) -> float:
    """w of `fused` for this query text (see KEYWORD_WEIGHT)."""
    terms = {w.lower() for w in WORD.findall(query)} - STOP_WORDS
    return (1.0 - alpha) / alpha * min(KEYWORD_MAX, KEYWORD_WEIGHT / max(1, len(terms)) ** 2)


def fused(sims: dict[int, float], keyword: dict[int, float], query: str, alpha: float) -> dict[int, float]:
    """Each row's hybrid score on the cosine's scale ([-1, 1], 1 best): the cosine plus the
    weighted keyword score, over 1 + the weight. alpha = 1 gives the cosine itself (a plain
    vector search); alpha = 0 the keyword score, the cosine breaking its ties."""
    if alpha <= 0:
        return {s: (keyword.get(s, 0.0) + 1e-3 * sim) / (1 + 1e-3) for s, sim in sims.items()}
    weight = keyword_weight(query, alpha)
    return {s: (sim + weight * keyword.get(s, 0.0)) / (1 + weight) for s, sim in sims.items()}


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
    fetch = max(limit, 50) if (request.hybrid or use_reranker) else limit
    # The index and the rows are read one after the other: a writer committing in between
    # (another thread or process upserting) can remove rows the index still returned. Then
    # the index is synced again and the search redone, so the rows come from one state;
    # should writers keep winning, the last attempt keeps only the rows still there.
    for attempt in range(SEARCH_ATTEMPTS):
        storage.sync()
        order, sims, ranking = _ranked(storage, query, fetch, request)
        rows = storage.load_rows(order)
        if len(rows) == len(order) or attempt == SEARCH_ATTEMPTS - 1:
            break
    out = []
    for seq in order:
        if seq not in rows:
            continue
        doc_id, chunk_id, content, metadata = rows[seq]
        distance = float(1.0 - sims[seq])
        # hybrid: the fused score in place of the cosine, so alpha = 1 is a plain search
        relevance = 1.0 / (2.0 - ranking[seq]) if request.hybrid else 1.0 / (1.0 + distance)
        out.append([doc_id, chunk_id, content, json.loads(metadata), relevance, distance])
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
    return out[:limit]
