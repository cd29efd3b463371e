"""The kbsql sidebar in a real JupyterLab, driven by headless Chromium, on the default
embedded engine: the notebook's folder holds a data directory; the sidebar lists it on
open (no Refresh), shows counts, models and columns, searches, inserts `%%kbsql` cells,
and lists a knowledge base created by a `%%kbsql` cell run in the notebook's kernel."""

from __future__ import annotations

import nbformat

from tests.labextension.helpers import open_notebook, sources, wait_for, watch_console
from tests.labextension.test_lab_routes import seed

CREATE = ("%%kbsql\nCREATE KNOWLEDGE_BASE notes USING embedding_model = "
          '{"provider": "kbsql", "model_name": "hash-64"}, content_columns = [\'text\']')


def kernel_notebook(path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3}}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext kbsql"), nbformat.v4.new_code_cell(CREATE)]
    nbformat.write(nb, path)


def test_sidebar_on_the_embedded_engine(jupyterlab, browser_page, tmp_path):
    url, token, root = jupyterlab
    seed(root / ".kbsql")
    kernel_notebook(root / "side.ipynb")
    page = browser_page
    errors = watch_console(page)
    open_notebook(page, url, token, "side.ipynb")

    page.locator('.jp-SideBar [data-id="kbsql-sidebar"]').click()
    sidebar = page.locator("#kbsql-sidebar")
    # Loaded on open: nothing was pressed.
    kb = sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]')
    kb.wait_for(timeout=30_000)
    assert sidebar.locator(".kbsql-Sidebar-connection").inner_text() == "embedded .kbsql"
    text = kb.inner_text()
    assert "3 rows" in text and "chunks" in text, text
    for shown in ["body", "product", "kbsql/hash-64"]:
        assert shown in text, (shown, text)
    agent = sidebar.locator('.kbsql-Sidebar-agent[data-name="helper"]')
    assert "mindsdb.docs" in agent.inner_text() and "kbsql/retrieval" in agent.inner_text()
    assert sidebar.locator('.kbsql-Sidebar-source[data-name="df"]').count() == 1

    # A search from the sidebar: the hits, then the same search as a cell.
    sidebar.get_by_label("Search text").fill("refund policy")
    sidebar.get_by_label("Search text").press("Enter")
    sidebar.locator('.kbsql-Sidebar-hits[data-state="ok"]').wait_for(timeout=30_000)
    assert sidebar.locator(".kbsql-Sidebar-hit").count() >= 3  # every chunk of three documents
    assert "in mindsdb.docs" in sidebar.locator(".kbsql-Sidebar-hitsHead").inner_text()
    page.locator(".jp-Notebook .jp-Cell").nth(1).click()
    sidebar.get_by_role("button", name="Insert as cell").click()
    wait_for(lambda: len(sources(page)) == 3, "the search cell")
    assert sources(page)[2] == "%%kbsql\nSELECT * FROM mindsdb.docs WHERE content = 'refund policy' LIMIT 10"

    # Keyboard: the knowledge base is a button; Enter inserts a search cell, cursor in the quotes.
    kb.locator("button").focus()
    page.keyboard.press("Enter")
    wait_for(lambda: len(sources(page)) == 4, "the knowledge-base cell")
    page.keyboard.type("shipping")
    assert sources(page)[3] == "%%kbsql\nSELECT * FROM mindsdb.docs WHERE content = 'shipping' LIMIT 10"
    page.screenshot(path=str(tmp_path / "kbsql-sidebar-embedded.png"))

    # Run the notebook's first two cells in its kernel: a %%kbsql CREATE; the sidebar follows.
    assert sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').count() == 0
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').wait_for(timeout=90_000)
    assert "0 rows · 0 chunks" in sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').inner_text()
    page.screenshot(path=str(tmp_path / "kbsql-sidebar-after-cell.png"))
    assert not errors, errors
