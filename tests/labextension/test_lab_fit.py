"""The sidebar and the chat as a newcomer sees them: JupyterLab in headless Chromium at
1280x800, both panels at JupyterLab's default widths. Nothing runs past a panel's edge
(every element's scrollWidth <= clientWidth, except a one-line text cut with an ellipsis
whose title holds the whole of it), the chat renders the answer's Markdown, a MindsDB
server's progress notes show in the chat, and a notebook connected to a server with a
token lends it to the sidebar and the chat without the page ever holding it.

Screenshots go to the test's artifacts folder (`tests/jupyterlab_fixtures.py`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

import kbsql
from kbsql.server.process import ServerProcess, spawn
from tests.labextension.helpers import Lab, open_notebook, save_settings, wait_for, watch_console
from tests.labextension.test_lab_routes import HASH, TOKEN, seed
from tests.test_mindsdb_stream_compat import ANSWER, MindsDB261, serving

LONG_KB = "customer_support_tickets_2024"
LONG_AGENT = "support_agent_with_a_long_name"
LONG_TABLE = "quarterly_revenue_by_region_and_product"

# Every element of a panel that runs past its own box, except a one-line text cut with an
# ellipsis on purpose whose title says all of it, text fields (typed text longer than the
# field scrolls inside it, as in every text field), and a tool's table in the chat, whose box
# scrolls sideways on purpose (its columns keep their widths, as a notebook's result table).
OVERFLOWING = """panel => [panel, ...panel.querySelectorAll('*')]
  .filter(n => n.getClientRects().length && n.scrollWidth > n.clientWidth)
  .filter(n => !['INPUT', 'TEXTAREA'].includes(n.tagName))
  .filter(n => !(n.classList.contains('kbsql-Chat-tableBox')
                 && ['auto', 'scroll'].includes(getComputedStyle(n).overflowX)))
  .filter(n => !(getComputedStyle(n).textOverflow === 'ellipsis' && n.title.includes(n.textContent)))
  .map(n => `${n.tagName.toLowerCase()}.${[...n.classList].join('.')} ${n.scrollWidth}>${n.clientWidth}: `
            + (n.textContent || '').trim().slice(0, 60))"""
ELLIPSISED = """panel => [...panel.querySelectorAll('.kbsql-ellipsis')]
  .filter(n => n.getClientRects().length && n.scrollWidth > n.clientWidth).map(n => n.title)"""


def show(page, panel: str) -> None:
    page.evaluate("id => window.jupyterapp.shell.activateById(id)", panel)


def assert_fits(page, panel: str) -> list[str]:
    """Nothing in `panel` runs past its edge; returns the texts cut with an ellipsis."""
    node = page.locator(f"#{panel}")
    assert node.evaluate("n => n.clientWidth") <= 300, "not the default width"
    overflowing = node.evaluate(OVERFLOWING)
    assert not overflowing, overflowing
    return node.evaluate(ELLIPSISED)


def opened(page, lab: Lab, name: str, *cells: str) -> list[str]:
    """Write notebook `name` with `cells`, open it in JupyterLab; the console's errors."""
    python_notebook(lab.root / name, *cells)
    errors = watch_console(page)
    open_notebook(page, lab, name)
    return errors


def python_notebook(path: Path, *cells: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3}}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells or ("",)]
    nbformat.write(nb, path)


def test_sidebar_and_chat_fit_and_the_answer_is_markdown(jupyterlab, browser_page, artifacts):
    root = jupyterlab[2]
    seed(root / ".kbsql")  # docs (3 rows, more chunks) and the agent helper
    with kbsql.connect(root / ".kbsql") as client:
        client.knowledge_bases.create(LONG_KB, embedding_model=HASH, content_columns=["text"],
                                      metadata_columns=["product_category_name"])
        client.knowledge_bases.insert(LONG_KB, [{"id": i, "text": f"ticket {i} about refunds",
                                                 "product_category_name": "kitchen"} for i in range(1234)],
                                      progress=False)
        client.agents.create(LONG_AGENT, data={"knowledge_bases": ["mindsdb.docs", f"mindsdb.{LONG_KB}"]})
        import pandas as pd

        client.register(LONG_TABLE, pd.DataFrame({"region": ["north"], "revenue": [1.5]}))
    page = browser_page
    errors = opened(page, jupyterlab, "fit.ipynb")

    show(page, "kbsql-sidebar")
    sidebar = page.locator("#kbsql-sidebar")
    long_kb = sidebar.locator(f'.kbsql-Sidebar-kb[data-name="{LONG_KB}"]')
    long_kb.wait_for(timeout=60_000)
    assert "1,234 rows · 1,234 chunks" in long_kb.inner_text()
    assert long_kb.locator(".kbsql-Sidebar-name").get_attribute("title") == LONG_KB  # whole on hover
    sidebar.get_by_label("Search text").fill("how long do refunds take")
    sidebar.get_by_label("Search text").press("Enter")
    sidebar.locator('.kbsql-Sidebar-hits[data-state="ok"]').wait_for(timeout=30_000)

    # The chat: the long-named agent is picked by its name (one project: no "mindsdb." prefix).
    show(page, "kbsql-chat")
    chat = page.locator("#kbsql-chat")
    picker = chat.get_by_label("Agent")
    picker.select_option(f"mindsdb.{LONG_AGENT}")
    assert picker.get_attribute("title") == f"mindsdb.{LONG_AGENT}"
    assert LONG_AGENT in picker.locator("option:checked").inner_text()
    chat.get_by_label("Question").fill("How long do refunds take?")
    chat.get_by_label("Question").press("Enter")
    chat.locator('.kbsql-Chat-status[data-state="done"]').wait_for(timeout=90_000)
    answer = chat.locator('.kbsql-Chat-answerText[data-rendered="markdown"]')
    answer.wait_for(timeout=10_000)
    # Markdown rendered as the notebook panel renders it: the closing hint in italics, its
    # code as code, none of the marks left as text.
    assert answer.locator("em").count() >= 1 and answer.locator("code").count() >= 1
    shown = answer.inner_text()
    assert "Offline retrieval agent" in shown and "_Offline" not in shown and "`" not in shown, shown
    status = chat.locator(".kbsql-Chat-status").inner_text()
    assert re.fullmatch(r"done · (\d+ ms|\d\.\d s|\d+ s)", status), status  # never "0.0 s"
    sidebar.locator('.kbsql-Sidebar-status[data-state="ok"]').wait_for(timeout=30_000)  # not reloading
    page.screenshot(path=str(artifacts / "sidebar-and-chat-1280x800.png"))

    cut = assert_fits(page, "kbsql-sidebar")
    assert LONG_KB in cut  # cut with an ellipsis, whole in its title
    assert_fits(page, "kbsql-chat")
    chat.locator(".kbsql-Chat-status").scroll_into_view_if_needed()
    chat.screenshot(path=str(artifacts / "chat-answer.png"))
    sidebar.screenshot(path=str(artifacts / "sidebar.png"))

    # The same in the dark theme.
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                  "{theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)
    show(page, "kbsql-sidebar")
    long_kb.wait_for(timeout=30_000)
    sidebar.locator('.kbsql-Sidebar-status[data-state="ok"]').wait_for(timeout=30_000)
    show(page, "kbsql-chat")
    chat.locator('.kbsql-Chat-answerText[data-rendered="markdown"]').wait_for(timeout=30_000)
    assert_fits(page, "kbsql-sidebar")
    assert_fits(page, "kbsql-chat")
    page.screenshot(path=str(artifacts / "sidebar-and-chat-dark.png"))
    assert not errors, errors


@pytest.fixture
def no_token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No token in this test's environment, nor in the shared Jupyter server's (started without
    these: jupyterlab_fixtures.HIDDEN_ENV): only the notebook has one."""
    for name in ("KBSQL_TOKEN", "KBSQL_API_KEY", "TEAM_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn(tmp_path / "server", env={"KBSQL_TOKEN": TOKEN}) as server:
        yield server


def test_the_notebooks_token_serves_the_sidebar_and_chat_and_never_the_page(
        no_token_env, jupyterlab, browser_page, served, artifacts):
    root = jupyterlab[2]
    seed(served.url, token=TOKEN)
    (root / "token.txt").write_text(TOKEN)  # read by the notebook: the token is not in its cells
    read_token = 'import os, pathlib\nos.environ["TEAM_TOKEN"] = pathlib.Path("token.txt").read_text()'
    page = browser_page
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text))
    sent: list[str] = []  # every request body the page sent
    page.on("request", lambda r: sent.append(r.post_data or ""))
    errors = opened(page, jupyterlab, "team.ipynb", "%load_ext kbsql", read_token,
                    f"%kbsql_connect {served.url} --token-env TEAM_TOKEN")
    show(page, "kbsql-sidebar")
    sidebar = page.locator("#kbsql-sidebar")
    connection = sidebar.locator(".kbsql-Sidebar-connection")
    here = f"embedded {jupyterlab.path('.kbsql')}"  # the notebook folder's, from the Jupyter root
    wait_for(lambda: connection.inner_text() == here, "the notebook folder's engine first", 60)

    page.wait_for_function("() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel"
                           "?.status === 'idle'", timeout=90_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    docs = sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]')
    docs.wait_for(timeout=90_000)  # the server's catalog, with the notebook's token
    assert connection.inner_text() == f"server {served.url}"
    assert "3 rows" in docs.inner_text()
    assert not sidebar.locator('.kbsql-Sidebar-status[data-state="error"]').count()
    outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
    assert any("token set ($TEAM_TOKEN)" in o for o in outputs), outputs

    sidebar.get_by_label("Search text").fill("refund")
    sidebar.get_by_label("Search text").press("Enter")
    sidebar.locator('.kbsql-Sidebar-hits[data-state="ok"]').wait_for(timeout=30_000)
    show(page, "kbsql-chat")
    chat = page.locator("#kbsql-chat")
    chat.get_by_label("Question").fill("How long do refunds take?")
    chat.get_by_label("Question").press("Enter")
    chat.locator('.kbsql-Chat-status[data-state="done"]').wait_for(timeout=90_000)
    chat.locator('.kbsql-Chat-answerText[data-rendered="markdown"]').wait_for(timeout=10_000)
    assert "five days" in chat.locator(".kbsql-Chat-answerText").inner_text()
    assert_fits(page, "kbsql-sidebar")  # the server's URL in the header: cut, whole on hover
    assert_fits(page, "kbsql-chat")
    page.screenshot(path=str(artifacts / "token-from-the-notebook.png"))

    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    for where, text in [("the page text", page.inner_text("body")), ("the page's HTML", page.content()),
                        ("the page's requests", "\n".join(sent)), ("the console", "\n".join(console)),
                        ("the Jupyter server log", jupyterlab.log.read_text()),
                        ("the saved notebook", (root / "team.ipynb").read_text()),
                        ("the kbsql server log", served.log_text())]:
        assert TOKEN not in text, f"the token in {where}"
    assert not errors, errors


class MindsDBCatalog(MindsDB261):
    """The scripted MindsDB 26.1 of the stream tests, with the reads the sidebar makes."""

    def do_GET(self) -> None:
        answers: dict[str, Any] = {
            "/api/projects": [{"name": "mindsdb"}],
            "/api/projects/mindsdb/knowledge_bases": [],
            "/api/projects/mindsdb/agents": [{"name": "text_agent", "model": {"provider": "openai",
                                                                              "model_name": "gpt-4o"},
                                              "data": {"tables": []}}],
        }
        if self.path not in answers:
            return self.answer(404, {"title": "Not found", "detail": self.path})
        self.reply(answers[self.path])

    def do_POST(self) -> None:
        if self.path != "/api/sql/query":
            return super().do_POST()
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.reply({"type": "table", "column_names": ["Database"],
                    "data": [["mindsdb"], ["information_schema"]]})

    def reply(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def mindsdb_url() -> Iterator[str]:
    with serving(MindsDBCatalog) as url:
        yield url


def test_the_chat_shows_a_mindsdb_servers_progress_notes(jupyterlab, browser_page, mindsdb_url, artifacts):
    url, token, _root = jupyterlab
    save_settings(url, token, "kbsql-labextension:connection", {"serverUrl": mindsdb_url})
    page = browser_page
    errors = opened(page, jupyterlab, "mdb.ipynb")
    show(page, "kbsql-chat")
    chat = page.locator("#kbsql-chat")
    chat.get_by_label("Agent").locator("option").first.wait_for(state="attached", timeout=60_000)
    assert chat.get_by_label("Agent").input_value() == "mindsdb.text_agent"
    chat.get_by_label("Question").fill("How long do refunds take?")
    chat.get_by_label("Question").press("Enter")
    chat.locator('.kbsql-Chat-status[data-state="done"]').wait_for(timeout=60_000)
    notes = chat.locator(".kbsql-Chat-notes li").all_inner_texts()
    assert notes[:2] == ["Generating Data Catalog...", "Creating execution plan..."], notes
    assert "Returning text response" in notes[-1]
    turn = chat.locator(".kbsql-Chat-turn").first
    assert turn.inner_text().index("Generating Data Catalog") < turn.inner_text().index("Insert answer")
    chat.locator('.kbsql-Chat-answerText[data-rendered="markdown"]').wait_for()
    assert ANSWER.split(".")[0] in chat.locator(".kbsql-Chat-answerText").inner_text()
    assert_fits(page, "kbsql-chat")
    page.screenshot(path=str(artifacts / "chat-mindsdb-notes.png"))
    assert not errors, errors
