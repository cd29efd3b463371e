"""The load-and-faults script at small size: three servers on one PostgreSQL, a server
killed with SIGKILL and PostgreSQL restarted mid-run (benchmarks/bench_scaleout.py).

What it asserts holds whatever the timing: every write a client saw acknowledged is in the
table exactly once with its last acknowledged content, every acknowledged delete is gone,
nothing else is there, the server's view and the HNSW index agree with the table, and no
request answered 500 or anything wrong (a short search, a row outside its filter, a wrong
aggregate or agent answer). The figures themselves come from full runs, never from here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import pgvector_server

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scaleout.py"


def test_kill_9_and_a_postgresql_restart_lose_or_duplicate_nothing_acknowledged(tmp_path):
    pgvector_server.start_for_test("the scale-out test").stop()  # the script starts its own
    run = subprocess.run([sys.executable, str(BENCH), "--faults-only", "--clients", "4", "--ops", "80",
                          "--seed-docs", "100", "--outage", "2"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "KBSQL_BENCH_RESULTS": str(tmp_path)}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    faults = json.loads((tmp_path / "scaleout.json").read_text())["faults"]
    # both faults happened while clients were still working
    assert 0 < faults["faults"]["server_killed_at_op"] < faults["faults"]["postgresql_stopped_at_op"] < 320
    assert faults["faults"]["postgresql_started_at_op"] < 320
    check = faults["check"]
    assert check["documents_stored"] == check["documents_expected"] > 100
    for key in ("lost", "duplicated", "wrong_content", "deleted_present", "unexpected",
                "not_acknowledged_ids", "server_view_differs", "index_misses", "index_finds_deleted"):
        assert check[key] == 0, (key, check)
    assert faults["problems"] == [] and faults["problem_count"] == 0
    assert not any(key.startswith("answers_5") and key != "answers_503" for key in faults["answers"])
    assert faults["server_tracebacks"] == 0
    assert sum(op["count"] for op in faults["operations"].values()) == 320
