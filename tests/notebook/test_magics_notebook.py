"""Notebooks executed headless by nbclient in a real kernel: a failing cell stops "Run all"
with a short error, and no API key reaches saved outputs (notebooks/ runs in test_notebooks.py)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_notebook

QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
SECRET = "sk-proj-SECRET-4f9a2b7c1d"


def run(nb, cwd: Path) -> None:
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()


def outputs_text(nb) -> str:
    return "\n".join(str(o) for cell in nb.cells for o in cell.get("outputs", []))


def test_a_failing_cell_stops_run_all_with_a_short_error(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))
    nb = new_notebook(cells=[new_code_cell("%load_ext kbsql"), new_code_cell("%kbsql SELEC 1"),
                             new_code_cell("print('after')")])
    with pytest.raises(CellExecutionError):
        run(nb, tmp_path)
    error = nb.cells[1].outputs[0]
    assert error.output_type == "error"
    assert any("SELEC" in line for line in error.traceback)
    assert not any("Traceback" in line or 'File "' in line for line in error.traceback)
    assert len(error.traceback) <= 5
    assert nb.cells[2].get("outputs", []) == []  # never ran


def test_saved_outputs_never_contain_the_api_key(tmp_path: Path, server_url: str, monkeypatch):
    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KBSQL_API_KEY", SECRET)  # the kernel inherits it
    nb = new_notebook(cells=[
        new_code_cell("%load_ext kbsql"),
        new_code_cell(f"%kbsql_connect {server_url} --alias remote"),
        new_code_cell("%kbsql_connect --list"),
        new_code_cell("%kbsql SELECT 1 AS a"),
        new_code_cell("from kbsql.notebook import current_client\ncurrent_client()"),
        new_code_cell("from kbsql.notebook.magics import KbSql\n"
                      "[c for c in get_ipython().configurables if isinstance(c, KbSql)][0].manager"),
        new_code_cell("%config KbSql"),
        new_code_cell("%kbsql SELECT * FROM missing_kb"),
    ])
    with pytest.raises(CellExecutionError):  # the last cell fails on purpose: errors are outputs too
        run(nb, tmp_path)
    saved = nbformat.writes(nb)
    assert "api key set" in saved  # the key was found and used...
    assert "missing_kb" in saved
    assert SECRET not in saved  # ...and never written into the notebook
    assert SECRET[:12] not in saved
