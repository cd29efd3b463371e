"""One settings table (engine/settings_table.py), read the same way everywhere: a flag given
(or `kbsql.connect(settings=...)`) > environment > config.json > default.

The bug this pins: with `{"statement_timeout": 2}` in config.json, `kbsql serve` started
without the flag let a 1e10-pair join run 88 s (its flag defaults overwrote the file), and a
misspelt key was ignored without a word."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest

import kbsql
from kbsql.engine.config import EngineConfig
from kbsql.engine.settings_table import SettingError
from kbsql.server.process import spawn

HEAVY = "SELECT count(*) FROM df.n a, df.n b, df.n c WHERE a.x + b.x + c.x = -1"  # 2.7e10 rows


def write_config(data: Path, values: dict) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    (data / "config.json").write_text(json.dumps(values))
    return data


def refused(data: Path) -> str:
    """`kbsql serve` on `data` fails to start: its one line on stderr."""
    done = subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--port", "0", "--data-dir",
                           str(data)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_config_json_statement_timeout_holds_under_kbsql_serve(tmp_path: Path) -> None:
    with spawn(write_config(tmp_path / "data", {"statement_timeout": 2})) as server:
        with kbsql.connect(server.url) as client:
            client.register("n", pd.DataFrame({"x": range(3000)}))
        start = time.monotonic()
        answer = httpx.post(f"{server.url}/api/sql/query", json={"query": HEAVY}, timeout=120).json()
        took = time.monotonic() - start
    assert answer["type"] == "error" and "time limit (2 s" in answer["error_message"], answer
    assert 1.5 < took < 15, took


def test_an_unknown_key_refuses_to_start_naming_the_nearest(tmp_path: Path) -> None:
    line = refused(write_config(tmp_path / "typo", {"statement_timeot": 2}))
    assert "'statement_timeot'" in line and "did you mean 'statement_timeout'" in line, line
    line = refused(write_config(tmp_path / "type", {"statement_timeout": "2s"}))
    assert "statement_timeout must be a number" in line and "'2s'" in line, line


def test_a_flag_beats_the_environment_which_beats_the_file(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """As `kbsql serve` loads its engine (`cli.open_engine`): the flags given as settings."""
    data = write_config(tmp_path / "data", {"statement_timeout": 5, "max_chunks_per_row": 50})
    monkeypatch.setenv("KBSQL_STATEMENT_TIMEOUT", "4")
    served = EngineConfig.load(data, settings={"statement_timeout": 3}, served=True)
    assert served.statement_timeout == 3 and served.max_chunks_per_row == 50
    assert EngineConfig.load(data, served=True).statement_timeout == 4
    monkeypatch.delenv("KBSQL_STATEMENT_TIMEOUT")
    assert EngineConfig.load(data, served=True).statement_timeout == 5
    (data / "config.json").unlink()
    assert EngineConfig.load(data, served=True).statement_timeout == 120  # the served default
    assert EngineConfig.load(data).statement_timeout is None  # embedded: no limit
    monkeypatch.setenv("KBSQL_MAX_CHUNKS_PER_ROW", "many")
    with pytest.raises(SettingError, match=r"\$KBSQL_MAX_CHUNKS_PER_ROW: max_chunks_per_row must be"):
        EngineConfig.load(data)


def test_connect_takes_settings_for_the_embedded_engine(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="did you mean 'statement_timeout'"):
        kbsql.connect(data_dir=tmp_path / "d", settings={"statement_timeot": 1})
    with kbsql.connect(data_dir=tmp_path / "d", settings={"statement_timeout": 1}, progress=None) as client:
        client.register("n", pd.DataFrame({"x": range(3000)}))
        start = time.monotonic()
        with pytest.raises(Exception, match="time limit"):
            client.sql(HEAVY)
        assert time.monotonic() - start < 10
