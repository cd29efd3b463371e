"""Benchmark: a pasted id list, `SELECT ... WHERE id IN (<n ids>)`, as users send it.

The real client over HTTP (`kbsql.connect(url).query(...)`, one keep-alive connection,
default settings) against a registered DataFrame. Baselines in the same run, on the same
text: mindsdb_sql_parser's `parse_sql` alone (what every such statement cost before the IN
fast path, before any planning or running: it grows faster than linearly), and DuckDB
called directly on the same data (the floor). Target: the whole request takes at most half
of what the full parser alone takes (`ratio_to_full_parser` <= 0.5). The answer is checked
to be exactly the matching ids.

Usage: python benchmarks/bench_inlist.py [--ids 20000] [--repeat 3]
Prints JSON and writes benchmarks/results/inlist.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from typing import Any

import duckdb
import pandas as pd
from mindsdb_sql_parser import parse_sql
from report import timed, write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

TARGET_RATIO = 0.5


def run(ids: int, repeat: int) -> dict[str, Any]:
    frame = pd.DataFrame({"id": range(ids * 2), "name": [f"n{i}" for i in range(ids * 2)]})
    wanted = list(range(0, ids * 4, 4))  # half of them present
    listed = ", ".join(map(str, wanted))
    ours_sql = f"SELECT id FROM df.people WHERE id IN ({listed}) ORDER BY id"
    direct_sql = f"SELECT id FROM people WHERE id IN ({listed}) ORDER BY id"
    expected = [i for i in wanted if i < ids * 2]
    con = duckdb.connect()
    con.register("people", frame)
    with tempfile.TemporaryDirectory() as tmp:
        server = spawn(tmp)
        try:
            with kbsql.connect(server.url) as client:
                client.register("people", frame)
                client.query("SELECT 1 AS one")  # warm up: connection, imports
                ours, answers = [], []
                parser, direct = [], []
                for i in range(repeat):  # interleaved, so all see the same machine load
                    # a new text each time (a comment), so no plan cache is hit
                    text = f"{ours_sql} /* run {i} */"
                    ours += timed(lambda t=text: answers.append(client.query(t)), 1)
                    parser += timed(lambda t=text: parse_sql(t), 1)
                    direct += timed(lambda: con.execute(direct_sql).fetchall(), 1)
        finally:
            server.stop()
    got = answers[-1] if answers else None
    assert got is not None and got["id"].tolist() == expected, "wrong rows for the IN list"
    ratio = statistics.median(ours) / statistics.median(parser)
    return {
        "ids": ids, "sql_bytes": len(ours_sql), "matching_rows": len(expected),
        "kbsql_http_median_ms": round(statistics.median(ours), 1),
        "baseline_full_parser_median_ms": round(statistics.median(parser), 1),
        "duckdb_direct_median_ms": round(statistics.median(direct), 1),
        "ratio_to_full_parser": round(ratio, 3),
        "target_ratio_to_full_parser": TARGET_RATIO, "meets_target": ratio <= TARGET_RATIO,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    write_report("inlist", {"in_list": run(args.ids, args.repeat),
                            "note": "shared machine: figures vary with its load"})


if __name__ == "__main__":
    main()
