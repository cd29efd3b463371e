"""A notebook executed headless (nbclient) and saved keeps the static snapshot of the steps."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.widgets.notebooks import write_demo_notebook

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def saved_notebook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo notebook executed headless by nbclient and saved to disk (once per module)."""
    tmp_path = tmp_path_factory.mktemp("nb")
    path = write_demo_notebook(tmp_path / "demo.ipynb", tmp_path / "data", fallback=True)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    nbformat.write(nb, path)
    return path


def test_saved_notebook_contains_the_snapshot(saved_notebook: Path):
    path = saved_notebook
    saved = nbformat.read(path, as_version=4)  # reopened from disk
    outputs = saved.cells[1].outputs
    printed = "".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stdout")
    answer = printed.split("ANSWER:", 1)[1].strip().splitlines()[0]
    assert answer
    widgets = [o for o in outputs if WIDGET_VIEW in o.get("data", {})]
    snapshots = [o["data"]["text/html"] for o in outputs
                 if "kbsql-snapshot" in o.get("data", {}).get("text/html", "")]
    assert len(widgets) == 1 and len(snapshots) == 1  # the live panel, then its snapshot
    html = snapshots[0]
    assert html.index("1. kb_list_tool") < html.index("2. kb_query_tool")
    assert "SELECT</span>" in html  # the SQL input, highlighted
    assert 'data-status="done"' in html and "done in" in html
    assert answer.split()[0] in html
    text = next(o["data"]["text/plain"] for o in outputs
                if "kbsql-snapshot" in o.get("data", {}).get("text/html", ""))
    assert "kb_query_tool" in text and "A: " in text
    # nbclient stored the widget state, so nbconvert/Voila can also render the live panel
    state = saved.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert any(m["model_name"] == "AccordionModel" for m in state.values())


def test_nbconvert_html_of_the_saved_notebook_shows_the_steps(saved_notebook: Path):
    """What GitHub-like static renderers get: the HTML export carries the snapshot."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(saved_notebook, as_version=4))
    snapshot = body[body.index("kbsql-snapshot"):]
    assert snapshot.index("1. kb_list_tool") < snapshot.index("2. kb_query_tool")
    assert "Refunds are accepted within 30 days" in snapshot and 'data-status="done"' in snapshot


def test_without_widgets_the_live_html_display_ends_as_the_snapshot(saved_notebook: Path):
    outputs = nbformat.read(saved_notebook, as_version=4).cells[2].outputs
    displays = [o for o in outputs if o.output_type == "display_data"]
    assert len(displays) == 1  # one display, updated in place while the stream ran
    assert WIDGET_VIEW not in displays[0].data
    html = displays[0].data["text/html"]
    assert "kbsql-snapshot" in html and 'data-status="done"' in html
    assert html.index("1. kb_list_tool") < html.index("2. kb_query_tool")
    assert "Shipping takes five business days" in html
