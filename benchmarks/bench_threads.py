"""Benchmark: `INSERT INTO kb SELECT ... USING threads = N` against a remote embedding model.

A real `kbsql serve --port 0`, the real client (`kbsql.connect(url)`, keep-alive), a
DataFrame registered as `df.docs`, and a knowledge base whose embedding model is an
OpenAI-compatible server on loopback that answers each call after `--latency` seconds (the
scripted server of the tests, tests/knowledge/fakes.py; a hosted API spends most of an
insert in such waits). The statement is the one a user writes:
`INSERT INTO kb SELECT * FROM df.docs USING batch_size = B, threads = N`; with `batch_size`
it runs in the background (as MindsDB's), so each run is timed until its query finished.

Baseline in the same run: the same statement with `threads = 1`; the two alternate round
by round, so both see the same machine load. Target: `threads = 8` at least 3x the docs/s
of `threads = 1` (the waits overlap; storing stays in one thread, in row order).

Usage: python benchmarks/bench_threads.py [--docs 2000] [--batch 100] [--latency 0.05]
Prints JSON and writes benchmarks/results/threads.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/knowledge/fakes.py
from tests.knowledge.fakes import FakeProvider

TARGET_RATIO = 3.0
THREADS = 8


def run(client: kbsql.Client, fake: FakeProvider, name: str, threads: int, batch: int, docs: int) -> float:
    """docs/s of one INSERT ... SELECT into a new knowledge base (checked complete)."""
    client.sql(f"CREATE KNOWLEDGE_BASE {name} USING embedding_model = {{'provider': 'openai', "
               f"'model_name': 'emb', 'base_url': '{fake.url}/v1'}}")
    fake.max_active = 0
    start = time.perf_counter()
    # with batch_size the insert runs in the background (as MindsDB's partitioned inserts):
    # the statement answers its query's row; the time is until that query finished, polled
    # as a notebook cell follows it (kbsql.notebook.follow)
    started = client.sql(f"INSERT INTO {name} SELECT * FROM df.docs USING batch_size = {batch}, "
                         f"threads = {threads}")
    query_id = started.rows()[0][0]
    while True:
        row = client.sql(f"SELECT FINISHED_AT, ERROR, PROCESSED_ROWS FROM information_schema.queries "
                         f"WHERE ID = {query_id}").rows()[0]
        if row[0] is not None or row[1] is not None:
            break
        time.sleep(0.01)
    seconds = time.perf_counter() - start
    assert row[1] is None and row[2] == docs, row
    assert client.sql(f"SELECT count(*) FROM {name}").rows() == [[docs]]
    assert fake.max_active <= threads
    return docs / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    texts = [f"document {i} about subject {i % 37} in plain words" for i in range(args.docs)]
    frame = pd.DataFrame({"id": range(args.docs), "content": texts})
    fake = FakeProvider()
    fake.delay = args.latency
    one, many, overlap = [], [], 0
    try:
        with tempfile.TemporaryDirectory() as tmp, spawn(tmp) as server, kbsql.connect(server.url) as client:
            client.register("docs", frame)
            for round_ in range(args.rounds):
                one.append(run(client, fake, f"kb1_{round_}", 1, args.batch, args.docs))
                many.append(run(client, fake, f"kbn_{round_}", THREADS, args.batch, args.docs))
                overlap = max(overlap, fake.max_active)
    finally:
        fake.close()
    best_one, best_many = max(one), max(many)
    ratio = best_many / best_one
    write_report("threads", {
        "benchmark": "threads", "docs": args.docs, "batch_size": args.batch,
        "provider_latency_s": args.latency, "threads": THREADS,
        f"threads_{THREADS}_docs_per_s": round(best_many, 1),
        "baseline_threads_1_docs_per_s": round(best_one, 1),
        "rounds_docs_per_s": {"threads_1": [round(r, 1) for r in one],
                              f"threads_{THREADS}": [round(r, 1) for r in many]},
        "max_concurrent_embedding_calls": overlap,
        "ratio": round(ratio, 2), "target_ratio": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO,
        "load_average_1m": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
