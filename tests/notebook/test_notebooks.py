"""The notebooks of notebooks/ as a user runs them: executed by nbclient in a real kernel, Run
All twice in the same kernel with the same outputs both times (but for timings), and nothing
left on disk afterwards."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture
def kernel_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kernel's own $TMPDIR, where a notebook's `tempfile.gettempdir()` folder goes, so
    what is left there is this run's. Checked in the shared /tmp, two runs of this file at
    once (the suite beside a helper's run) each found the other's kbsql-csv-<pid> folder,
    which its own kernel removed when its notebook ended, and both failed."""
    return tmp_path_factory.mktemp("kernel-tmp")


def leftovers(tmp: Path) -> list[str]:
    """What the kernel left in its temporary directory (`kernel_tmp`)."""
    return sorted(p.name for p in tmp.iterdir())


def outputs(nb) -> list[dict]:
    return [o for cell in nb.cells for o in cell.get("outputs", [])]


def text_of(nb) -> str:
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for o in outputs(nb))


TIMINGS = [
    (re.compile(r"\b(done|failed)(,? .*?)? in (\d+ min )?[\d.,]+ (ms|s)\b"), r"\1\2 in T"),  # a bar's end
    # or an agent's ("1 min 56 s" when the machine is loaded)
    (re.compile(r"\([\d.,]+ (rows|questions)/s\)"), r"(R \1/s)"),  # its rate
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?"), "TIMESTAMP"),  # _updated_at, created_at
    (re.compile(r"(avg_query_time(&quot;|\\?\")?:\s*)[\d.e-]+"), r"\1T"),  # EVALUATE's mean time, as JSON
]
EVALUATE_TIME = re.compile(r"(?<![\d.])0\.0\d+(e-?\d+)?(?!\d)")
"""What may differ between two Run Alls: how long things took, and when. Nothing else
(outputs are compared as JSON, byte for byte, after these)."""
FRESH_IDS = [
    (re.compile(r'"model_id": "[0-9a-f]{32}"'), '"model_id": "ID"'),  # ipywidgets' comm id
    (re.compile(r"trace [0-9a-f]{32}"), "trace ID"),  # an agent run's id, in its panel
]
"""Identifiers drawn fresh for each run by design (a widget's model, an agent run's trace)."""


def normalised(nb) -> list[str]:
    """Each code cell's outputs as JSON, without timings and fresh identifiers; the
    execution count (the prompt's number, which counts on) is left out."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        shown = [{k: v for k, v in o.items() if k != "execution_count"} for o in cell.outputs]
        text = json.dumps(shown, sort_keys=True, indent=1)
        if "avg_query_time" in text:  # EVALUATE's table: its mean search time (seconds, 0.0...),
            # whose width moves pandas' text columns, so spaces count as one there
            text = re.sub(r"(\\n|\s)+", " ", EVALUATE_TIME.sub("T", text))
        for pattern, replacement in (*TIMINGS, *FRESH_IDS):
            text = pattern.sub(replacement, text)
        cells.append(text)
    return cells


def table_box_style(html: str) -> str:
    """The style of the element the first <table> of `html` sits in."""
    from html.parser import HTMLParser

    class Finder(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.open: list[str] = []
            self.found = ""

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "table" and not self.found:
                self.found = next((s for e in reversed(self.open) for s in [e] if s), "none")
            self.open.append(dict(attrs).get("style") or "" if tag == "div" else "")

        def handle_endtag(self, tag: str) -> None:
            if self.open:
                self.open.pop()

    finder = Finder()
    finder.feed(html)
    return finder.found


def execute(name: str, cwd: Path, tmp: Path, runs: int = 2):
    """Run All `runs` times in one kernel, as a user would; every run's outputs must be the
    same as the first's (apart from TIMINGS and FRESH_IDS). Streams are merged as JupyterLab
    merges them in a saved notebook. The kernel's temporary directory is `tmp`; it has
    ended (nbclient waits for its process) when this returns."""
    shutil.copy(NOTEBOOKS / name, cwd / name)
    nb = nbformat.read(cwd / name, as_version=4)
    assert not outputs(nb), f"{name} is committed with outputs"
    client = NotebookClient(nb, timeout=300, kernel_name="python3", coalesce_streams=True,
                            resources={"metadata": {"path": str(cwd)}})
    seen = []
    with client.setup_kernel(env={**os.environ, "TMPDIR": str(tmp)}):
        for _ in range(runs):  # Run All, again, in the same kernel
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    cell.outputs = []
                    client.execute_cell(cell, index)
            seen.append(normalised(nb))
    assert "error" not in {o["output_type"] for o in outputs(nb)}
    for again in seen[1:]:
        for index, (first, later) in enumerate(zip(seen[0], again, strict=True)):
            assert first == later, f"{name}: code cell {index} differs on Run All again:\n" + "".join(
                difflib.unified_diff(first.splitlines(True), later.splitlines(True), n=1))
    return nb


def test_every_notebook_is_run_twice_here():
    """Each notebook of notebooks/ has its test below, which runs it twice (Run All again)."""
    tested = {"quickstart.ipynb", "search-your-own-csv.ipynb", "evaluate-and-tune.ipynb"}
    assert {p.name for p in NOTEBOOKS.glob("*.ipynb")} == tested


def test_quickstart_runs_twice_and_leaves_no_folder(tmp_path: Path, kernel_tmp: Path):
    nb = execute("quickstart.ipynb", tmp_path, kernel_tmp)
    text = text_of(nb)
    assert "3 rows affected" in text and "Closed quickstart." in text
    assert "Replace the pump seal every year." in text  # the agent answered from the KB
    # "what's the boiler pressure?": the stored frame's text, whole; shown as a frame it was
    # cut before its answer ("The boiler heats water to 60 degrees. Its pres...")
    assert "\nThe boiler heats water to 60 degrees. Its pressure should stay near 2 bar.\n" in text
    assert "Its pres..." not in text
    # the follow-up "And what does it move?" is answered only through the conversation ("it":
    # the pump of the question before; asked alone the offline agent finds nothing to quote)
    assert "A: The pump moves water from the tank to the garden." in text
    assert "\nThe pump moves water from the tank to the garden. [1:content:" in text  # the returned string
    assert f"embedded ({kernel_tmp}/kbsql-quickstart-" in text  # its folder was in the kernel's TMPDIR
    assert leftovers(kernel_tmp) == []  # and the last cell removed it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quickstart.ipynb"]


@pytest.mark.slow
def test_search_your_own_csv(tmp_path: Path, kernel_tmp: Path):
    nb = execute("search-your-own-csv.ipynb", tmp_path, kernel_tmp)
    text = text_of(nb)
    assert "1,000 tickets written" in text and "1000 rows affected" in text
    assert "insert into tickets_kb: done, 1,000 rows in" in text  # the bar it promises, saved
    assert "<kbsql plot: map of tickets_kb: 1000 chunks>" in text  # one dot per ticket
    html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in outputs(nb))
    assert "A search without LIMIT returns at most 10 rows" in html  # the default-limit note
    assert text.count("<kbsql plot:") == 2 and "image/png" in str(outputs(nb))
    assert "refund" in html.lower() and "kbsql-snapshot" in html  # the agent's saved panel
    # the follow-up "And which of them are about a kettle?" is read with the refund question
    # before it: kettles returned for a refund (asked alone: kettles that switch off)
    panel = text.split("Q: And which of them are about a kettle?", 1)[1]
    follow = panel.split("\nA: ", 1)[1].split("\n", 1)[0]
    assert follow.startswith("I returned the kettle") and "switches off" not in follow, follow
    # the search joined back to the table shows the tickets' text: five login problems
    join = next(c for c in nb.cells if c.cell_type == "code" and "'cannot sign in'" in c.source)
    assert join.outputs[0]["data"]["text/plain"].count("I cannot log in") == 5
    assert f"embedded ({kernel_tmp}/kbsql-csv-" in text  # its folder was in the kernel's TMPDIR
    assert leftovers(kernel_tmp) == []  # and the last cell removed it


@pytest.mark.slow
def test_evaluate_and_tune(tmp_path: Path, kernel_tmp: Path):
    nb = execute("evaluate-and-tune.ipynb", tmp_path, kernel_tmp)
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
    # that wide table scrolls sideways inside its output rather than being cut at the edge
    wide = next("".join(o["data"]["text/html"]) for o in outputs(nb)
                if "avg_query_time" in "".join(o.get("data", {}).get("text/html", "")))
    assert table_box_style(wide).startswith("overflow-x:auto"), wide[:300]
    assert text.count("<kbsql plot:") == 3 and "<kbsql plot: recall@k of evaluations>" in text
    assert f"embedded ({kernel_tmp}/kbsql-eval-" in text  # its folder was in the kernel's TMPDIR
    assert leftovers(kernel_tmp) == []  # and the last cell removed it
