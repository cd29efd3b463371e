"""Every benchmark still runs end to end and reports its figures against its baseline.

Small sizes only: this checks that the scripts work and report a ratio to a baseline, not
the figures themselves (those come from a full run on a quiet machine, never from a test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import pgvector_server

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"

CASES = {
    "knowledge": (["--smoke"], ["ingest_default_model", "search_100k_hash"]),
    "sql": (["--rows", "20000", "--repeat", "3", "--calls", "30", "--rounds", "1"], None),
    "agents": (["--chunks", "300", "--repeat", "2"], None),
    "magics": (["--rows", "2000", "--repeat", "1"], None),
    # the Chroma side is skipped here (CI has no chromadb; a run with it takes minutes)
    "vs_chroma": (["--docs", "3000", "--queries", "30", "--no-chroma"], ["kbsql", "targets"]),
    # on the session's PostgreSQL + pgvector (tests/conftest.py pgvector_server_dsn)
    "pgvector": (["--chunks", "1500", "--queries", "20"], ["search_ingest"]),
    "memory": (["--rounds", "1"], ["kbsql_serve", "baseline_bare_starlette_uvicorn_mb", "baseline_commit"]),
    "insert": (["--docs", "300", "--batch", "100"], ["baseline_rest_insert_docs_per_s"]),
    "embed": (["--chunks", "4", "--rounds", "1", "--variants", "onnx-int8"],
              ["ingest_chunks_per_s", "cosine_to_fp32", "variants_encode_alone"]),
    "retrieval": (["--smoke", "--configs", "default,fp32-dense,default-hybrid"],
                  ["tuning_sets", "heldout", "verdicts", "defaults"]),
    # one ranking that embeds sentences at search time and fuses ranks: the script's whole path
    # (each more costs ~10 CPU-s here)
    "retrieval_ranking": (["--smoke", "--rankings", "plainsentrank-0.5-k5-top3"],
                          ["tuning_sets", "heldout", "verdicts", "search_p50_ms", "ranking_cost"]),
    "peer": (["--docs", "200", "--repeat", "3"], ["servers"]),
    "threads": (["--docs", "200", "--batch", "20", "--rounds", "1"], ["baseline_threads_1_docs_per_s"]),
    "inlist": (["--ids", "2000", "--repeat", "1"], ["in_list"]),
    "long_statements": (["--heavy", "1", "--seconds", "1.5", "--columns", "300"],
                        ["baseline_no_long_statements", "default", "meets_target"]),
    "isolation": (["--rounds", "1", "--calls", "5", "--model-delay", "2", "--docs", "20",
                   "--heavy-timeout", "2", "--mysql-idlers", "40"],  # the flood's path, not its size
                  ["select_1", "kb_search", "load_answers"]),
    "uploads": (["--seconds", "1", "--rows", "200"], ["workbook", "xlsx_bomb", "targets"]),
    "scan_engine": (["--docs", "2000", "--queries", "4"], ["runs", "meets_target"]),
    "mysql": (["--calls", "10", "--rounds", "1", "--docs", "20", "--model", "hash-64"],
              ["select_1", "search", "meets_target"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_runs_and_reports_json(name, tmp_path, request):
    args, keys = CASES[name]
    env = {**os.environ, "KBSQL_BENCH_RESULTS": str(tmp_path)}
    if name == "pgvector":  # the session's PostgreSQL + pgvector (the bench makes its own database
        # on it): one initdb and start fewer than the bench starting its own
        env[pgvector_server.DSN_ENV] = request.getfixturevalue("pgvector_server_dsn")
    run = subprocess.run([sys.executable, str(BENCH / f"bench_{name}.py"), *args],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((tmp_path / f"{name}.json").read_text())
    assert report == json.loads(run.stdout[run.stdout.index("{"):])
    for key in keys or []:
        assert key in report
    text = json.dumps(report)
    # each benchmark states its target and whether this run met it
    assert "target" in text
