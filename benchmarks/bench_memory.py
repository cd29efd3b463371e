"""Benchmark: resident memory of an idle `kbsql serve` (no model loaded).

Starts a real `kbsql serve --port 0` on an empty data directory and reads its VmRSS from
/proc after `GET /api/status` (idle) and after `SELECT 1` through the real client (the
target: <= 150 MB). The baseline, measured in the same run, is the floor of the web stack:
a bare Starlette app served by uvicorn in a child process of the same interpreter. After a
`SHOW DATABASES` is reported too: any Arrow table built from Python values makes pyarrow
import pandas (~40 MB), so a server that has answered table queries sits above the target.

Usage: python benchmarks/bench_memory.py
Prints JSON and writes benchmarks/results/memory.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import httpx
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

TARGET_MB = 150.0
BARE_SERVER = """
import socket, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
app = Starlette(routes=[Route("/api/status", lambda r: JSONResponse({"ok": True}))])
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
sock.bind(("127.0.0.1", 0))
print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""


def rss_mb(pid: int) -> float:
    time.sleep(0.3)  # let the request's garbage settle
    with open(f"/proc/{pid}/status") as status:
        line = next(row for row in status if row.startswith("VmRSS:"))
    return round(int(line.split()[1]) / 1024, 1)


def bare_server_rss() -> float:
    proc = subprocess.Popen([sys.executable, "-c", BARE_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        for _ in range(100):
            try:
                httpx.get(f"{url}/api/status", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        return rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def kbsql_rss() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, spawn(tmp) as server:
        pid = server.process.pid
        with kbsql.connect(server.url) as client:
            client.status()
            idle = rss_mb(pid)
            client.sql("SELECT 1")
            after_select = rss_mb(pid)
            client.sql("SHOW DATABASES")
            after_show = rss_mb(pid)
    return {"idle_mb": idle, "after_select_1_mb": after_select, "after_show_databases_mb": after_show}


def main() -> None:
    ours = kbsql_rss()
    bare = bare_server_rss()
    worst = max(ours["idle_mb"], ours["after_select_1_mb"])
    write_report("memory", {
        "benchmark": "memory", "kbsql_serve": ours, "baseline_bare_starlette_uvicorn_mb": bare,
        "ratio_after_select_1_to_baseline": round(ours["after_select_1_mb"] / bare, 2),
        "target_mb": TARGET_MB, "meets_target": worst <= TARGET_MB,
        "load_average_1m": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
