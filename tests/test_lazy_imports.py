"""An idle `kbsql serve` stays small: the heavy libraries load when first needed.

benchmarks/bench_memory.py measures the RSS itself (target <= 100 MB idle); this guards the
cause cheaply: a fresh interpreter that builds the server's app and engine and answers
`SELECT 1` must not have imported faiss, pandas, pyarrow.parquet or the model's libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
from kbsql.engine.knowledge import index, index_build
assert "faiss" not in sys.modules
import numpy as np
flat = index_build.faiss.IndexFlatIP(4)
flat.add(np.eye(4, dtype="float32"))
assert flat.ntotal == 4 and "faiss" in sys.modules and index_build.faiss is sys.modules["faiss"]
assert sys.modules["faiss"].omp_get_max_threads() == 1  # one thread outside index_build.all_cores
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


OPENED = """
import json, sys, tempfile
from kbsql.engine import settings_table
assert "kbsql.engine.engine" not in sys.modules  # the flags are built without the engine
from kbsql.engine import Engine
from kbsql.server.app import build_app
engine = Engine(tempfile.mkdtemp())
build_app(engine, bind_host="127.0.0.1")
engine.list_knowledge_bases("mindsdb")
print(json.dumps(sorted(m for m in ["duckdb", "pyarrow", "faiss", "pandas"] if m in sys.modules)))
engine.close()
"""


def test_an_opened_engine_loads_duckdb_and_arrow_on_its_first_statement():
    """Issue #33 item 6: an idle `kbsql serve` (engine opened, catalog read) holds neither
    DuckDB nor Arrow (70 MB of the 144 MB it held); the first statement loads them."""
    run = subprocess.run([sys.executable, "-c", OPENED], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


PARSER = """
import sys, kbsql
from kbsql.engine import Engine
import tempfile
engine = Engine(tempfile.mkdtemp())
assert engine.query("SELECT 1").data == [[1]]
from mindsdb_sql_parser import parse_sql
assert parse_sql("CREATE TABLE t (a int, b varchar(3))").to_string().startswith("CREATE TABLE t (a int")
print("sqlalchemy" in sys.modules)
import sqlalchemy  # anyone else's import of it still works
print(sqlalchemy.types.Integer.__name__)
"""


def test_the_sql_parser_loads_without_sqlalchemy_and_sqlalchemy_still_imports():
    """mindsdb_sql_parser imports SQLAlchemy (0.3-0.6 s) only to print column types given as
    SQLAlchemy classes; kbsql keeps that one import out (kbsql/_parser_import.py)."""
    pytest.importorskip("sqlalchemy")
    run = subprocess.run([sys.executable, "-c", PARSER], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["False", "Integer"]
