"""Where the scan index kind stops paying (issue 37): index.SCAN_ROWS.

Run: `python benchmarks/bench_scan_range.py [--sizes 100000,200000,300000,500000] [--queries 50]
[--nprobes 96,192] [--reranks 5,10] [--cells 2,8] [--refines 25,50] [--pq 96] [--no-scan] [--no-ivf]
[--out scan_range]`. Writes benchmarks/results/<out>.json. The options add variants timed in the
same alternation (issue 37's candidates past SCAN_ROWS): IVFs probing more cells (`ivf_<nprobe>`),
re-scoring a larger pool (`ivf_<nprobe>_r<rerank>`), with other cells (`ivf_c<mult>_<nprobe>`);
scans re-scoring more from float16 (`scan_f<refine>`) or with fewer 4-bit sub-quantizers
(`scan_pq<M>_f<refine>`). At 1M: results/ivf_range_1000k.json, scan_range_1000k.json.

At each size, the first N rows of bench_index_curve's near-duplicate corpus (hash-384) are
indexed twice as the engine builds them: the shipped IVF (index_build.make_index, cells trained on
40 rows each spread over the rows, nprobe 48, 20 candidates) and the scan (scan.make_scan for
that many rows, trained on index_build.SCAN_SAMPLE rows spread over them: its codes and its refine
pool as the engine picks them at that size, scan.sub_quantizers and scan.auto_refine, reported
as `scan_index`; 20 candidates); both re-scored exactly (bench_index_curve.measure: the tuning queries of
every kind, tie-aware recall@10 mean / worst decile, p50 / p90 of candidates + re-score on one
thread). The two indexes of a size are timed alternately, twice each, so load drift falls on
both; the reported p50 is the lower of a kind's two passes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_index_curve as curve  # noqa: E402
import neardup  # noqa: E402

from kbsql.engine.knowledge import index_build, scan  # noqa: E402
from kbsql.engine.knowledge.settings import NPROBE, RERANK  # noqa: E402
from kbsql.engine.models.embeddings import HashEmbedder  # noqa: E402

FETCH = RERANK * curve.K
NO_DEAD = np.empty(0, np.int64)


def scan_index(x: np.ndarray, pq: int = 0) -> object:
    """The engine's scan for len(x) rows (`pq` 0: its codes by scan.sub_quantizers), or one
    with `pq` 4-bit sub-quantizers."""
    size = min(len(x), index_build.SCAN_SAMPLE)
    sample = x[np.arange(size, dtype=np.int64) * len(x) // size]
    if pq:
        inner = curve.faiss.index_factory(x.shape[1], f"RR{x.shape[1]},PQ{pq}x4fs,Refine(SQfp16)",
                                          curve.faiss.METRIC_INNER_PRODUCT)
        inner.train(sample)
        index = curve.faiss.IndexIDMap2(inner)
    else:
        index = scan.make_scan(x.shape[1], sample, len(x))
    index.add_with_ids(x, np.arange(len(x), dtype=np.int64))
    return index


def default_refine(index: object, rows: int) -> int:
    """The refine the engine uses for `index` at `rows` rows (settings: refine 0, automatic)."""
    return scan.auto_refine(scan.code_length(index), index.d, rows)  # type: ignore[attr-defined]


def scan_searches(x: np.ndarray, args: argparse.Namespace, searches: dict) -> dict:
    """Add the scan and its variants to `searches`; the engine's scan's codes and refine."""
    n = len(x)
    flat = scan_index(x)
    auto = default_refine(flat, n)
    searches["scan"] = lambda row, index=flat, r=auto: scan.search(index, row, FETCH, r, NO_DEAD)[1]
    refines = [int(r) for r in args.refines.split(",") if r]
    for refine in refines:
        searches[f"scan_f{refine}"] = lambda row, i=flat, r=refine: scan.search(i, row, FETCH, r, NO_DEAD)[1]
    for pq in (int(m) for m in args.pq.split(",") if m):
        small = scan_index(x, pq)
        for refine in [default_refine(small, n), *refines]:
            searches[f"scan_pq{pq}_f{refine}"] = \
                lambda row, i=small, r=refine: scan.search(i, row, FETCH, r, NO_DEAD)[1]
    return {"codes": scan.code_length(flat), "refine": auto}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,200000,300000,500000")
    parser.add_argument("--queries", type=int, default=50, help="per kind, tuning seed")
    parser.add_argument("--nprobes", default="", help="more IVF variants: cells probed, comma-separated")
    parser.add_argument("--reranks", default="", help="IVF variants re-scoring more: rerank x 10 candidates, "
                        "at the default nprobe and each of --nprobes (`ivf_<nprobe>_r<rerank>`)")
    parser.add_argument("--cells", default="", help="more IVFs with other cells: multiples of sqrt(N) "
                        "(`ivf_c<mult>_<nprobe>`, at the default nprobe and each of --nprobes)")
    parser.add_argument("--no-scan", action="store_true", help="measure the IVF variants only")
    parser.add_argument("--refines", default="", help="scan variants re-scoring more from float16: "
                        "refine values (`scan_f<refine>`)")
    parser.add_argument("--pq", default="", help="scans with fewer 4-bit sub-quantizers (d/2 ships): "
                        "`scan_pq<M>_f<refine>` at the engine's refine for such codes and each of --refines")
    parser.add_argument("--no-ivf", action="store_true", help="the shipped IVF only, no IVF variants")
    parser.add_argument("--out", default="scan_range", help="benchmarks/results/<out>.json")
    args = parser.parse_args()
    from report import write_report

    sizes = [int(s) for s in args.sizes.split(",")]
    emb = HashEmbedder(curve.DIM)
    queries = {kind: emb.embed(texts) for kind, texts in neardup.workloads(args.queries).items()}
    x_all = curve.corpus(max(sizes))
    points = []
    for n in sizes:
        x = x_all[:n]
        load = [os.getloadavg()[0]]
        sets = {kind: (q, curve.exact(x, q)) for kind, q in queries.items()}
        curve.faiss.omp_set_num_threads(1)
        ivf = curve.ivf_index(x)
        searches = {"ivf": curve.ivf_search(ivf, min(NPROBE, ivf.nlist), FETCH)}
        shipped_scan = None if args.no_scan else scan_searches(x, args, searches)
        nprobes = [] if args.no_ivf else [int(p) for p in args.nprobes.split(",") if p]
        for probes in nprobes:
            searches[f"ivf_{probes}"] = curve.ivf_search(ivf, min(probes, ivf.nlist), FETCH)
        for probes in [NPROBE, *nprobes]:
            for rerank in (int(r) for r in args.reranks.split(",") if r and not args.no_ivf):
                searches[f"ivf_{probes}_r{rerank}"] = curve.ivf_search(ivf, min(probes, ivf.nlist),
                                                                       rerank * curve.K)
        others = {mult: curve.ivf_index(x, int(mult * np.sqrt(n))) for mult in
                  (float(c) for c in args.cells.split(",") if c)}
        for mult, other in others.items():
            for probes in [NPROBE, *nprobes]:
                searches[f"ivf_c{mult:g}_{probes}"] = curve.ivf_search(other, min(probes, other.nlist), FETCH)
        runs: dict[str, list[dict]] = {name: [] for name in searches}
        for _ in range(2):
            for name, search in searches.items():
                runs[name].append(curve.measure(search, x, sets))
        load.append(os.getloadavg()[0])
        point: dict = {"docs": n, "cells": ivf.nlist, "load": [round(v, 2) for v in load]}
        if shipped_scan is not None:
            point["scan_index"] = shipped_scan
        for name, (first, second) in runs.items():
            best = min((first, second), key=lambda r: r["all"]["p50_ms"])
            point[name] = {**best, "p50_ms_passes": [first["all"]["p50_ms"], second["all"]["p50_ms"]]}
        if "scan" in point:
            ratio = point["scan"]["all"]["p50_ms"] / point["ivf"]["all"]["p50_ms"]
            point["scan_p50_over_ivf"] = round(ratio, 3)
        point["other_cells"] = {f"c{mult:g}": other.nlist for mult, other in others.items()}
        print(n, {name: (point[name]["all"]["mean_of_kinds"], point[name]["all"]["worst_decile_min"],
                         point[name]["all"]["p50_ms"]) for name in runs}, file=sys.stderr, flush=True)
        points.append(point)
        del ivf, others, searches
    write_report(args.out, {"machine": {"cpus": os.cpu_count()},
                                "workload": {"queries_per_kind": args.queries, "kinds": list(neardup.KINDS),
                                             "vectors": f"hash-{curve.DIM}", "nprobe": NPROBE,
                                             "refine": "scan.auto_refine", "fetch": FETCH},
                                "points": points})


if __name__ == "__main__":
    main()
