"""Benchmark: another user's `SELECT 1` while one client uploads files back to back (issue 39).

An upload's parse is Python (openpyxl's XML, the objects pandas builds); parsed in the
server's own threads it holds the interpreter lock that the event loop needs for every other
request. `kbsql serve` now parses each upload in a process of its own (`--upload-processes`,
datasources/parse_process.py). Measured in the same run, on two servers at their defaults but
for that flag: `--upload-processes 0` (the old path, in the server's threads: the baseline)
and the default (half the cores).

For each file kind (an ordinary workbook of 3,000 rows x 5 cells, ~0.4 CPU-s to parse; the
3.5 KB xlsx bomb whose one shared string fills 150 cells, refused by the decoded-size bound):
a neighbour (the real client, `kbsql.connect(url)`, one keep-alive connection) sends
`SELECT 1` for `--seconds` alone (idle), then as long again while an uploader (httpx, as
mindsdb_sdk uploads) sends the file, then deletes it, without pause. Figures: the
neighbour's p50/p90/p99 per phase, the uploads done, the ratio of the p99 while uploading to
the baseline's. Target: the p99 while uploading at most 1/3 of the baseline's, and at most
5x the idle p99 (bench_isolation's ratio).

Usage: python benchmarks/bench_uploads.py [--seconds 10] [--rows 3000]
Prints JSON and writes benchmarks/results/uploads.json.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files/bombs.py
from tests.files.bombs import shared_string_workbook
from tests.files.makers import workbook

TARGET_VS_BASELINE = 1 / 3
TARGET_VS_IDLE = 5.0


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * share))], 3)

    return {"p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "n": len(ordered)}


def neighbour(url: str, seconds: float) -> list[float]:
    samples = []
    with kbsql.connect(url) as client:
        for _ in range(20):  # warm: the connection, the plan cache
            client.sql("SELECT 1")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            client.sql("SELECT 1")
            samples.append((time.perf_counter() - start) * 1000)
    return samples


def run(processes: int | None, raw: bytes, filename: str, seconds: float) -> dict[str, Any]:
    args = () if processes is None else ("--upload-processes", str(processes))
    with tempfile.TemporaryDirectory() as tmp, spawn(tmp, args=args) as server:
        stop, done, answers = threading.Event(), [0], {}

        def upload() -> None:
            with httpx.Client(base_url=server.url, timeout=120) as http:
                while not stop.is_set():
                    name = f"f{done[0] % 3}"
                    answer = http.put(f"/api/files/{name}", data={"source_type": "file"},
                                      files={"file": (filename, io.BytesIO(raw))})
                    answers[answer.status_code] = answers.get(answer.status_code, 0) + 1
                    if answer.status_code == 200:
                        http.delete(f"/api/files/{name}")
                    done[0] += 1

        upload_once = httpx.put(f"{server.url}/api/files/warm", data={"source_type": "file"},
                                files={"file": ("warm.csv", io.BytesIO(b"a\n1\n"))}, timeout=120)
        assert upload_once.status_code == 200, upload_once.text  # the forkserver is up
        idle = neighbour(server.url, seconds)
        uploader = threading.Thread(target=upload)
        uploader.start()
        time.sleep(0.5)
        busy = neighbour(server.url, seconds)
        stop.set()
        uploader.join()
    return {"idle": percentiles(idle), "uploading": percentiles(busy), "uploads": done[0],
            "answers": {str(k): v for k, v in sorted(answers.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase's length")
    parser.add_argument("--rows", type=int, default=3000, help="rows of the ordinary workbook")
    args = parser.parse_args()
    kinds = {"workbook": (workbook(args.rows), "orders.xlsx"),
             "xlsx_bomb": (shared_string_workbook(), "bomb.xlsx")}
    result: dict[str, Any] = {"benchmark": "uploads", "seconds_per_phase": args.seconds,
                              "rows": args.rows, "load_average_1m_at_start": round(os.getloadavg()[0], 2)}
    for kind, (raw, filename) in kinds.items():
        baseline = run(0, raw, filename, args.seconds)
        default = run(None, raw, filename, args.seconds)
        p99 = default["uploading"]["p99_ms"]
        against = baseline["uploading"]["p99_ms"]
        result[kind] = {"bytes": len(raw), "baseline_upload_processes_0": baseline,
                        "default": default, "p99_vs_baseline": round(p99 / against, 3),
                        "p99_vs_idle": round(p99 / default["idle"]["p99_ms"], 2)}
        result[kind]["meets_target"] = (result[kind]["p99_vs_baseline"] <= TARGET_VS_BASELINE
                                        and result[kind]["p99_vs_idle"] <= TARGET_VS_IDLE)
    result["targets"] = {"p99_vs_baseline_max": round(TARGET_VS_BASELINE, 3),
                         "p99_vs_idle_max": TARGET_VS_IDLE}
    result["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    write_report("uploads", result)


if __name__ == "__main__":
    main()
