"""The notebooks of notebooks/ as a user runs them: executed by nbclient in a real kernel, Run
All twice in the same kernel where that matters, and nothing left on disk afterwards."""

from __future__ import annotations

import glob
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def leftovers(prefix: str) -> set[str]:
    return set(glob.glob(str(Path(tempfile.gettempdir()) / f"{prefix}*")))


def outputs(nb) -> list[dict]:
    return [o for cell in nb.cells for o in cell.get("outputs", [])]


def text_of(nb) -> str:
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for o in outputs(nb))


def execute(name: str, cwd: Path, runs: int = 1):
    shutil.copy(NOTEBOOKS / name, cwd / name)
    nb = nbformat.read(cwd / name, as_version=4)
    assert not outputs(nb), f"{name} is committed with outputs"
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    with client.setup_kernel():
        for _ in range(runs):  # Run All, again, in the same kernel
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    cell.outputs = []
                    client.execute_cell(cell, index)
    assert "error" not in {o["output_type"] for o in outputs(nb)}
    return nb


def test_quickstart_runs_twice_and_leaves_no_folder(tmp_path: Path):
    before = leftovers("kbsql-quickstart-")
    nb = execute("quickstart.ipynb", tmp_path, runs=2)
    text = text_of(nb)
    assert "3 rows affected" in text and "Closed quickstart." in text
    assert "Replace the pump seal every year." in text  # the agent answered from the KB
    assert leftovers("kbsql-quickstart-") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quickstart.ipynb"]


@pytest.mark.slow
def test_search_your_own_csv(tmp_path: Path):
    before = leftovers("kbsql-csv-")
    nb = execute("search-your-own-csv.ipynb", tmp_path)
    text = text_of(nb)
    assert "1,000 tickets written" in text and "1000 rows affected" in text
    assert "insert into tickets_kb: done, 1,000 rows in" in text  # the bar it promises, saved
    assert "<kbsql plot: map of tickets_kb: 1000 chunks>" in text  # one dot per ticket
    html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in outputs(nb))
    assert "A search without LIMIT returns at most 10 rows" in html  # the default-limit note
    assert text.count("<kbsql plot:") == 2 and "image/png" in str(outputs(nb))
    assert "refund" in html.lower() and "kbsql-snapshot" in html  # the agent's saved panel
    assert leftovers("kbsql-csv-") == before


@pytest.mark.slow
def test_evaluate_and_tune(tmp_path: Path):
    before = leftovers("kbsql-eval-")
    nb = execute("evaluate-and-tune.ipynb", tmp_path)
    text = text_of(nb)
    assert "recall@1" in text and "chunk 300, hybrid" in text
    # the text says hybrid search finds the right topic no more often than the plain search
    table = next(o["data"]["text/plain"] for o in outputs(nb) if "chunk 300, hybrid" in
                 str(o.get("data", {}).get("text/plain", "")))
    rows = {line.rsplit(None, 3)[0].strip(): [float(v) for v in line.split()[-3:]]
            for line in table.splitlines()[1:]}
    assert all(h <= p for h, p in zip(rows["chunk 300, hybrid"], rows["chunk 300"], strict=True)), table
    assert "<kbsql plot: recall@k of evaluations>" in text  # both curves: drawn so both show
    assert "insert into docs_300: done, 8 rows in" in text  # the saved, finished progress bar
    assert "evaluate mindsdb.docs_300: done, 8 questions in" in text  # EVALUATE's, saved too
    assert "total_found" in text and "cumulative_recall" in text  # EVALUATE's result table
    assert text.count("<kbsql plot:") == 3 and "<kbsql plot: recall@k of evaluations>" in text
    assert leftovers("kbsql-eval-") == before
