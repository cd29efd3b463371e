"""Where the scan index kind stops paying (issue 37): index.SCAN_ROWS.

Run: `python benchmarks/bench_scan_range.py [--sizes 100000,200000,300000,500000] [--queries 50]
[--nprobes 96,192] [--out scan_range]`. Writes benchmarks/results/<out>.json. `--nprobes` adds IVF
variants probing more cells (`ivf_<nprobe>`), timed in the same alternation.

At each size, the first N rows of bench_index_curve's near-duplicate corpus (hash-384) are
indexed twice as the engine builds them: the shipped IVF (index.make_index, cells trained on
40 rows each spread over the rows, nprobe 48, 20 candidates) and the scan (scan.make_scan
trained on index.SCAN_SAMPLE rows spread over the rows, scan.search with the default refine,
20 candidates); both re-scored exactly (bench_index_curve.measure: the tuning queries of
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

from kbsql.engine.knowledge import index as index_mod  # noqa: E402
from kbsql.engine.knowledge import scan  # noqa: E402
from kbsql.engine.knowledge.settings import NPROBE, REFINE, RERANK  # noqa: E402
from kbsql.engine.models.embeddings import HashEmbedder  # noqa: E402

FETCH = RERANK * curve.K
NO_DEAD = np.empty(0, np.int64)


def scan_index(x: np.ndarray) -> object:
    size = min(len(x), index_mod.SCAN_SAMPLE)
    index = scan.make_scan(x.shape[1], x[np.arange(size, dtype=np.int64) * len(x) // size])
    index.add_with_ids(x, np.arange(len(x), dtype=np.int64))
    return index


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,200000,300000,500000")
    parser.add_argument("--queries", type=int, default=50, help="per kind, tuning seed")
    parser.add_argument("--nprobes", default="", help="more IVF variants: cells probed, comma-separated")
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
        ivf, flat = curve.ivf_index(x), scan_index(x)
        searches = {"ivf": curve.ivf_search(ivf, min(NPROBE, ivf.nlist), FETCH),
                    "scan": lambda row, index=flat: scan.search(index, row, FETCH, REFINE, NO_DEAD)[1]}
        for probes in (int(p) for p in args.nprobes.split(",") if p):
            searches[f"ivf_{probes}"] = curve.ivf_search(ivf, min(probes, ivf.nlist), FETCH)
        runs: dict[str, list[dict]] = {name: [] for name in searches}
        for _ in range(2):
            for name, search in searches.items():
                runs[name].append(curve.measure(search, x, sets))
        load.append(os.getloadavg()[0])
        point: dict = {"docs": n, "cells": ivf.nlist, "load": [round(v, 2) for v in load]}
        for name, (first, second) in runs.items():
            best = min((first, second), key=lambda r: r["all"]["p50_ms"])
            point[name] = {**best, "p50_ms_passes": [first["all"]["p50_ms"], second["all"]["p50_ms"]]}
        point["scan_p50_over_ivf"] = round(point["scan"]["all"]["p50_ms"] / point["ivf"]["all"]["p50_ms"], 3)
        print(n, {name: (point[name]["all"]["mean_of_kinds"], point[name]["all"]["worst_decile_min"],
                         point[name]["all"]["p50_ms"]) for name in runs}, file=sys.stderr, flush=True)
        points.append(point)
        del ivf, flat
    write_report(args.out, {"machine": {"cpus": os.cpu_count()},
                                "workload": {"queries_per_kind": args.queries, "kinds": list(neardup.KINDS),
                                             "vectors": f"hash-{curve.DIM}", "nprobe": NPROBE,
                                             "refine": REFINE, "fetch": FETCH},
                                "points": points})


if __name__ == "__main__":
    main()
