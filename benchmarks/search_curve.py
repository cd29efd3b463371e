"""kbsql's recall-vs-latency curve over the scan's search settings, every setting searched
in one process with the settings interleaved query by query (issue 37: "measure the
candidates before choosing and record the curve").

Run: `python benchmarks/search_curve.py --reuse DIR [--passes 3] [--settings 25x2,10x2,...]
[--name FILE]`.
DIR is a `bench_vs_chroma.py --reuse` directory (its kbsql ingest, query texts, exact
answers): the KB is copied aside first, so the ingest stays as it was. Writes
benchmarks/results/search_curve.json (above 100k rows: search_curve_<N>k.json; or FILE.json).

A setting is `REFINExRERANK[:BAND][q|f|r][n]`: the scan's refine pool (rows re-scored from float16
per candidate; the scan's 4-bit code search asks for refine x rerank x 10 rows), the exact
re-score pool (`rerank` x k candidates answered by the index, settings.py), optionally the
float16 error bound `local._rescored` reads candidates within (FP16_ERROR; a smaller one
reads fewer rows from SQLite), and `q`: searched on a copy of the knowledge base whose scan
is built with d/4 codes (scan.sub_quantizers picks them past FINE_ROWS only; half the code to
scan, a larger refine pool needed); `f`: on a copy whose scan refines from float32 vectors in
memory (`Refine(Flat)`, not SQfp16: exact scores, twice the memory); `r`: on a copy whose
shipped scan is rebuilt the same way (the reference for `f`: a scan built at once on 100k
rows is trained on another sample than one grown by the ingest's batches); `n`: the index's own
ranking answers, without the exact re-score from SQLite (issue 37: what that re-score costs,
and what it buys: float16 misorders near-ties). One kind of index per run, the settings all
`q`, all `f`, all `r` or none:
two indexes searched in turn in one process evict each other's codes from the caches, which
made the d/4 codes look 0.2-0.4 ms faster at 100k than they are in a process of their own.
(results/search_curve_codes.json: d/2 and d/4 runs alternated.) Each query of
bench_vs_chroma's workloads (every kind, the held-out ones apart) is searched under every
setting in a rotating order, `--passes` times, unfiltered and with the 10% filter, through
the service call bench_vs_chroma times (`engine.knowledge.search`, text in, rows out). Per
setting and route: p50 over every search, tie-aware recall@10 per kind (mean, worst decile;
bench_vs_chroma.grade), and the mean rows the exact re-score read. Per-setting p50s of one
run compare with each other; the ratio to Chroma comes from bench_vs_chroma's own full run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_vs_chroma as vs  # noqa: E402

SETTINGS = "25x2,10x2,15x2,5x2,50x1,25x1,10x1,25x2:5.5e-4"


def parse(spec: str) -> tuple[int, int, float | None]:
    pool, _, band = spec.rstrip("qfrn").partition(":")
    refine, rerank = pool.split("x")
    return int(refine), int(rerank), float(band) if band else None


def codes_kind(spec: str) -> str:
    """`q` (d/4 codes), `f` (refined from float32), `r` (the shipped scan, rebuilt as `q` and
    `f` are) or "" (the shipped scan as the ingest left it) of a setting."""
    tail = spec.rstrip("n")
    return tail[-1] if tail[-1] in "qfr" else ""


def rebuilt_copy(folder: Path) -> Path:
    """A copy of the knowledge base in `folder` whose scan is rebuilt at its first search
    (its cache file left out), as the caller has patched scan.py to build it."""
    copy = folder.with_name(folder.name + "-q")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("index.faiss*"))
    return copy


def float32_refined(dim: int, sample: np.ndarray, rows: int = 0) -> object:
    """scan.make_scan's index refined from float32 vectors (`Refine(Flat)`) for `f` settings."""
    import faiss

    faiss.omp_set_num_threads(1)
    inner = faiss.index_factory(dim, f"RR{dim},PQ{dim // 2}x4fs,Refine(Flat)", faiss.METRIC_INNER_PRODUCT)
    inner.train(np.ascontiguousarray(sample, dtype=np.float32))
    return faiss.IndexIDMap2(inner)


def run(folder: Path, work: Path, specs: list[str], passes: int) -> dict:
    from kbsql.engine import Engine
    from kbsql.engine.knowledge import local, scan
    from kbsql.engine.knowledge.search import Filter, SearchRequest

    texts = json.loads((work / "queries.json").read_text())
    plan = json.loads((work / "plan.json").read_text())
    kind = codes_kind(specs[0])
    fine, scan.FINE_ROWS = scan.FINE_ROWS, 0 if kind == "q" else scan.FINE_ROWS
    make, scan.make_scan = scan.make_scan, float32_refined if kind == "f" else scan.make_scan
    eng = Engine(rebuilt_copy(folder) if kind else folder)
    record = eng.catalog.knowledge_base("mindsdb", "dups")
    eng.knowledge.search(record, SearchRequest(query=texts[0], limit=10))  # (builds a d/4 or f scan)
    scan.FINE_ROWS, scan.make_scan = fine, make
    settings = eng.knowledge.handle(record).index.settings
    time.sleep(scan_huge_wait())
    shipped_band, exact, rescored = local.FP16_ERROR, local._exact, local._rescored
    read = [0]

    def counted(store, query, seqs, k):  # the rows the exact re-score reads
        read[0] += len(seqs)
        return exact(store, query, seqs, k)

    def as_ranked(store, query, approx, seqs, k):  # `n`: the index's ranking, not re-scored
        return approx[:k], seqs[:k]

    local._exact = counted
    out: dict = {}
    for route, rows in (("unfiltered", plan["unfiltered"]), ("filtered", plan["filtered"])):
        filters = [Filter("g", "=", vs.FILTER_GROUP)] if route == "filtered" else []
        got = {s: {"seconds": [], "ids": [], "rows_read": 0} for s in specs}
        for text in [texts[i] for i in rows[:20]]:  # warm-up
            eng.knowledge.search(record, SearchRequest(query=text, limit=10, filters=filters))
        for p in range(passes):
            for n, i in enumerate(rows):
                for j in range(len(specs)):
                    spec = specs[(n + j + p) % len(specs)]
                    settings.refine, settings.rerank, band = parse(spec)
                    local.FP16_ERROR = band or shipped_band
                    local._rescored = as_ranked if spec.endswith("n") else rescored
                    read[0] = 0
                    t = time.perf_counter()
                    request = SearchRequest(query=texts[i], limit=10, filters=filters)
                    res = eng.knowledge.search(record, request)
                    got[spec]["seconds"].append(time.perf_counter() - t)
                    got[spec]["rows_read"] += read[0]
                    if p == 0:
                        got[spec]["ids"].append([int(r[0]) for r in res])
        out[route] = got
    local._exact, local.FP16_ERROR, local._rescored = exact, shipped_band, rescored
    settings.refine, settings.rerank = 0, 2
    eng.close()
    return out


def scan_huge_wait() -> float:
    """Seconds until a scan just built may be advised onto huge pages (index.HUGE_EVERY after
    the advice its build asked for), as a long-running engine's scan is."""
    from kbsql.engine.knowledge.index import HUGE_EVERY

    return HUGE_EVERY + 1.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reuse", required=True)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--settings", default=SETTINGS)
    parser.add_argument("--copy", help="where the KB is copied (default: DIR/kbsql-curve)")
    parser.add_argument("--name", help="the results file (default: search_curve[_<N>k])")
    args = parser.parse_args()
    from report import write_report

    specs = args.settings.split(",")
    if len({codes_kind(spec) for spec in specs}) > 1:
        parser.error("the settings are all `q`, all `f`, all `r` or none (see the module's docstring)")
    work = Path(args.reuse)
    texts, labels, plan = vs.query_sets(args.queries, args.queries // 2)
    exact = vs.prepare(work, args.docs, texts, plan)
    qvec = np.load(work / "queries.npy")
    folder = Path(args.copy or work / "kbsql-curve")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(work / "kbsql", folder)
    load_start = os.getloadavg()[0]
    try:
        raw = run(folder, work, specs, args.passes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(folder.with_name(folder.name + "-q"), ignore_errors=True)
    report: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": load_start,
                                "load_avg_at_end": os.getloadavg()[0],
                                "peak_rss_mb": vs.peak_rss_mb()},  # (of this process: every setting's index)
                    "workload": {"docs": args.docs, "queries_per_kind": args.queries, "passes": args.passes,
                                 "route": "engine.knowledge.search (text in, rows out), settings "
                                          "interleaved per query",
                                 "settings": "REFINExRERANK[:FP16_ERROR][q: d/4 codes | f: refined "
                                             "from float32 | r: rebuilt][n: no exact re-score]"},
                    "curve": []}
    for spec in specs:
        refine, rerank, band = parse(spec)
        point: dict = {"setting": spec, "refine": refine, "rerank": rerank, "scan_k": refine * rerank * 10,
                       "fp16_error": band, "codes": "d/4" if codes_kind(spec) == "q" else "d/2",
                       "refined_from": "float32" if codes_kind(spec) == "f" else "float16",
                       "exact_rescore": not spec.endswith("n")}
        for route, rows in (("unfiltered", plan["unfiltered"]), ("filtered", plan["filtered"])):
            got = raw[route][spec]
            searches = len(got["seconds"])
            reads = round(got["rows_read"] / searches, 2)
            graded = vs.grade({"ids": got["ids"], "seconds": got["seconds"][:len(rows)]}, rows, labels,
                              exact[route], qvec)
            graded["p50_ms"] = vs.pct(got["seconds"], 50)
            graded["p99_ms"] = vs.pct(got["seconds"], 99)
            for v in graded["by_kind"].values():
                v.pop("p50_ms", None)  # (of the first pass only: the route's p50 is of every pass)
            point[route] = {"searches": searches, "rows_rescored": reads, **graded}
        report["curve"].append(point)
    name = "search_curve" if args.docs <= 100_000 else f"search_curve_{args.docs // 1000}k"
    write_report(args.name or name, report)


if __name__ == "__main__":
    main()
