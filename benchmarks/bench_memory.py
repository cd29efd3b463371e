"""Benchmark: an idle `kbsql serve`'s resident memory, and how soon it answers its first SQL.

Starts a real `kbsql serve --port 0` on an empty data directory and reads its VmRSS from
/proc after `GET /api/status` (idle), then times the first `SELECT 1` through the real client
(`kbsql.connect(url)`, keep-alive) from the moment the server said where it listens: the
engine's SQL stack (DuckDB, Arrow, the SQL parsers) loads on first use, so this is where its
import cost shows (issue #33 item 6; targets: idle <= 100 MB, first `SELECT 1` <= 0.5 s).
RSS after `SELECT 1` and after `SHOW DATABASES` are reported too.

Two baselines, measured in the same run: the floor of the web stack (a bare Starlette app
served by uvicorn in a child process of the same interpreter), and the same figures for the
sources of a baseline commit (`--baseline-ref`, default the last commit before the lazy
engine; exported with `git archive` and run with PYTHONPATH pointing at them; skipped with
a note when git cannot export it, e.g. in a shallow clone).

Usage: python benchmarks/bench_memory.py [--rounds 3] [--baseline-ref a1813cc]
Prints JSON and writes benchmarks/results/memory.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

TARGET_IDLE_MB = 100.0
TARGET_FIRST_SELECT_S = 0.5
BASELINE_REF = "a1813cc"  # main before the lazy engine (issue #33 item 6)
ROOT = Path(__file__).resolve().parents[1]
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


def kbsql_figures(env: dict[str, str] | None = None) -> dict[str, float]:
    """One `kbsql serve` (of the sources on `env`'s PYTHONPATH, else these): start time,
    idle RSS, first `SELECT 1` after start, RSS after it and after `SHOW DATABASES`."""
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        with spawn(tmp, env=env) as server:
            started = time.perf_counter() - began
            pid = server.process.pid
            with kbsql.connect(server.url, progress=None) as client:
                client.status()
                idle = rss_mb(pid)
                began = time.perf_counter()
                client.sql("SELECT 1")
                first = time.perf_counter() - began
                after_select = rss_mb(pid)
                client.sql("SHOW DATABASES")
                after_show = rss_mb(pid)
    return {"start_s": round(started, 3), "idle_mb": idle, "first_select_1_s": round(first, 3),
            "after_select_1_mb": after_select, "after_show_databases_mb": after_show}


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}


def baseline_sources(ref: str, into: Path) -> Path | None:
    """`ref`'s `src/` exported into `into` (None when git cannot: a shallow clone, no git)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="servers started per side (medians)")
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    args = parser.parse_args()
    import pandas  # noqa: F401  (the client's DataFrames: loaded before any timing, both sides alike)

    ours = median_of([kbsql_figures() for _ in range(args.rounds)])
    report: dict[str, object] = {"benchmark": "memory", "kbsql_serve": ours}
    with tempfile.TemporaryDirectory() as tmp:
        src = baseline_sources(args.baseline_ref, Path(tmp))
        if src is None:
            report["baseline_commit"] = f"not measured: git could not export {args.baseline_ref}"
        else:
            env = {"PYTHONPATH": str(src)}
            base = median_of([kbsql_figures(env) for _ in range(args.rounds)])
            report["baseline_commit"] = {"ref": args.baseline_ref, **base}
            report["ratio_idle_to_baseline_commit"] = round(ours["idle_mb"] / base["idle_mb"], 2)
            report["ratio_first_select_1_to_baseline_commit"] = round(
                ours["first_select_1_s"] / base["first_select_1_s"], 2)
    bare = bare_server_rss()
    report.update({
        "baseline_bare_starlette_uvicorn_mb": bare,
        "ratio_idle_to_bare": round(ours["idle_mb"] / bare, 2),
        "target_idle_mb": TARGET_IDLE_MB, "target_first_select_1_s": TARGET_FIRST_SELECT_S,
        "meets_target": (ours["idle_mb"] <= TARGET_IDLE_MB
                         and ours["first_select_1_s"] <= TARGET_FIRST_SELECT_S),
        "rounds": args.rounds, "load_average_1m": round(os.getloadavg()[0], 2),
    })
    write_report("memory", report)


if __name__ == "__main__":
    main()
