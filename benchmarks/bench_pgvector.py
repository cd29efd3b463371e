"""pgvector storage vs the local FAISS store, on the same rows, in the same run.

Run: `python benchmarks/bench_pgvector.py [--chunks 100000] [--queries 300]`. Prints JSON and
writes benchmarks/results/pgvector.json. PostgreSQL 16 + pgvector is `$KBSQL_TEST_PGVECTOR_DSN`
or one started from the `pgserver` wheel (tests/pgvector_server.py) on loopback.

Measured through the path users take (`Engine.insert_rows`, `KnowledgeService.search`, the
hash-384 embedder so the model is not what is timed), for a KB in the local store and a KB
in `storage = vdb.table`:
- ingest rows/s (one insert call of all rows, each one transaction);
- search p50/p99 unfiltered and filtered (`g = 3`, 10% of the rows), LIMIT 10;
- recall@10 of pgvector's HNSW against exact search (numpy over the same vectors; by score,
  so ties are not misses), unfiltered and filtered, and that no search returned < 10 rows.
Targets (the baseline is the local store measured in this run): recall@10 >= 0.95 and never
a short answer; latency and ingest are reported as ratios to the local store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/pgvector_server.py

from tests import pgvector_server

from kbsql.engine import Engine
from kbsql.engine.knowledge.embeddings import HashEmbedder
from kbsql.engine.knowledge.search import Filter, SearchRequest

WORDS = ("river mountain forest desert ocean city village castle bridge tower garden harbor valley "
         "island canyon glacier meadow volcano lake road north south east west old new small large "
         "quiet busy ancient modern stone wooden golden silver").split()
MODEL = {"provider": "kbsql", "model_name": "hash-384"}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def timed(fn, texts: list[str]) -> dict:
    for text in texts[:10]:
        fn(text)  # warm
    times = []
    for text in texts:
        t0 = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t0)
    return {"p50_ms": round(percentile(times, 50) * 1000, 3),
            "p99_ms": round(percentile(times, 99) * 1000, 3)}


def run(dsn: str, n: int, queries: int) -> dict:
    rng = np.random.default_rng(1)
    words = np.array(WORDS)
    texts = [" ".join(words[rng.integers(0, len(words), 12)]) for _ in range(n)]
    qtexts = [" ".join(words[rng.integers(0, len(words), 3)]) for _ in range(queries)]
    rows = [{"id": i, "content": t, "g": i % 10} for i, t in enumerate(texts)]
    url = urlparse(dsn)
    params = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"),
              "user": url.username, "password": url.password}
    out: dict = {"chunks": n, "queries": queries, "limit": 10}
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "e") as eng:
        eng.query(f"CREATE DATABASE vdb WITH ENGINE = 'pgvector', PARAMETERS = {json.dumps(params)}")
        kbs = {"local": {"name": "big_local"},
               "pgvector": {"name": "big_pg", "storage": {"database": "vdb", "table": "bench_chunks"}}}
        records = {}
        for kind, body in kbs.items():
            eng.create_knowledge_base("mindsdb", {**body, "embedding_model": MODEL,
                                                  "metadata_columns": ["g"]})
            records[kind] = eng.catalog.knowledge_base("mindsdb", body["name"])
            t0 = time.perf_counter()
            eng.insert_rows(records[kind], rows)
            out[f"{kind}_ingest_rows_per_s"] = round(n / (time.perf_counter() - t0), 1)
        out["ingest_ratio_pgvector_to_local"] = round(
            out["pgvector_ingest_rows_per_s"] / out["local_ingest_rows_per_s"], 3)

        short = {"count": 0}

        def searcher(record, filters):
            def search(text: str) -> list:
                got = eng.knowledge.search(record, SearchRequest(query=text, limit=10, filters=filters))
                if len(got) < 10:
                    short["count"] += 1
                return got
            return search

        latency = {}
        for kind, record in records.items():
            latency[f"{kind}_unfiltered"] = timed(searcher(record, []), qtexts)
            latency[f"{kind}_filtered_10pct"] = timed(searcher(record, [Filter("g", "=", 3)]), qtexts)
        out["latency"] = latency
        out["p50_ratio_pgvector_to_local"] = {
            k: round(latency[f"pgvector_{k}"]["p50_ms"] / latency[f"local_{k}"]["p50_ms"], 2)
            for k in ("unfiltered", "filtered_10pct")}
        out["short_answers"] = short["count"]

        embedder = HashEmbedder(384)
        vectors = embedder.embed(texts)
        group = np.array([r["g"] for r in rows])
        recall = {}
        for label, filters, mask in (("unfiltered", [], None), ("filtered_10pct", [Filter("g", "=", 3)],
                                                                 group == 3)):
            hits = total = 0
            for text in qtexts[:100]:
                scores = vectors @ embedder.embed([text])[0]
                if mask is not None:
                    scores = np.where(mask, scores, -np.inf)
                kth = np.sort(scores)[-10]
                got = eng.knowledge.search(records["pgvector"], SearchRequest(query=text, limit=10,
                                                                             filters=filters))
                hits += sum(1 - r[5] >= kth - 1e-5 for r in got)
                total += 10
            recall[label] = round(hits / total, 3)
        out["pgvector_recall_at_10"] = recall
    out["target"] = {"recall_at_10_min": 0.95, "short_answers": 0}
    out["meets_target"] = min(recall.values()) >= 0.95 and short["count"] == 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    started = None
    dsn = os.environ.get(pgvector_server.DSN_ENV)
    if not dsn:
        started = pgvector_server.start()
        dsn = started.dsn
    db = pgvector_server.fresh_database(dsn)
    try:
        report = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]},
                  "search_ingest": run(db, args.chunks, args.queries)}
        report["machine"]["load_avg_at_end"] = os.getloadavg()[0]
    finally:
        pgvector_server.drop_database(db)
        if started is not None:
            started.stop()
    write_report("pgvector", report)


if __name__ == "__main__":
    main()
