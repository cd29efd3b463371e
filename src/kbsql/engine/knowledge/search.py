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
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kbsql.engine.knowledge.store import metadata_expr
from kbsql.interface.errors import BadRequest

if TYPE_CHECKING:
    from kbsql.engine.knowledge.index import VectorIndex
    from kbsql.engine.knowledge.store import ChunkStore

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
STOP_WORDS = frozenset("""a about all also an and any are as at be been being both but by can could
did do does doing done each few for from further get got had has have how i if in into is it its
just like make me more most my no nor not now of on once only or other our out over own same
should so some such than that the their them then there these they this those to too under up
use using very want was we were what when where which who whom whose why will with would you
your""".split())
_OPS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
        "in": "IN", "not in": "NOT IN", "like": "LIKE", "not like": "NOT LIKE",
        "is": "IS", "is not": "IS NOT"}
_WORD = re.compile(r"\w+", re.UNICODE)


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


def filter_sql(filters: Conditions, alias: str = "") -> tuple[str, list[Any]]:
    """`WHERE`-ready SQL (without the keyword) and its parameters; '' when no filter."""
    args: list[Any] = []
    parts = [_condition_sql(f, alias, args) for f in filters]
    return " AND ".join(parts), args


def group_sql(group: FilterGroup, render: Callable[[Condition], str], true: str, false: str) -> str:
    """A group as one SQL condition, its items rendered by `render` (each storage's dialect;
    `true`/`false`: its literals, for an empty AND / OR)."""
    inner = [render(i) for i in group.items]
    if group.op == "not":
        return f"NOT ({inner[0]})"
    joiner = " OR " if group.op == "or" else " AND "
    return "(" + joiner.join(inner or [true if group.op == "and" else false]) + ")"


def _condition_sql(f: Filter | FilterGroup, alias: str, args: list[Any]) -> str:
    if isinstance(f, FilterGroup):
        return group_sql(f, lambda i: _condition_sql(i, alias, args), "1", "0")
    op = op_sql(f)
    column = f.column.lower()
    is_id = column in ("id", "chunk_id")
    if is_id:
        expr = f"{alias}{column}"
    elif column in ("chunk_content", "content"):
        expr = f"{alias}content"
    else:
        expr = metadata_expr(f.column, alias)
    value = f.value
    if is_id and op in ("<", "<=", ">", ">=") and isinstance(value, int | float):
        expr, is_id = f"CAST({expr} AS REAL)", False  # ids are text; `id < 40` means numbers
    if op in ("IN", "NOT IN"):
        values = list(value) if isinstance(value, list | tuple | set) else [value]
        if not values:
            return "0" if op == "IN" else "1"
        args.extend(_sql_value(v, is_id) for v in values)
        return f"{expr} {op} ({', '.join('?' * len(values))})"
    if op in ("IS", "IS NOT"):
        return f"{expr} {op} NULL"
    args.append(_sql_value(value, is_id))
    return f"{expr} {op} ?"


def _sql_value(value: Any, as_text: bool) -> Any:
    if as_text and value is not None:
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def plain_rows(store: ChunkStore, filters: Conditions, limit: int | None,
               offset: int = 0) -> list[list[Any]]:
    where, args = filter_sql(filters)
    sql = "SELECT id, chunk_id, content, metadata FROM chunks"
    if where:
        sql += f" WHERE {where}"
    sql += " ORDER BY seq"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        args = [*args, int(limit), int(offset)]
    return [[r[0], r[1], r[2], json.loads(r[3]), None, None] for r in store.query(sql, args)]


def matching_seqs(store: ChunkStore, filters: Conditions) -> np.ndarray:
    where, args = filter_sql(filters)
    rows = store.query(f"SELECT seq FROM chunks WHERE {where}", args)
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))


def _exact(store: ChunkStore, query: np.ndarray, seqs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k over a candidate subset, from the stored vectors (ties: lower seq first,
    as an exact index orders them)."""
    scores_all, ids_all = [], []
    dim = query.shape[0]
    for start in range(0, len(seqs), 20000):
        part = seqs[start:start + 20000].tolist()
        rows = store.query(f"SELECT seq, embedding FROM chunks WHERE seq IN ({','.join('?' * len(part))})",
                           part)
        if not rows:
            continue
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)
        scores_all.append(vectors @ query)
        ids_all.append(np.array([r[0] for r in rows], dtype=np.int64))
    if not scores_all:
        return np.empty(0, np.float32), np.empty(0, np.int64)
    scores, ids = np.concatenate(scores_all), np.concatenate(ids_all)
    top = np.lexsort((ids, -scores))[:k]
    return scores[top], ids[top]


def vector_top(store: ChunkStore, index: VectorIndex, query: np.ndarray, k: int,
               filters: Conditions) -> tuple[np.ndarray, np.ndarray]:
    """(cosine similarities, seqs) of the true top-k among rows matching `filters`."""
    allowed = matching_seqs(store, filters) if filters else None
    if allowed is not None and len(allowed) == 0:
        return np.empty(0, np.float32), np.empty(0, np.int64)
    scores, ids, exact = index.search(query, k, allowed)
    if not exact:  # approximate candidates: the true scores from the stored vectors decide
        scores, ids = _exact(store, query, ids, k)
    expected = min(k, index.live if allowed is None else len(allowed))
    if len(ids) < expected:  # IVF came back short under a selective filter
        scores, ids = _exact(store, query, allowed if allowed is not None else
                             np.array([r[0] for r in store.query("SELECT seq FROM chunks")], np.int64), k)
    return scores, ids


def keyword_top(store: ChunkStore, text: str, k: int, filters: Conditions) -> dict[int, float]:
    """BM25 (SQLite FTS5) scores scaled to [0, 1] by the best one, for rows matching `filters`."""
    words = _WORD.findall(text)
    if not words:
        return {}
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    where, args = filter_sql(filters, alias="c.")
    sql = ("SELECT f.rowid, bm25(chunks_fts) AS s FROM chunks_fts f JOIN chunks c ON c.seq = f.rowid "
           "WHERE chunks_fts MATCH ?" + (f" AND {where}" if where else "") + " ORDER BY s LIMIT ?")
    rows = store.query(sql, [match, *args, k])
    if not rows:
        return {}
    best = max(-r[1] for r in rows) or 1.0
    return {int(r[0]): max(0.0, -r[1]) / best for r in rows}


def similarities(store: ChunkStore, query: np.ndarray, seqs: list[int]) -> dict[int, float]:
    if not seqs:
        return {}
    scores, ids = _exact(store, query, np.array(seqs, np.int64), len(seqs))
    return dict(zip(ids.tolist(), scores.tolist(), strict=True))


def load_rows(store: ChunkStore, seqs: list[int]) -> dict[int, tuple[Any, ...]]:
    out: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(seqs), 900):
        part = seqs[start:start + 900]
        for r in store.query("SELECT seq, id, chunk_id, content, metadata FROM chunks WHERE seq IN "
                             f"({','.join('?' * len(part))})", part):
            out[int(r[0])] = r[1:]
    return out


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
    terms = {w.lower() for w in _WORD.findall(query)} - STOP_WORDS
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
    query = embedder.embed([request.query])[0]
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
