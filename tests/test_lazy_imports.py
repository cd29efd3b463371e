"""An idle `kbsql serve` stays small: the heavy libraries load when first needed.

benchmarks/bench_memory.py measures the RSS itself (target <= 150 MB idle); this guards the
cause cheaply: a fresh interpreter that builds the server's app and engine and answers
`SELECT 1` must not have imported faiss, pandas, pyarrow.parquet or the model's libraries."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["faiss", "pandas", "pyarrow.parquet", "tokenizers", "safetensors", "onnxruntime", "tqdm"]

SCRIPT = """
import json, sys, tempfile
from kbsql.engine import Engine
from kbsql.server.app import build_app
import kbsql.server.run
engine = Engine(tempfile.mkdtemp())
build_app(engine, bind_host="127.0.0.1")
assert engine.query("SELECT 1").data
print(json.dumps(sorted(m for m in %r if m in sys.modules)))
"""


def test_idle_server_does_not_import_heavy_libraries():
    run = subprocess.run([sys.executable, "-c", SCRIPT % HEAVY], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


def test_faiss_loads_on_first_index_use(tmp_path):
    script = """
import sys
from kbsql.engine.knowledge import index
assert "faiss" not in sys.modules
import numpy as np
flat = index.faiss.IndexFlatIP(4)
flat.add(np.eye(4, dtype="float32"))
assert flat.ntotal == 4 and "faiss" in sys.modules and index.faiss is sys.modules["faiss"]
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
