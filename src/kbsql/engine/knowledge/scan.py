"""The `scan` kind of the vector index (index.py): every row's 4-bit code scanned, no cells.

What it is: `IndexIDMap2(IndexRefine(RR{d},PQ{m}x4fs, SQfp16))`. The vectors are turned by a
random rotation and cut into m sub-vectors, each given a 4-bit product-quantizer code (m half
bytes a row) that FAISS scans with in-register lookup tables; the best `refine` x fetch rows by
that code are re-scored from float16 codes held in memory (the same codes the IVF holds), and
the best fetch (`rerank` x k) of those are re-scored exactly from SQLite by the caller, as the
IVF's candidates are.

Why (issue 37): on the queries people type (phrases, questions, far queries) many true top-10
rows are copies whose unique token hashed into a query word's bucket; they sit in no IVF cell
near the query, so the shipped IVF found 0.95 mean / 0.30 worst decile at 100k and reached
0.97 / 0.8 only by probing ~30% of the cells. A scan finds them wherever they are. Without the
rotation the 4-bit codes of sparse hash vectors were too coarse (0.969 / 0.42 re-scoring
1,000); rotated and refined from float16: 0.998 mean, worst decile 0.93, 0.57 ms at 100k with
FAISS alone (benchmarks/index_scans.py, results/index_curve.json).

Its size by the rows (benchmarks/bench_scan_range.py, results/scan_range_refine.json: FAISS
alone, tie-aware recall@10 mean of kinds / lowest worst decile / p50, loaded machine):
- The refine pool: re-scoring more from float16 is nearly free next to the code scan up to a
  pool of ~500 rows, and the closer the rows crowd, the more of the true top 10 a short pool
  loses. d/2 codes with refine 10 -> 25: at 150k 0.994 / 0.82 / 0.86 ms -> 1.0 / 0.98 / 0.87;
  at 600k 0.978 / 0.62 / 2.56 -> 0.998 / 0.96 / 2.69; at 1M 25 -> 50: 0.991 / 0.78 -> 0.999 /
  0.98. Hence REFINE, growing with the rows past REFINE_ROWS (`auto_refine`).
- A smaller pool at 100k, measured through the engine and not taken (issue 37's p50 at most
  half Chroma's; benchmarks/search_curve.py, results/search_curve.json, every setting in one
  process, load 3-4.8): refine 25 / 20 / 15 / 10 found 0.9996 / 0.9990 / 0.9978 / 0.9968 mean,
  0.98 / 0.95 / 0.89 / 0.85 worst decile on the weakest kind (questions people type), in
  0.86 / 0.82 / 0.79 / 0.76 ms p50: 15 saves 0.06-0.07 ms (6-8%), still far from half of
  Chroma's p50, for a tenth of the true top 10 lost on the questions that find least. The
  code scan (~0.5 ms, whatever the pool) is what would have to get cheaper; d/4 codes are no
  faster at 100k for equal recall (results/search_curve_codes.json).
  How much refine 15 loses depends on the codebooks' training draw: 0.89 worst decile with
  the ingest's (trained at 95k rows), 0.94-0.98 with four other samples of the 100k rows.
- Other ways to a cheaper search at 100k, measured and not taken (FAISS alone on
  bench_vs_chroma's 750 queries, and through the engine: results/search_curve_rescore.json,
  _rebuilt, _float32): IVF cells over these same 4-bit codes miss the needles again (256
  cells, half of them probed: 0.78 worst decile, 6% faster than this scan; probes chosen per
  query from the centroid scores: 0.04-0.06); FAISS 1.15's RaBitQ fast scan (1 bit a
  dimension) needs a pool of 50 to match and takes 2.3x this scan's time, its multi-bit and
  IVF forms 5-14x; HNSW over 8-bit codes finds 0.82 mean / 0.02 worst decile at efSearch
  1024. Without the exact re-score from SQLite a search is 0.10-0.14 ms faster (~0.2 ms
  filtered), but the float16 order misranks near-copies' near-ties (worst decile 0.86) and
  its distances are off by up to 4e-4; refining from float32 (`Refine(Flat)`) keeps the exact
  answers without the re-score, but holds the vectors twice: +73 MB of peak RSS at 100k when
  opened and searched (+86-92 while built), which would take kbsql's search above Chroma's
  (291 MB against 324-343).
- The code length: past ~600k rows the scan of d/2 codes grows faster than the rows (7.7-8.6 ms
  at 1M, the codes out of the CPU's caches) while d/4 codes scan in half the time or less and
  need a larger pool: at 600k d/4 refine 100 0.994 / 0.80 / 2.26 ms against d/2 refine 25's
  2.69; at 1M d/4 refine 100 0.987 / 0.72 / 3.3 ms, refine 200 0.997 / 0.88 / 4.9, against d/2
  refine 50's 0.999 / 0.98 / 8.6. Hence FINE_ROWS and COARSE_REFINE, 100 at up to 500k rows,
  200 at 1M (the worst decile of questions 0.72 at 100, 0.88 at 200, for +1.6 ms).

What FAISS cannot do here, and what is done instead:
- Remove ids (IndexRefine does not implement remove_ids; in FAISS 1.15 its two parts each
  do, but removing from both in step with the id map is not built here, and would be the way
  to compact without a second index in memory). Deleted rows stay in the index as tombstones
  (`dead`) that a search never answers: the code scan asks for refine x fetch + len(dead) rows,
  drops the dead ones and re-scores the best refine x fetch live ones, the very pool an index
  without the dead rows would have had (`_search_past`). The index is rebuilt once the dead
  pass `compact_due`: the scan's heap grows with them (+0.1 ms a search at 1,000 tombstones in
  100k rows, +0.4 at 5,000).
- Take a selector (a fast scan has none). A filtered search scans the float16 codes of the
  allowed rows only, as the filtered IVF search scores every allowed row's code:
  k + FILTER_MARGIN candidates, far more than the float16 error (~1e-4 in cosine) can
  reorder. The selector is of the rows' positions in the codes (`positions`), not of their
  ids through FAISS's IDSelectorTranslated, whose two lookups for each of the 100k rows
  made a 10% filter's search ~1.7 ms (20%) slower than the IVF's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

FINE_ROWS = 600_000  # rows up to which a scan's codes are d/2 4-bit sub-quantizers, d/4 above
REFINE, REFINE_ROWS = 25, 500_000  # the refine pool of d/2 codes: 25 up to 500k rows, growing past
COARSE_REFINE, COARSE_ROWS = 100, 500_000  # of d/4 codes: 100 up to 500k rows, growing past
# rows of a pool scored from float16 at once under tombstones (_search_past): the pool is
# refine x fetch rows, 100 x 2,000 for a LIMIT 1000 on d/4 codes, and its float16 and float32
# copies took 232 MB at 100k rows (460 MB at 1M); a batch's take ~37 MB at 384 dimensions
POOL_BATCH = 16_384
DEAD_SHARE = 0.01  # rebuild once this share of the index is tombstones ...
DEAD_FLOOR = 256  # ... and at least this many (a small index is rebuilt in milliseconds anyway)


def _faiss() -> Any:
    """faiss, imported at first use (index_build.py's _LazyFaiss says why)."""
    import faiss

    return faiss


def usable(dim: int) -> bool:
    """A 4-bit code per pair of dimensions needs an even dimension."""
    return dim % 2 == 0


def sub_quantizers(dim: int, rows: int) -> int:
    """The 4-bit sub-quantizers of a scan that will hold up to `rows` rows before it is trained
    again (index.py: twice the rows it is built on): d/2 up to FINE_ROWS, d/4 above (when d/4
    divides the dimension), the code scanned being half as long. (Chosen by the rows it is built
    on, a scan built at 590k rows scanned d/2 codes of up to 1.18M rows, 8.6 ms at 1M.)"""
    return dim // 4 if rows > FINE_ROWS and dim % 4 == 0 else dim // 2


def make_scan(dim: int, sample: np.ndarray, rows: int = 0) -> Any:
    """An empty scan index for `rows` rows (`sub_quantizers`) whose rotation and codebooks are
    trained on `sample`.

    Trained on one thread: FAISS's PQ training on 2 threads of this 2-core machine took
    16-45 s for 50k rows against 1.3-2.2 s on one (index9's report). (One thread is also
    what index.py keeps outside its bulk adds.)"""
    faiss = _faiss()
    faiss.omp_set_num_threads(1)
    codes = sub_quantizers(dim, rows)
    inner = faiss.index_factory(dim, f"RR{dim},PQ{codes}x4fs,Refine(SQfp16)", faiss.METRIC_INNER_PRODUCT)
    inner.train(np.ascontiguousarray(sample, dtype=np.float32))
    return faiss.IndexIDMap2(inner)


def code_length(index: Any) -> int:
    """The sub-quantizers of a built scan (`sub_quantizers` when it was built)."""
    faiss = _faiss()
    rotated = faiss.downcast_index(faiss.downcast_index(index.index).base_index)
    return int(faiss.downcast_index(rotated.index).M)


def code_buffers(index: Any) -> list[tuple[int, int]]:
    """(address, bytes) of a built scan's two code arrays, FAISS's own: the 4-bit codes every
    search scans and the float16 codes it refines from (huge_pages.py backs them)."""
    faiss = _faiss()
    refined = faiss.downcast_index(index.index)
    fast = faiss.downcast_index(faiss.downcast_index(refined.base_index).index)
    half = faiss.downcast_index(refined.refine_index)
    arrays = ((fast.codes.get(), int(fast.codes.nbytes())), (half.codes.data(), int(half.codes.size())))
    return [(int(faiss.rev_swig_ptr(at, 1).ctypes.data), size) for at, size in arrays if size]


def auto_refine(codes: int, dim: int, live: int) -> int:
    """The refine pool (rows re-scored from float16 per candidate) of a scan of `live` rows and
    `codes` sub-quantizers, when the knowledge base sets none (settings.py): REFINE for d/2
    codes, COARSE_REFINE for d/4, each growing with the rows past its size (module docstring)."""
    per, rows = (REFINE, REFINE_ROWS) if codes * 2 >= dim else (COARSE_REFINE, COARSE_ROWS)
    return max(per, math.ceil(per * live / rows))


def compact_due(dead: int, total: int) -> bool:
    return dead > max(DEAD_FLOOR, DEAD_SHARE * total)


def emptied(index: Any) -> Any:
    """A copy of the scan `index` without its rows: the same rotation and codebooks (a clone,
    emptied), so a compaction need not train again. The caller holds the index's lock."""
    fresh = _faiss().clone_index(index)
    fresh.reset()
    return fresh


def compacted(fresh: Any, batches: Iterator[list[tuple[Any, ...]]], dim: int) -> tuple[Any, int, int]:
    """(`fresh`, an `emptied` scan, holding the rows of `batches`; their store version; their
    highest seq). `batches`: (seq, embedding, version) rows in seq order from one committed
    state. Built without the index's lock, so searches go on meanwhile on the old one
    (VectorIndex.compact)."""
    version = max_seq = 0
    for rows in batches:
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        fresh.add_with_ids(np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(-1, dim), ids)
        version, max_seq = int(rows[0][2]), int(ids[-1])
    return fresh, version, max_seq


def positions(index: Any, ids: np.ndarray) -> np.ndarray:
    """The positions in the codes of `ids` (rows of the index; others are dropped): the id map
    is ascending, since rows are added in seq order and a scan never removes one."""
    id_map = _id_map(index)
    at = np.minimum(np.searchsorted(id_map, ids), len(id_map) - 1)
    return at[id_map[at] == ids]


def alive(ids: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """Which of `ids` are not tombstones (`dead`, sorted): a binary search each, so a filter's
    10k rows against 2k tombstones cost ~0.1 ms, not a sort of both."""
    if len(dead) == 0 or len(ids) == 0:
        return np.ones(len(ids), bool)
    return dead[np.minimum(np.searchsorted(dead, ids), len(dead) - 1)] != ids


def search(index: Any, query: np.ndarray, fetch: int, refine: int, dead: np.ndarray,
           selector: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(float16 scores, ids) of the best `fetch` live rows: among all of them, or among those
    `selector` (a FAISS selector of `positions`) lets through. `dead`: the tombstones, sorted."""
    faiss = _faiss()
    q = query.reshape(1, -1)
    if selector is not None:  # the allowed rows' float16 codes, each one scored
        codes = faiss.downcast_index(faiss.downcast_index(index.index).refine_index)
        scores, inner = codes.search(q, fetch, params=faiss.SearchParameters(sel=selector))
        inner = inner[0][inner[0] >= 0]
        return scores[0][:len(inner)], _id_map(index)[inner]
    if len(dead) == 0:
        scores, ids = index.search(q, fetch, params=shared_params("refine", refine))
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]
    return _search_past(index, query, fetch, refine * fetch, dead)


@functools.cache
def shared_params(kind: str, value: float) -> Any:
    """FAISS search parameters without a selector, made once per value: `refine` (the scan's
    k_factor) or `nprobe` (an unfiltered IVF search). A fresh parameters object made the
    engine's search ~20 us slower (of ~1 ms, paired at 100k rows), and FAISS only reads it, so
    concurrent searches may share it. (A selector's parameters are made per search.)"""
    faiss = _faiss()
    return faiss.IndexRefineSearchParameters(k_factor=float(value)) if kind == "refine" else \
        faiss.SearchParametersIVF(nprobe=int(value))


def _id_map(index: Any) -> np.ndarray:
    """The ids of the rows by position: a view of the IndexIDMap2's own array (no copy; valid
    until the index changes, which the caller's lock prevents)."""
    return _faiss().rev_swig_ptr(index.id_map.data(), index.ntotal)


def _search_past(index: Any, query: np.ndarray, fetch: int, pool: int,
                 dead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The search with tombstones: the code scan asks for len(dead) more rows, the dead ones
    are dropped, and the best `pool` live rows by code (at least those an index without the
    dead rows would have pooled) are scored from their float16 codes here. (IndexRefine
    itself would re-score the dead ones too: with 1,000 tombstones that cost +1.1 ms a search
    at 100k rows, this +0.1 ms.)"""
    faiss = _faiss()
    refined = faiss.downcast_index(index.index)
    base, codes = faiss.downcast_index(refined.base_index), faiss.downcast_index(refined.refine_index)
    _, inner = base.search(query.reshape(1, -1), min(pool + len(dead), index.ntotal))
    inner = inner[0][inner[0] >= 0]
    ids = _id_map(index)[inner]
    keep = alive(ids, dead)
    inner, ids = inner[keep][:pool], ids[keep][:pool]
    dim = query.shape[0]
    half = faiss.rev_swig_ptr(codes.codes.data(), index.ntotal * codes.code_size)
    rows = half.view(np.float16).reshape(index.ntotal, dim)
    scores = np.empty(len(inner), np.float32)
    for at in range(0, len(inner), POOL_BATCH):  # a float32 copy of a batch, not of the pool
        scores[at:at + POOL_BATCH] = rows[inner[at:at + POOL_BATCH]].astype(np.float32) @ query
    best = np.argsort(-scores, kind="stable")[:fetch]
    return scores[best], ids[best]
