"""Crash safety: a child process inserting is killed (SIGKILL) at random points; after a
restart every insert is there whole or not at all, and the index agrees with the rows."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from kbsql.engine import Engine
from kbsql.engine.knowledge.chunking import ChunkingConfig, split_text
from tests.knowledge.conftest import HASH_MODEL, table

ROWS_PER_INSERT = 150
CHUNKING = {"text_chunking_config": {"chunk_size": 100, "chunk_overlap": 0}}

CHILD = textwrap.dedent("""
    import sys
    from kbsql.engine import Engine
    from kbsql.engine.knowledge import index
    index.PERSIST_EVERY = 700  # rewrite the cache file often, so kills land inside saves too
    eng = Engine(sys.argv[1])
    record = eng.catalog.knowledge_base("mindsdb", "kb")
    batch = int(sys.argv[2])
    print("ready", flush=True)  # imports done: the parent's random clock starts now
    while True:
        words = " ".join(f"word{batch}x{j}" for j in range(40))
        rows = [{"id": batch * 1000 + i + 1, "content": words, "batch": batch} for i in range(ROWS)]
        rows.append({"id": 0, "content": f"version {batch} " * 30, "batch": batch})  # an upsert
        print(f"begin {batch}", flush=True)
        eng.insert_rows(record, rows)
        if batch % 4 == 3:
            eng.query(f"DELETE FROM kb WHERE batch = {batch - 2}")
        print(f"committed {batch}", flush=True)
        batch += 1
""").replace("ROWS", str(ROWS_PER_INSERT))


def _check(data_dir: Path, committed: int, leftovers: set[int]) -> int:
    """`leftovers`: batches whose DELETE a kill prevented (the next child starts after them)."""
    with Engine(data_dir) as eng:
        rows = table(eng, "SELECT id, chunk_id, metadata FROM kb")
        per_batch = Counter(r["metadata"]["batch"] for r in rows if r["id"] != "0")
        batches = sorted(per_batch)
        for batch, count in per_batch.items():
            words = " ".join(f"word{batch}x{j}" for j in range(40))
            per_row = len(split_text(words, ChunkingConfig.from_preprocessing(CHUNKING)))
            assert count == ROWS_PER_INSERT * per_row, (batch, count)  # never half an insert
        newest = max(batches) if batches else -1
        assert committed <= newest <= committed + 1
        deleted = {b - 2 for b in range(newest) if b % 4 == 3} - leftovers
        expected = set(range(newest + 1)) - deleted
        # the newest insert's follow-up DELETE is its own transaction: done or not, never half
        assert set(batches) in (expected, expected - {newest - 2})
        if newest % 4 == 3 and newest - 2 in batches:
            leftovers.add(newest - 2)
        versions = {r["metadata"]["batch"] for r in rows if r["id"] == "0"}
        assert versions == {newest}  # the upserted document: exactly one version, the newest
        doc0 = [r for r in rows if r["id"] == "0"]
        assert len({r["chunk_id"] for r in doc0}) == len(doc0) == int(doc0[0]["chunk_id"].split(":")[2]
                                                                      .split("of")[1])
        # the index and the rows agree: a search over everything finds exactly the rows
        found = table(eng, f"SELECT chunk_id FROM kb WHERE content = 'word{newest}x1' LIMIT 100000")
        assert sorted(r["chunk_id"] for r in found) == sorted(r["chunk_id"] for r in rows)
        handle = eng.knowledge.handle(eng.catalog.knowledge_base("mindsdb", "kb"))
        assert handle.index.live == len(rows)
        return newest


def test_kill_9_during_inserts_never_leaves_half_an_insert(tmp_path: Path) -> None:
    data_dir = tmp_path / "crash"
    with Engine(data_dir) as eng:
        eng.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": HASH_MODEL,
                                              "metadata_columns": ["batch"],
                                              "preprocessing": CHUNKING})
    rng = random.Random(20261121)
    next_batch, kills, leftovers, mid_insert = 0, 0, set(), 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _trial in range(6):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), str(next_batch)],
                                 stdout=subprocess.PIPE, text=True, env=env)
        # imports take seconds on a loaded machine: kill only once the child can insert
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.8, 2.5))
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        kills += 1
        lines = out.splitlines()
        done = [int(line.split()[1]) for line in lines if line.startswith("committed")]
        mid_insert += bool(lines) and lines[-1].startswith("begin")
        committed = max(done) if done else next_batch - 1
        newest = _check(data_dir, committed, leftovers)
        next_batch = newest + 1
    assert kills == 6 and next_batch >= 3  # inserts really happened between the kills
    assert mid_insert >= 1  # and at least one kill landed inside an insert
