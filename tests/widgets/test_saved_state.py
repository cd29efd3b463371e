"""Saved notebooks keep what the user saw: every kbsql widget (agent panel, chat, browser) and
the insert progress bar leave a static HTML output in their last state. Checked the way a
user meets it: nbclient executes, the notebook is saved and read back from disk, exported by
`jupyter nbconvert --to html`, and reopened without a kernel in JupyterLab (headless Chromium)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.jupyterlab_fixtures import needs_chromium
from tests.widgets.notebooks import write_saved_state_notebook

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
BARE_REPR = re.compile(r"\b(?:ChatWidget|AgentStreamPanel|KnowledgeBaseBrowser|VBox|HBox|HTML)\(")
WIDGET_REPR = re.compile(r"\b(?:ChatWidget|AgentStreamPanel|KnowledgeBaseBrowser|VBox)\((?:children=|')")
"""How a widget's repr starts (the cells' own code, shown in exports, calls them differently)."""


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("saved")
    path = write_saved_state_notebook(tmp_path / "saved.ipynb", tmp_path / "data")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    nbformat.write(nb, path)
    return path


def _outputs(path: Path, cell: int) -> list[dict]:
    return json.loads(path.read_text())["cells"][cell]["outputs"]  # the JSON as saved


def _html(output: dict) -> str:
    return "".join(output.get("data", {}).get("text/html", ""))  # saved as a list of lines


def _snapshot(outputs: list[dict], marker: str) -> str:
    found = [_html(o) for o in outputs if marker in _html(o)]
    assert len(found) == 1, f"expected one {marker} output, got {len(found)}"
    return found[0]


def test_no_output_is_a_bare_python_repr(saved: Path):
    for i, cell in enumerate(json.loads(saved.read_text())["cells"]):
        for out in cell["outputs"]:
            plain = "".join(out.get("data", {}).get("text/plain", "")) + "".join(out.get("text", ""))
            assert not BARE_REPR.search(plain), f"cell {i}: {plain[:200]}"
            if WIDGET_VIEW in out.get("data", {}):
                assert "text/plain" not in out["data"], f"cell {i}: a widget output with a repr line"


def test_the_progress_bar_is_saved_finished(saved: Path):
    outputs = _outputs(saved, 1)
    html = _snapshot(outputs, "kbsql-progress")
    assert 'data-state="done"' in html and 'data-done="1200" data-total="1200"' in html
    assert "done, 1,200 rows in" in html and "rows/s" in html
    assert WIDGET_VIEW not in json.dumps(outputs)  # no tqdm widget: nothing that saves as "0%"


def test_the_agent_panel_is_saved_with_its_steps_and_no_stray_line(saved: Path):
    outputs = _outputs(saved, 2)
    assert [WIDGET_VIEW in o.get("data", {}) for o in outputs] == [True, False]
    html = _snapshot(outputs, "kbsql-snapshot")
    assert 'data-status="done"' in html and "kb_query_tool" in html and "Refunds are accepted" in html


def test_the_chat_is_saved_with_the_whole_conversation(saved: Path):
    html = _snapshot(_outputs(saved, 3), "kbsql-chat-snapshot")  # displayed empty, updated later
    assert html.index("How long does shipping take?") < html.index("And refunds?")
    assert "Shipping takes five business days" in html and "Refunds are accepted" in html
    assert html.count('data-status="done"') == 2 and "no questions yet" not in html


def test_the_browser_is_saved_with_its_lists_and_last_search(saved: Path):
    html = _snapshot(_outputs(saved, 5), "kbsql-browser-snapshot")
    assert "<b>docs</b>" in html and "big" in html and "support" in html  # KB list, selection, agents
    assert "results for</b> refund" in html and "Refunds are accepted" in html


def test_nbconvert_html_shows_every_widget_state(saved: Path, tmp_path: Path):
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(saved),
                    "--output-dir", str(tmp_path)], check=True, capture_output=True, timeout=120)
    page = (tmp_path / "saved.html").read_text()
    for marker in ("kbsql-progress", "kbsql-chat-snapshot", "kbsql-browser-snapshot"):
        assert marker in page
    assert "And refunds?" in page and "done, 1,200 rows in" in page
    page = re.sub(r"<script.*?</script>", "", page, flags=re.DOTALL)  # the widget-state script
    assert not WIDGET_REPR.search(re.sub(r"<[^>]+>", "", page).replace("&#39;", "'"))


@needs_chromium
def test_reopened_in_jupyterlab_without_a_kernel(saved: Path, jupyterlab, browser_page, tmp_path: Path):
    """What a colleague sees opening the saved file: the snapshots, no dead widget text."""
    root = jupyterlab.root
    (root / "saved.ipynb").write_text(saved.read_text())
    shot = tmp_path / "reopened.png"
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 2400})
    page.goto(jupyterlab.page_url("saved.ipynb"), wait_until="domcontentloaded")
    # An untrusted (reopened) notebook's HTML is sanitized: classes and text stay,
    # data-* attributes and <style> go, so this checks classes and text only.
    progress = page.locator(".kbsql-progress", has_text="done, 1,200 rows")
    progress.wait_for(state="visible", timeout=90_000)
    for selector in (".kbsql-panel.kbsql-snapshot", ".kbsql-chat-snapshot",
                     ".kbsql-browser-snapshot"):
        snapshot = page.locator(selector).first
        snapshot.scroll_into_view_if_needed(timeout=30_000)  # JupyterLab renders cells lazily
        snapshot.wait_for(state="visible", timeout=30_000)
    assert "And refunds?" in page.locator(".kbsql-chat-snapshot").inner_text()
    for dead_text in ("Loading widget...", "Error displaying widget"):
        dead = page.get_by_text(dead_text)
        assert all(not dead.nth(i).is_visible() for i in range(dead.count()))
    body = page.locator(".jp-Notebook").inner_text()
    assert not WIDGET_REPR.search(body), body[:500]
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
