"""Statements in parallel on their own DuckDB cursors, a deadline that interrupts, and Ctrl-C
in the embedded engine (the server-side counterparts, with disconnects, are in
tests/test_server_isolation.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd

from kbsql.engine import Engine

HEAVY = "SELECT count(*) FROM df.n a, df.n b, df.n c WHERE a.x + b.x + c.x = -1"


def heavy_engine(path: Path, config: dict | None = None) -> Engine:
    path.mkdir(parents=True, exist_ok=True)
    if config:
        (path / "config.json").write_text(json.dumps(config))
    engine = Engine(path)
    engine.register_dataframe("n", pd.DataFrame({"x": range(3000)}))  # 2.7e10 rows joined
    return engine


def test_a_heavy_statement_does_not_block_another_and_its_deadline_stops_it(tmp_path: Path) -> None:
    with heavy_engine(tmp_path / "d", {"statement_timeout": 3}) as engine:
        done: dict = {}

        def heavy() -> None:
            start = time.monotonic()
            done["answer"] = engine.query(HEAVY).to_json()
            done["seconds"] = time.monotonic() - start

        thread = threading.Thread(target=heavy)
        thread.start()
        time.sleep(0.5)
        for _ in range(5):  # while it runs, other statements answer at once
            start = time.monotonic()
            assert engine.query("SELECT 1").to_json()["data"] == [[1]]
            assert engine.query("SELECT sum(x) FROM df.n").to_json()["data"] == [[4498500]]
            assert time.monotonic() - start < 1.0
        thread.join(30)
        message = done["answer"].get("error_message", "")
        assert done["answer"]["type"] == "error" and "time limit" in message, done
        assert "3 s" in message and "statement_timeout" in message and len(message.splitlines()) == 1
        assert 2.5 < done["seconds"] < 8, done["seconds"]


SCRIPT = """
import os, signal, threading, time, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a kernel has it (a background
import pandas as pd                                       # job may have started with it ignored)
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
shell.run_cell("%load_ext kbsql")
shell.run_cell("%kbsql_connect {data}")
import kbsql
c = kbsql.connect(data_dir={data!r})
c.register("n", pd.DataFrame({{"x": range(3000)}}))
sent = []


def interrupt_once_running():  # Ctrl-C while DuckDB runs the statement (not while it starts)
    main = threading.main_thread().ident
    while True:
        frame, names = sys._current_frames().get(main), set()
        while frame is not None:
            names.add(frame.f_code.co_qualname)
            frame = frame.f_back
        if names & {{"DuckSession._fetch", "MainThreadRelay.run"}}:
            break
        time.sleep(0.02)
    time.sleep(0.5)
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=interrupt_once_running, daemon=True).start()
result = shell.run_cell("%kbsql {heavy}")
print("SECONDS", round(time.monotonic() - sent[0], 1), flush=True)
print("FAILED", not result.success, type(result.error_in_exec).__name__, flush=True)
print("NEXT", c.sql("SELECT 42").data, flush=True)
"""


def test_ctrl_c_stops_an_embedded_statement_with_one_line(tmp_path: Path) -> None:
    data = tmp_path / "nb"
    code = textwrap.dedent(SCRIPT.format(data=str(data), heavy=HEAVY))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    out = run.stdout
    assert "FAILED True ShortError" in out, (out, run.stderr[-3000:])
    seconds = float(out.split("SECONDS ", 1)[1].split()[0])
    assert seconds < 5, out  # stopped at once after Ctrl-C, not run to its end
    assert "NEXT [[42]]" in out
    shown = [line for line in out.splitlines() if "Interrupted [nb: embedded]" in line]  # issue 26's line
    assert len(shown) == 1 and "Traceback" not in out, out


INSERT_SCRIPT = """
import os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import pandas as pd
import kbsql
c = kbsql.connect(data_dir={data!r})
c.register("docs", pd.DataFrame({{"id": range(60000),
                                  "content": [f"document {{i}} on topic {{i % 97}}" for i in range(60000)]}}))
c.sql("CREATE KNOWLEDGE_BASE kb USING embedding_model = {{'provider': 'kbsql', 'model_name': 'hash-64'}}")
threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    c.sql("INSERT INTO kb SELECT id, content FROM df.docs")
    print("FINISHED", flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
print("ROWS", c.sql("SELECT count(id) FROM kb").data, flush=True)
c.sql("INSERT INTO kb (id, content) VALUES (1, 'after the interrupt')")
print("AFTER", c.sql("SELECT count(id) FROM kb").data, flush=True)
c.close()
"""


def test_ctrl_c_during_an_insert_stores_none_of_it(tmp_path: Path) -> None:
    """60,000 rows into a knowledge base, Ctrl-C after 1.5 s (a few thousand embedded): the
    knowledge base holds none of them, then takes the next insert; a new process sees
    the same."""
    data = tmp_path / "d"
    code = textwrap.dedent(INSERT_SCRIPT.format(data=str(data)))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    out = run.stdout
    assert "INTERRUPTED" in out and "ROWS [[0]]" in out and "AFTER [[1]]" in out, (out, run.stderr[-3000:])
    with Engine(data) as engine:
        assert engine.query("SELECT count(id) FROM kb").to_json()["data"] == [[1]]
