"""The index candidates of issue 37, measured on the queries people type, before choosing.

Run: `python benchmarks/bench_index_curve.py [--docs 100000] [--queries 100]
[--only ivf,adaptive,rerank,hnsw_coarse,hnsw,spill,collapse,boosted,
 pqfs,pqfs_rot,pqfs_refine,ivfpqfs,binary,rabitq,sq]
[--cells 1,2,4] [--keep]`.
Prints JSON and writes benchmarks/results/index_curve.json (above 100k docs:
index_curve_<N>k.json); `--keep` keeps the curves of that file that this run did not measure
(each curve says the load it was measured under in `loads`).

Vectors: kbsql's `hash-384` over the near-duplicate corpus (benchmarks/neardup.py), the same
as bench_vs_chroma's. Queries: `neardup.workloads` (near-copies, short phrases, questions,
paraphrases, queries far from any document), each kind reported apart, mean and worst-decile
tie-aware recall@10, plus unfiltered p50 of a bare search on one thread (candidates from the
index, then the exact re-score of the candidates from the float32 vectors, as kbsql's search
does). Only the tuning queries are used here: the held-out ones (`neardup.HELDOUT_SEED`)
are measured by bench_vs_chroma on what ships, never to choose.

Candidates (issue 37, item 2):
- `ivf`: kbsql's IVF (float16 codes), 1, 2 and 4 sqrt(N) cells, nprobe swept over the same
  shares of the cells (the share is what a search scans);
- `adaptive`: the 4 sqrt(N) index, the cells chosen per query from the centroid scores:
  every cell scoring at least `ratio` x the best among the first `cap`, at least `floor`;
- `rerank`: a larger exact re-score pool (rerank x 10 candidates) at the default nprobe;
- `hnsw_coarse`: IVF whose coarse quantizer is an HNSW graph, with more (smaller) cells;
- `hnsw`: FAISS HNSW flat (M 32), efSearch swept.
Structures (the step after those, index_structures.py):
- `spill`: each vector in its two IVF cells (the second chosen SOAR-like), results deduped;
- `collapse`: near-identical vectors grouped under one representative, the groups of the
  best-scoring representatives expanded and re-scored;
- `boosted`: not an index, the reason: per kind, the share of the exact top 10 that score
  above their own paragraph's other copies (hash-384 put their unique token in the bucket of
  a query word), needles no cell or group structure can point to.
Scans (the step after those, index_scans.py): every row's short code read (4-bit PQ fast
scan, sign bits, RaBitQ, 8/4-bit scalar codes), a pool of k_factor x 10 re-scored exactly.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import index_scans  # noqa: E402
import index_structures  # noqa: E402
import neardup  # noqa: E402

from kbsql.engine.knowledge import index_build  # noqa: E402
from kbsql.engine.knowledge import ivf as ivf_mod  # noqa: E402
from kbsql.engine.models.embeddings import HashEmbedder  # noqa: E402

DIM = 384  # hash-384, as bench_vs_chroma; --dim N measures hash-N (fewer bucket collisions)
K = 10
Search = Callable[[np.ndarray], np.ndarray]  # one query vector -> candidate ids


def corpus(docs: int) -> np.ndarray:
    emb = HashEmbedder(DIM)
    out = np.empty((docs, DIM), np.float32)
    for start in range(0, docs, 20_000):
        n = min(20_000, docs - start)
        out[start:start + n] = emb.embed(neardup.documents(n, start))
    return out


def exact(x: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = faiss.IndexFlatIP(DIM)
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    flat.add(x)
    scores, ids = flat.search(q, K)
    faiss.omp_set_num_threads(1)
    return scores, ids


def measure(search: Search, x: np.ndarray, sets: dict[str, tuple[np.ndarray, tuple]]) -> dict:
    """Per query kind: recall summary; over all of them: p50 of candidates + exact re-score."""
    out, times = {}, []
    for kind, (q, (e_scores, e_ids)) in sets.items():
        for row in q[:10]:
            search(row)  # warm
        got_ids, got_scores = [], []
        for row in q:
            t = time.perf_counter()
            cand = search(row)
            cand = cand[cand >= 0]
            scores = x[cand] @ row  # the exact re-score
            top = np.argsort(-scores, kind="stable")[:K]
            times.append(time.perf_counter() - t)
            got_ids.append(cand[top])
            got_scores.append(scores[top])
        ties, _ = neardup.recall_per_query(got_ids, got_scores, e_ids, e_scores)
        out[kind] = neardup.summary(ties)
    print(json.dumps({k: (v["mean"], v["worst_decile"]) for k, v in out.items()}), file=sys.stderr)
    every = np.concatenate([[v["mean"]] for v in out.values()])
    out["all"] = {"mean_of_kinds": round(float(every.mean()), 4),
                  "worst_decile_min": min(v["worst_decile"] for v in out.values() if isinstance(v, dict)),
                  "p50_ms": round(float(np.percentile(times, 50)) * 1000, 3),
                  "p90_ms": round(float(np.percentile(times, 90)) * 1000, 3)}
    return out


def ivf_index(x: np.ndarray, nlist: int = 0, quantizer: str = "flat") -> object:
    """Cells trained as the engine trains them: on TRAIN_PER_LIST rows per cell spread evenly
    over the rows (index_build.training_sample; the whole of 1M rows took k-means 20+ min).
    The 100k curve committed with issue 37 was trained on all rows; its shipped-default
    point matches the engine's own in vs_chroma.json (far queries 0.866 vs 0.858)."""
    nlist = nlist or ivf_mod.auto_nlist(len(x))
    size = min(len(x), nlist * ivf_mod.TRAIN_PER_LIST)
    sample = x[np.arange(size, dtype=np.int64) * len(x) // size]
    if quantizer == "flat":
        index = index_build.make_index(DIM, "ivf", sample, nlist)
    else:  # the same training, then the centroids moved into an HNSW graph
        trained = index_build.make_index(DIM, "ivf", sample, nlist)
        centroids = trained.quantizer.reconstruct_n(0, trained.nlist)
        hnsw = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = 80
        hnsw.add(centroids)
        index = faiss.IndexIVFScalarQuantizer(hnsw, DIM, trained.nlist, faiss.ScalarQuantizer.QT_fp16,
                                              faiss.METRIC_INNER_PRODUCT)
        index.is_trained = True
        index.sq.train(x[:1000])  # (faiss's wrapper keeps the quantizer alive with the index)
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    index.add_with_ids(x, np.arange(len(x), dtype=np.int64))
    faiss.omp_set_num_threads(1)
    return index


def ivf_search(index, nprobe: int, fetch: int) -> Search:
    params = faiss.SearchParametersIVF(nprobe=nprobe)
    return lambda row: index.search(row[None], fetch, params=params)[1][0]


def adaptive_search(index, floor: int, cap: int, ratio: float, fetch: int) -> Search:
    """Cells whose centroid scores at least `ratio` x the best (of the first `cap`), >= floor:
    a query close to one cell probes few, a short query (low, flat centroid scores) many."""
    quantizer = index.quantizer

    def search(row: np.ndarray) -> np.ndarray:
        q = row[None]
        dist, cells = quantizer.search(q, cap)
        n = max(floor, int(np.sum(dist[0] >= dist[0][0] * ratio)))
        cells[:, n:] = -1  # faiss skips a negative cell: the first n are probed
        index.nprobe = cap
        _, ids = index.search_preassigned(q, fetch, cells, dist)
        return ids[0]
    return search


def sweep_ivf(x: np.ndarray, sets: dict, only: set[str], mults: tuple[int, ...]) -> dict[str, list]:
    """kbsql's IVF: cells (1, 2, 4 sqrt(N)) x nprobe at the same scanned share, a larger
    re-score pool, and cells chosen per query from the centroid scores."""
    curves: dict[str, list] = {}
    root = math.sqrt(len(x))
    for mult in mults if "ivf" in only else (4,):
        index = ivf_index(x, int(mult * root))
        if "ivf" in only:  # 4%, 8%, 15%, 30% of the cells
            for share in (0.04, 0.08, 0.15, 0.3):
                nprobe = max(1, round(share * index.nlist))
                point = measure(ivf_search(index, nprobe, 2 * K), x, sets)
                curves.setdefault("ivf", []).append({"cells": index.nlist, "nprobe": nprobe, **point})
        if mult == 4 and "rerank" in only:
            curves["rerank"] = [{"cells": index.nlist, "nprobe": 48, "rerank": r,
                                 **measure(ivf_search(index, 48, r * K), x, sets)} for r in (5, 10)]
        if mult == 4 and "adaptive" in only:
            curves["adaptive"] = [{"cells": index.nlist, "floor": f, "cap": c, "ratio": r,
                                   **measure(adaptive_search(index, f, c, r, 2 * K), x, sets)}
                                  for f, c, r in ((32, 384, 0.8), (32, 384, 0.7), (32, 384, 0.6),
                                                  (48, 512, 0.5))]
        del index
    return curves


def sweep_hnsw_coarse(x: np.ndarray, sets: dict) -> list[dict]:
    """IVF with an HNSW graph over the centroids: a cheaper coarse search, so more cells."""
    out = []
    for mult in (4, 16):
        index = ivf_index(x, int(mult * math.sqrt(len(x))), "hnsw")
        for nprobe in (48, 128, 256):
            params = faiss.SearchParametersIVF(nprobe=nprobe)
            params.quantizer_params = faiss.SearchParametersHNSW(efSearch=max(64, 2 * nprobe))
            out.append({"cells": index.nlist, "nprobe": nprobe, **measure(
                lambda row, p=params, i=index: i.search(row[None], 2 * K, params=p)[1][0], x, sets)})
        del index
    return out


def sweep_hnsw(x: np.ndarray, sets: dict) -> list[dict]:
    """FAISS HNSW flat (M 32, efConstruction 64), efSearch swept."""
    index = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 64
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    t0 = time.perf_counter()
    index.add(x)
    build = round(time.perf_counter() - t0, 1)
    faiss.omp_set_num_threads(1)
    out = []
    for ef in (64, 256, 512):
        params = faiss.SearchParametersHNSW(efSearch=ef)
        out.append({"M": 32, "efConstruction": 64, "efSearch": ef, "build_s": build, **measure(
            lambda row, p=params: index.search(row[None], 2 * K, params=p)[1][0], x, sets)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100, help="per kind, tuning seed")
    parser.add_argument("--only", default="ivf,adaptive,rerank,hnsw_coarse,hnsw,spill,collapse,boosted")
    parser.add_argument("--cells", default="1,2,4", help="IVF cells swept, in sqrt(N)s (4: kbsql's)")
    parser.add_argument("--keep", action="store_true", help="keep the results file's other curves")
    parser.add_argument("--dim", type=int, default=DIM, help="hash-N vectors (results file _hashN)")
    args = parser.parse_args()
    globals()["DIM"] = args.dim
    from report import write_report

    only = set(args.only.split(","))
    report: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]},
                    "workload": {"docs": args.docs, "queries_per_kind": args.queries,
                                 "kinds": list(neardup.KINDS), "seed": neardup.TUNING_SEED,
                                 "vectors": f"hash-{args.dim}"}}
    emb = HashEmbedder(DIM)
    x = corpus(args.docs)
    sets = {}
    for kind, texts in neardup.workloads(args.queries).items():
        q = emb.embed(texts)
        sets[kind] = (q, exact(x, q))
    faiss.omp_set_num_threads(1)
    mults = tuple(int(m) for m in args.cells.split(","))
    curves = sweep_ivf(x, sets, only, mults) if only & {"ivf", "rerank", "adaptive"} else {}
    if "hnsw_coarse" in only:
        curves["hnsw_coarse"] = sweep_hnsw_coarse(x, sets)
    if "hnsw" in only:
        curves["hnsw"] = sweep_hnsw(x, sets)
    curves.update(index_structures.sweep(x, sets, only, measure, ivf_index))
    curves.update(index_scans.sweep(x, sets, only, measure))
    report["machine"]["load_avg_at_end"] = os.getloadavg()[0]
    name = "index_curve" if args.docs <= 100_000 else f"index_curve_{args.docs // 1000}k"
    name += "" if args.dim == 384 else f"_hash{args.dim}"
    load = [round(report["machine"]["load_avg_at_start"], 2), round(report["machine"]["load_avg_at_end"], 2)]
    report["curves"], report["loads"] = curves, dict.fromkeys(curves, load)
    if args.keep:
        index_structures.keep_others(name, report)
    write_report(name, report)


if __name__ == "__main__":
    main()
