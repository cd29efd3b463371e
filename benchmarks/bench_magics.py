"""Benchmark: `%%kbsql` returning 100k rows vs building the same DataFrame from the JSON.

The baseline is the least any client must do with the service's answer: parse the JSON
body of `POST /api/sql/query` and build a DataFrame from its rows. The magic is measured
end to end in a real IPython shell (argument parsing, variables, the client call, the
DataFrame, the display hook), over the embedded engine and over a real `kbsql serve`.
The JSON body is fetched once beforehand, so "json_to_dataframe" is parse + build only.
`ratio` is the magic against the same work without it: embedded, against parse + build
(the engine hands over its DataFrame, so no JSON exists at all); over HTTP, against a bare
client doing POST + parse + build of the same query (the server's work and the transfer are
the same for both). The HTTP magic against parse-only is reported too
(`ratio_vs_json_to_dataframe`): it charges the magic for the server. Target: ratio <= 1.5.

Usage: python benchmarks/bench_magics.py [--rows 100000] [--repeat 5]
Prints JSON and writes benchmarks/results/magics.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

from kbsql.server.process import spawn

TARGET = 1.5
QUERY = "SELECT * FROM df.big"


def make_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "id": np.arange(rows, dtype=np.int64),
        "name": [f"item-{i}" for i in range(rows)],
        "category": rng.choice(["pump", "fan", "boiler", "valve"], rows),
        "price": rng.random(rows) * 1000,
        "in_stock": rng.random(rows) > 0.5,
    })


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def measure(shell, alias: str, raw_json: bytes, rows: int, repeat: int,
            url: str | None = None) -> dict:
    def magic():
        with contextlib.redirect_stdout(io.StringIO()):
            result = shell.run_cell(f"%%kbsql -c {alias}\n{QUERY}", store_history=False)
        assert result.success and len(result.result) == rows, result.error_in_exec

    def baseline():
        body = json.loads(raw_json)
        frame = pd.DataFrame.from_records(body["data"], columns=body["column_names"])
        assert len(frame) == rows

    def fetch_baseline():  # the least a hand-written HTTP client does: POST, parse, build
        body = httpx.post(f"{url}/api/sql/query", json={"query": QUERY}, timeout=120).json()
        frame = pd.DataFrame.from_records(body["data"], columns=body["column_names"])
        assert len(frame) == rows

    magic()  # warm-up: first query opens files, imports, caches
    baseline()
    magic_times = timed(magic, repeat)
    base_times = timed(baseline, repeat)
    m, b = statistics.median(magic_times), statistics.median(base_times)
    out = {"magic_s": round(m, 4), "json_to_dataframe_s": round(b, 4),
           "ratio_vs_json_to_dataframe": round(m / b, 3),
           "magic_runs_s": [round(t, 4) for t in magic_times],
           "baseline_runs_s": [round(t, 4) for t in base_times]}
    ratio = m / b
    if url is not None:
        fetch_times = timed(fetch_baseline, repeat)
        f = statistics.median(fetch_times)
        out["fetch_json_to_dataframe_s"] = round(f, 4)
        out["ratio_vs_fetch_json_to_dataframe"] = round(m / f, 3)
        ratio = m / f
    out["ratio"] = round(ratio, 3)
    out["meets_target"] = ratio <= TARGET
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from IPython.core.getipython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()
    shell = get_ipython()
    frame = make_frame(args.rows)
    report: dict = {"benchmark": "magics", "rows": args.rows, "columns": list(frame.columns),
                    "query": QUERY, "target_ratio": TARGET, "repeat": args.repeat, "modes": {}}
    home = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KBSQL_HOME"] = str(Path(tmp) / "embedded")
        os.chdir(tmp)
        shell.extension_manager.load_extension("kbsql")
        server = spawn(Path(tmp) / "server")
        url = server.url
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                shell.run_line_magic("kbsql_connect", f"{url} --alias remote")
            from kbsql.notebook import current_client

            for alias in ("default", "remote"):
                current_client(alias).register("big", frame)
            raw = httpx.post(f"{url}/api/sql/query", json={"query": QUERY}, timeout=120).content
            report["json_bytes"] = len(raw)
            report["modes"]["embedded"] = measure(shell, "default", raw, args.rows, args.repeat)
            report["modes"]["http"] = measure(shell, "remote", raw, args.rows, args.repeat, url)
        finally:
            shell.extension_manager.unload_extension("kbsql")
            server.stop()
            os.chdir(home)
    report["meets_target"] = all(m["meets_target"] for m in report["modes"].values())
    write_report("magics", report)


if __name__ == "__main__":
    main()
