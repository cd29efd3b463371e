"""Benchmark: another user's `SELECT 1` while clients send statements that take seconds to parse.

Both SQL parsers are pure Python and hold the interpreter lock. A live `kbsql serve` (server
defaults), one measuring client (the real client, one keep-alive connection) sending `SELECT 1`
every 20 ms, and `--heavy` clients in a process of their own, each sending
`SELECT abs(0) AS c0, ..., abs(N-1) AS cN-1` (`--columns`, 5,500: ~38,500 tokens, under the
parser's limit) in a loop. Two servers in the same run: `--long-statement-tokens 0` (no statement
is long: every parse competes for the lock, the behaviour before sql/parse/long_statements.py)
and the default (long statements parsed and compiled one at a time). Figures: SELECT 1's p50
and p99 idle and under load on each; target: the default's p50 under load at most 5x its idle
p50, and at most half the baseline's.

Usage: python benchmarks/bench_long_statements.py [--heavy 4] [--seconds 20] [--columns 5500]
Writes benchmarks/results/long_statements.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn


def _heavy(url: str, columns: int, stop_at: float) -> None:
    client = kbsql.connect(url)
    statement = "SELECT " + ", ".join(f"abs({i}) AS c{i}" for i in range(columns))
    while time.time() < stop_at:
        client.sql(statement)


def _sample(client: kbsql.Client, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        client.sql("SELECT 1")
        latencies.append((time.perf_counter() - start) * 1000)
        time.sleep(0.02)
    latencies.sort()
    return {"p50_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)], 2), "n": len(latencies)}


def measure(args: argparse.Namespace, serve_args: tuple[str, ...]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp, spawn(tmp, args=serve_args) as server, \
            kbsql.connect(server.url) as client:
        client.sql("SELECT 1")
        idle = _sample(client, min(5.0, args.seconds))
        stop_at = time.time() + args.seconds + min(3.0, args.seconds)
        workers = [multiprocessing.Process(target=_heavy, args=(server.url, args.columns, stop_at))
                   for _ in range(args.heavy)]
        for worker in workers:
            worker.start()
        time.sleep(min(3.0, args.seconds))  # every heavy client connected and parsing
        load = _sample(client, args.seconds)
        for worker in workers:
            worker.join()
        return {"serve_args": list(serve_args), "idle": idle, "load": load,
                "load_avg_1m": float(Path("/proc/loadavg").read_text().split()[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--heavy", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--columns", type=int, default=5500)
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    baseline = measure(args, ("--long-statement-tokens", "0"))
    default = measure(args, ())
    p50 = default["load"]["p50_ms"]  # type: ignore[index]
    report = {
        "benchmark": "long_statements", "heavy_clients": args.heavy, "columns": args.columns,
        "seconds": args.seconds, "load_avg_at_start": round(load_start, 2),
        "baseline_no_long_statements": baseline, "default": default,
        "p50_load_over_idle": round(p50 / default["idle"]["p50_ms"], 2),  # type: ignore[index]
        "p50_load_over_baseline": round(p50 / baseline["load"]["p50_ms"], 2),  # type: ignore[index]
        "targets": {"p50_load_over_idle_max": 5.0, "p50_load_over_baseline_max": 0.5},
    }
    report["meets_target"] = (report["p50_load_over_idle"] <= 5.0  # type: ignore[operator]
                              and report["p50_load_over_baseline"] <= 0.5)  # type: ignore[operator]
    write_report("long_statements", report)


if __name__ == "__main__":
    sys.exit(main())
