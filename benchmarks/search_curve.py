"""kbsql's recall-vs-latency curve over the scan's search settings, every setting searched
in one process with the settings interleaved query by query (issue 37: "measure the
candidates before choosing and record the curve").

Run: `python benchmarks/search_curve.py --reuse DIR [--passes 3] [--settings 25x2,10x2,...]`.
DIR is a `bench_vs_chroma.py --reuse` directory (its kbsql ingest, query texts, exact
answers): the KB is copied aside first, so the ingest stays as it was. Writes
benchmarks/results/search_curve.json (above 100k rows: search_curve_<N>k.json).

A setting is `REFINExRERANK[:BAND][q]`: the scan's refine pool (rows re-scored from float16
per candidate; the scan's 4-bit code search asks for refine x rerank x 10 rows), the exact
re-score pool (`rerank` x k candidates answered by the index, settings.py), optionally the
float16 error bound `local._rescored` reads candidates within (FP16_ERROR; a smaller one
reads fewer rows from SQLite), and `q`: searched on a copy of the knowledge base whose scan
is built with d/4 codes (scan.sub_quantizers picks them past FINE_ROWS only; half the code to
scan, a larger refine pool needed). One kind of codes per run, the settings all `q` or none:
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
    pool, _, band = spec.rstrip("q").partition(":")
    refine, rerank = pool.split("x")
    return int(refine), int(rerank), float(band) if band else None


def quarter_codes(folder: Path) -> Path:
    """A copy of the knowledge base in `folder` whose scan is rebuilt, at its first search,
    with d/4 codes (its cache file left out; FINE_ROWS 0 while it builds)."""
    copy = folder.with_name(folder.name + "-q")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("index.faiss*"))
    return copy


def run(folder: Path, work: Path, specs: list[str], passes: int) -> dict:
    from kbsql.engine import Engine
    from kbsql.engine.knowledge import local, scan
    from kbsql.engine.knowledge.search import Filter, SearchRequest

    texts = json.loads((work / "queries.json").read_text())
    plan = json.loads((work / "plan.json").read_text())
    quarter = specs[0].endswith("q")
    fine, scan.FINE_ROWS = scan.FINE_ROWS, 0 if quarter else scan.FINE_ROWS
    eng = Engine(quarter_codes(folder) if quarter else folder)
    record = eng.catalog.knowledge_base("mindsdb", "dups")
    eng.knowledge.search(record, SearchRequest(query=texts[0], limit=10))  # (builds a d/4 scan)
    scan.FINE_ROWS = fine
    settings = eng.knowledge.handle(record).index.settings
    time.sleep(scan_huge_wait())
    shipped_band, exact = local.FP16_ERROR, local._exact
    read = [0]

    def counted(store, query, seqs, k):  # the rows the exact re-score reads
        read[0] += len(seqs)
        return exact(store, query, seqs, k)

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
                    read[0] = 0
                    t = time.perf_counter()
                    request = SearchRequest(query=texts[i], limit=10, filters=filters)
                    res = eng.knowledge.search(record, request)
                    got[spec]["seconds"].append(time.perf_counter() - t)
                    got[spec]["rows_read"] += read[0]
                    if p == 0:
                        got[spec]["ids"].append([int(r[0]) for r in res])
        out[route] = got
    local._exact, local.FP16_ERROR = exact, shipped_band
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
    args = parser.parse_args()
    from report import write_report

    specs = args.settings.split(",")
    if len({spec.endswith("q") for spec in specs}) > 1:
        parser.error("the settings are all of d/4 codes (`q`) or none (see the module's docstring)")
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
                                "load_avg_at_end": os.getloadavg()[0]},
                    "workload": {"docs": args.docs, "queries_per_kind": args.queries, "passes": args.passes,
                                 "route": "engine.knowledge.search (text in, rows out), settings "
                                          "interleaved per query",
                                 "settings": "REFINExRERANK[:FP16_ERROR][q: d/4 codes]"},
                    "curve": []}
    for spec in specs:
        refine, rerank, band = parse(spec)
        point: dict = {"setting": spec, "refine": refine, "rerank": rerank, "scan_k": refine * rerank * 10,
                       "fp16_error": band, "codes": "d/4" if spec.endswith("q") else "d/2"}
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
    write_report(name, report)


if __name__ == "__main__":
    main()
