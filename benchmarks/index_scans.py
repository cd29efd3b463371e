"""Indexes that scan every row's short code, then re-score a pool exactly (issue 37, item 2).

Every cell and graph structure of bench_index_curve / index_structures reached the targets
only by reading ~30% of the rows: on hash-384 vectors many true top-10 rows are copies whose
unique token hashed into a query word's bucket, so they sit in no cell or graph region near
the query (`boosted`). A scan of all rows finds such needles wherever they are; what it
costs is the code read per row, so these candidates make the code short and the scan SIMD,
and the `k_factor` x 10 best by the code are re-scored exactly from the float32 vectors
(bench_index_curve's `measure`, as kbsql's search re-scores its IVF candidates).
- `pqfs`: FAISS `IndexPQFastScan`, 4-bit product quantizer (M sub-quantizers of 384 / M
  dimensions, M / 2 bytes a vector), scanned with in-register lookup tables;
- `pqfs_rot`: the same after a random rotation (`RR384`). hash-384 vectors are sparse (a
  few signed buckets per text), so a plain sub-quantizer's 16 centroids fit its few
  dimensions badly; rotated, every sub-vector carries a share of every bucket;
- `pqfs_refine`: rotated PQ, its best `k_factor` x 20 re-scored from codes held in memory
  (float16 as the shipped IVF holds, or 8-bit), the best 20 re-scored exactly: kbsql reads
  the exact vectors from SQLite (~10 us a row), so its exact pool must stay at rerank 2 x k.
  Filtered (10% of rows): a fast scan takes no selector, so the float16 codes of the allowed
  rows are scanned (`IDSelectorBatch`, as kbsql's filtered IVF search), 20 re-scored exactly;
- `ivfpqfs`: rotated PQ codes in IVF cells (`IndexIVFPQFastScan`, 4 sqrt(N) cells),
  many probed, refined from float16 like `pqfs_refine` (the flat scan grows with N);
- `binary`: sign bits (384 bits, 48 bytes) of (x - mean) or of x after a random rotation,
  `IndexBinaryFlat` Hamming scan of all rows (the query's bits likewise);
- `rabitq`: FAISS RaBitQ after a random rotation (1 bit a dimension, an inner-product
  estimate from the float query rather than a Hamming count);
- `sq`: `IndexScalarQuantizer` 8-bit and 4-bit flat scans, the reference point.
Each point records the build seconds (training on TRAIN rows spread over the corpus, one
thread, + add on all cores) and the index's bytes per vector (its serialised size / rows: codes,
rotation, codebooks); the float32 vectors of the exact re-score live in SQLite in kbsql.

Found (index_curve.json, 100k, load 0.4-0.9): without the rotation PQ stays below 0.97 even
re-scoring 1,000 (worst decile 0.42), sign bits of x - mean below 0.5; rotated, PQ192 refined
from float16 (k_factor 10) gives 0.998 mean, worst decile 0.93, p50 0.57 ms, and through the
engine's path 0.998 / 0.94 on the tuning kinds, >= 0.996 / 0.96 held out
(bench_vs_chroma --index-candidate, vs_chroma_candidate.json). At 1M the scan of every code
is the cost (index_curve_1000k.json: PQ192 9-10 ms p50, PQ96 ~3 ms but 0.95-0.98), and IVF
cells over the same codes miss the needles again (0.93 at 30% of the cells).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import faiss
import numpy as np

K = 10
FETCH = 2 * K  # the exact re-score pool of the refined candidates: kbsql's default rerank 2
TRAIN = 50_000  # rows the quantizers are trained on (at least 40 a cell), spread evenly
FILTER = "id % 10 == 3"  # 10% of the rows, as bench_vs_chroma's g = 3
Point = tuple[str, dict, Callable[[], Callable[[np.ndarray], np.ndarray]]]


def _sample(x: np.ndarray, size: int) -> np.ndarray:
    size = min(size, len(x))
    return np.ascontiguousarray(x[np.arange(size, dtype=np.int64) * len(x) // size])


def allowed(rows: int) -> np.ndarray:
    return np.arange(3, rows, 10, dtype=np.int64)


def filtered_sets(x: np.ndarray, sets: dict) -> dict:
    """The same queries with their exact top 10 among the FILTER rows (global ids)."""
    ids = allowed(len(x))
    flat = faiss.IndexIDMap(faiss.IndexFlatIP(x.shape[1]))
    flat.add_with_ids(x[ids], ids)
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    out = {kind: (q, flat.search(q, K)) for kind, (q, _) in sets.items()}
    faiss.omp_set_num_threads(1)
    return out


def built(spec: str, x: np.ndarray) -> tuple[object, dict]:
    """(index, its build seconds and bytes per vector) from a FAISS factory string.

    Trained on one thread, added on all cores: a product quantizer's training is many tiny
    k-means (16 centroids per sub-quantizer), and with two OpenMP threads on a busy 2-core
    machine each of their parallel steps waited for a descheduled thread: RR384,PQ192x4fs
    trained on 50k rows in 16-45 s on two threads, 1.3-2.2 s on one (load 6.9)."""
    index = faiss.index_factory(x.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.try_extract_index_ivf(index)
    t0 = time.perf_counter()
    index.train(_sample(x, max(TRAIN, 40 * (ivf.nlist if ivf else 0))))
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    index.add(x)
    build = round(time.perf_counter() - t0, 1)
    faiss.omp_set_num_threads(1)
    size = len(faiss.serialize_index(index))
    return index, {"spec": spec, "build_s": build, "bytes_per_vector": round(size / len(x), 1)}


def float_scans(x: np.ndarray, only: set[str]) -> Iterator[Point]:
    """(curve, point fields, -> search) for every float-query candidate of `only`."""
    def pool(curve: str, index, fetch: int, **fields) -> Point:
        return curve, fields, lambda: lambda row: index.search(row[None], fetch)[1][0]

    dim = x.shape[1]
    for curve, specs, factors in (("pqfs", [f"PQ{m}x4fs" for m in (48, 96, 192)], (5, 20, 50, 100)),
                                  ("pqfs_rot", [f"RR{dim},PQ{m}x4fs" for m in (96, 192)], (10, 20, 50)),
                                  ("rabitq", [f"RR{dim},RaBitQ"], (10, 20, 50)),
                                  ("sq", ["SQ8", "SQ4"], (2, 5, 20))):
        for spec in specs if curve in only else ():
            index, fields = built(spec, x)
            yield from (pool(curve, index, kf * K, **fields, k_factor=kf) for kf in factors)
    cells = int(4 * np.sqrt(len(x)))
    refined = [(f"RR{dim},PQ{m}x4fs,Refine({r})", (0.0,)) for m in (96, 192) for r in ("SQfp16", "SQ8")]
    ivf = [(f"RR{dim},IVF{cells},PQ192x4fs,Refine(SQfp16)", (0.08, 0.15, 0.3))]
    for curve, specs in (("pqfs_refine", refined), ("ivfpqfs", ivf)):
        for spec, shares in specs if curve in only else ():
            index, fields = built(spec, x)
            for share in shares:
                if share:  # the share of the cells probed
                    faiss.extract_index_ivf(index).nprobe = nprobe = round(share * cells)
                    fields = {**fields, "cells": cells, "nprobe": nprobe}
                for kf in (10, 25, 50):
                    params = faiss.IndexRefineSearchParameters(k_factor=kf)
                    yield curve, {**fields, "refine_k_factor": kf, "exact_pool": FETCH}, \
                        lambda i=index, p=params: lambda row: i.search(row[None], FETCH, params=p)[1][0]
            if curve == "pqfs_refine":  # a fast scan takes no selector: the refine codes do
                codes = faiss.downcast_index(index.refine_index)
                params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed(len(x))))
                yield curve, {**fields, "filter": FILTER, "filtered_by": "refine codes, IDSelectorBatch",
                              "exact_pool": FETCH}, \
                    lambda c=codes, p=params: lambda row: c.search(row[None], FETCH, params=p)[1][0]


def binary_scans(x: np.ndarray, only: set[str]) -> Iterator[Point]:
    """Sign bits of (x - mean) and of a random rotation of x, Hamming-scanned."""
    if "binary" not in only:
        return
    dim = x.shape[1]
    rotation = np.linalg.qr(np.random.default_rng(37).standard_normal((dim, dim)))[0].astype(np.float32)
    mean = x.mean(0)
    for name, code in (("mean", lambda v: v - mean), ("rotation", lambda v: v @ rotation)):
        t0 = time.perf_counter()
        index = faiss.IndexBinaryFlat(dim)
        for start in range(0, len(x), 20_000):
            index.add(np.packbits(code(x[start:start + 20_000]) > 0, axis=1))
        build = round(time.perf_counter() - t0, 1)
        fields = {"bits_of": name, "build_s": build, "bytes_per_vector": dim // 8}
        for kf in (5, 20, 50, 100):
            yield "binary", {**fields, "k_factor": kf}, lambda i=index, c=code, f=kf * K: \
                lambda row: i.search(np.packbits(c(row[None]) > 0, axis=1), f)[1][0]


def sweep(x: np.ndarray, sets: dict, only: set[str], measure: Callable) -> dict[str, list]:
    """Every candidate of `only`, each at its pool sizes, measured by bench_index_curve's `measure`."""
    curves: dict[str, list] = {}
    under_filter = filtered_sets(x, sets) if "pqfs_refine" in only else {}
    for scans in (float_scans, binary_scans):
        for curve, fields, search in scans(x, only):
            point = measure(search(), x, under_filter if "filter" in fields else sets)
            curves.setdefault(curve, []).append({**fields, **point})
    return curves
