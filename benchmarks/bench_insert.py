"""Benchmark: SQL `INSERT ... VALUES` over HTTP with a cheap embedder, as users send it.

A real `kbsql serve --port 0`, the real client (`kbsql.connect(url).sql(...)`, one
keep-alive connection), a knowledge base with the `hash-384` embedder, statements of
`--batch` rows (id, a ~200-character text with quotes and a backslash, a metadata value).
Target: >= 4,000 docs/s (5x MindsDB's 810-840 measured on this machine).

Baselines in the same run: the same rows through the REST insert (`PUT` with `rows`, JSON,
no SQL parsing) on the same server, and in-process the parse alone of one statement by
mindsdb_sql_parser against the VALUES fast path (kbsql/engine/sql/parse/values_fastpath.py). The
SQL and REST batches alternate one by one, so both see the same machine load.

Usage: python benchmarks/bench_insert.py [--docs 5000] [--batch 100]
Prints JSON and writes benchmarks/results/insert.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

from mindsdb_sql_parser import parse_sql
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.client.params import bind
from kbsql.engine.sql.parse.values_fastpath import parse_insert_values
from kbsql.server.process import spawn

TARGET_DOCS_PER_S = 4000.0
WORDS = ("river mountain forest desert ocean city village castle bridge tower garden harbor valley "
         "island canyon glacier meadow volcano lake road O'Brien's C:\\path").split()
CREATE = ("CREATE KNOWLEDGE_BASE {name} USING embedding_model = "
          "{{'provider': 'kbsql', 'model_name': 'hash-384'}}, metadata_columns = ['topic']")


def rows(start: int, count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + count):
        text = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(30))
        out.append({"id": i, "content": f"Document {i}: {text}", "topic": WORDS[i % len(WORDS)]})
    return out


def insert_sql(name: str, batch: list[dict[str, Any]]) -> str:
    """The statement a user's code would build: each value bound as a quoted SQL literal."""
    values = ", ".join(bind("(:id, :content, :topic)", row) for row in batch)
    return f"INSERT INTO {name} (id, content, topic) VALUES {values}"


def run_both(client: kbsql.Client, suffix: str, docs: int, batch: int) -> tuple[float, float]:
    """docs/s of the SQL insert and of the REST insert, batch by batch in alternation (both
    see the same machine load), into two new knowledge bases."""
    sql_kb, rest_kb = f"sql_{suffix}", f"rest_{suffix}"
    client.sql(CREATE.format(name=sql_kb))
    client.sql(CREATE.format(name=rest_kb))
    batches = [rows(i, min(batch, docs - i)) for i in range(0, docs, batch)]
    statements = [insert_sql(sql_kb, b) for b in batches]
    sql_s = rest_s = 0.0
    for text, chunk in zip(statements, batches, strict=True):
        start = time.perf_counter()
        result = client.sql(text)
        sql_s += time.perf_counter() - start
        assert result.type == "ok", result
        start = time.perf_counter()
        client.knowledge_bases.insert(rest_kb, chunk)
        rest_s += time.perf_counter() - start
    stored = client.sql(f"SELECT count(*) AS n FROM (SELECT id FROM {sql_kb} LIMIT 1000000) AS t")
    assert stored.type == "table"
    return docs / sql_s, docs / rest_s


def parse_cost(batch: int, repeat: int) -> dict[str, Any]:
    text = insert_sql("docs", rows(0, batch))
    full, fast = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        expected = parse_sql(text)
        full.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        got = parse_insert_values(text)
        fast.append((time.perf_counter() - start) * 1000)
        assert got is not None and got.to_string() == expected.to_string()
    return {"rows": batch, "mindsdb_sql_parser_ms": round(statistics.median(full), 3),
            "fast_path_ms": round(statistics.median(fast), 3),
            "ratio": round(statistics.median(full) / statistics.median(fast), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, spawn(tmp) as server, kbsql.connect(server.url) as client:
        run_both(client, "warmup", args.batch * 2, args.batch)  # imports, first KBs, caches
        sql_rates, rest_rates = [], []
        for round_ in range(2):
            sql_rate, rest_rate = run_both(client, str(round_), args.docs, args.batch)
            sql_rates.append(sql_rate)
            rest_rates.append(rest_rate)
    best_sql, best_rest = max(sql_rates), max(rest_rates)
    write_report("insert", {
        "benchmark": "insert", "docs": args.docs, "rows_per_statement": args.batch,
        "embedder": "hash-384",
        "sql_insert_over_http_docs_per_s": round(best_sql, 1),
        "sql_rounds_docs_per_s": [round(r, 1) for r in sql_rates],
        "baseline_rest_insert_docs_per_s": round(best_rest, 1),
        "ratio_sql_to_rest": round(best_sql / best_rest, 3),
        "parse_one_statement": parse_cost(args.batch, 20),
        "target_docs_per_s": TARGET_DOCS_PER_S, "meets_target": best_sql >= TARGET_DOCS_PER_S,
        "load_average_1m": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
