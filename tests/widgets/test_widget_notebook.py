"""A notebook executed headless (nbclient) and saved keeps the static snapshot of the steps;
`%agent` over a slowly writing model shows its tokens as they come."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.agents.fakes import FakeLLM, text
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


STREAMING_CELLS = [
    """\
%load_ext kbsql
%kbsql_connect {data_dir}
from kbsql.notebook import current_client
current_client().agents.create("writer", model={{"provider": "openai", "model_name": "m1",
                                                 "base_url": {base_url!r}}})
""",
    "%agent writer How long do refunds take?",
]
SLOW_ANSWER = "Refunds take five days to reach the card used for the purchase, the shop says."


class WatchingClient(NotebookClient):
    """nbclient that notes, for each widget update carrying part of the answer, whether the
    scripted model had finished writing when the update reached the frontend."""

    def __init__(self, nb: nbformat.NotebookNode, fake: FakeLLM, **kwargs: Any):
        super().__init__(nb, **kwargs)
        self.fake = fake
        self.answer_updates: list[tuple[str, int]] = []

    def handle_comm_msg(self, outs: list[Any], msg: dict[str, Any], cell_index: int) -> None:
        value = str(msg["content"]["data"].get("state", {}).get("value", ""))
        if "Refunds" in value and "kbsql-snapshot" not in value:
            self.answer_updates.append((value, self.fake.finished_streams))
        super().handle_comm_msg(outs, msg, cell_index)


def test_agent_panel_shows_tokens_before_the_model_ends(tmp_path: Path):
    """`%agent` over a model that writes slowly (0.1 s per event): the panel's answer shows its
    first words while the model is still writing, grows, and the saved notebook keeps the
    whole answer."""
    with FakeLLM("openai", [text(SLOW_ANSWER)], delay=0.1) as fake:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(c.format(data_dir=str(tmp_path / "data"),
                                                       base_url=fake.base_url))
                    for c in STREAMING_CELLS]
        client = WatchingClient(nb, fake, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    updates = client.answer_updates
    assert updates, "the panel never showed the answer"
    first, finished_then = updates[0]
    assert finished_then == 0 and "Refunds" in first and "the shop says" not in first
    assert len(updates) >= 2  # it grew in more than one step
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    outputs = nbformat.read(path, as_version=4).cells[1].outputs
    snapshot = next(o["data"]["text/html"] for o in outputs
                    if "kbsql-snapshot" in o.get("data", {}).get("text/html", ""))
    assert SLOW_ANSWER in snapshot and 'data-status="done"' in snapshot
