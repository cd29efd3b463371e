"""The kbsql sidebar in a real JupyterLab, driven by headless Chromium, on the default
embedded engine: the notebook's folder holds a data directory; the sidebar lists it on
open (no Refresh), shows counts, models and columns, searches, inserts `%%kbsql` cells,
lists a knowledge base created by a `%%kbsql` cell run in the notebook's kernel, then
follows the kernel's `%kbsql_connect` to a served engine and to another data directory,
and shows each notebook's own connection when it becomes current. One JupyterLab and one
kernel for all of it (a JupyterLab start costs seconds on CI)."""

from __future__ import annotations

import nbformat

import kbsql
from tests.labextension.helpers import open_notebook, sources, wait_for, watch_console, write_notebook
from tests.labextension.test_lab_routes import HASH, seed

CREATE = ("%%kbsql\nCREATE KNOWLEDGE_BASE notes USING embedding_model = "
          '{"provider": "kbsql", "model_name": "hash-64"}, content_columns = [\'text\']')


def kernel_notebook(path, *more: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3}}
    nb.cells = [nbformat.v4.new_code_cell(code) for code in ("%load_ext kbsql", CREATE, *more)]
    nbformat.write(nb, path)


def knowledge_base(target, name: str) -> None:
    with kbsql.connect(target) as client:
        client.knowledge_bases.create(name, embedding_model=HASH, content_columns=["body"])


def test_sidebar_follows_the_notebooks_connection(jupyterlab, browser_page, server_url, tmp_path, artifacts):
    root = jupyterlab.root
    seed(root / ".kbsql")
    knowledge_base(server_url, "served_only")
    knowledge_base(root / "other", "other_only")
    kernel_notebook(root / "side.ipynb", f"%kbsql_connect {server_url}", "%kbsql_connect ./other")
    page = browser_page
    errors = watch_console(page)
    open_notebook(page, jupyterlab, "side.ipynb")

    page.locator('.jp-SideBar [data-id="kbsql-sidebar"]').click()
    sidebar = page.locator("#kbsql-sidebar")
    # Loaded on open: nothing was pressed.
    kb = sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]')
    kb.wait_for(timeout=30_000)
    # where: from the Jupyter server's root (this test's folder is a sub-folder of it)
    embedded = {name: f"embedded {jupyterlab.path(name)}" for name in (".kbsql", "other", "team-kb")}
    assert sidebar.locator(".kbsql-Sidebar-connection").inner_text() == embedded[".kbsql"]
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
    wait_for(lambda: len(sources(page)) == 5, "the search cell")
    assert sources(page)[2] == "%%kbsql\nSELECT * FROM mindsdb.docs WHERE content = 'refund policy' LIMIT 10"

    # Keyboard: the knowledge base is a button; Enter inserts a search cell, cursor in the quotes.
    kb.locator("button").press("Enter")  # focus and key in one step (a re-render between two lost it)
    wait_for(lambda: len(sources(page)) == 6, "the knowledge-base cell")
    page.keyboard.type("shipping")
    assert sources(page)[3] == "%%kbsql\nSELECT * FROM mindsdb.docs WHERE content = 'shipping' LIMIT 10"
    page.screenshot(path=str(artifacts / "kbsql-sidebar-embedded.png"))

    # Run the notebook's first two cells in its kernel: a %%kbsql CREATE; the sidebar follows.
    assert sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').count() == 0
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').wait_for(timeout=90_000)
    assert "0 rows · 0 chunks" in sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').inner_text()
    page.screenshot(path=str(artifacts / "kbsql-sidebar-after-cell.png"))

    # The kernel switches to a served engine (%kbsql_connect URL): the sidebar lists that server.
    connection = sidebar.locator(".kbsql-Sidebar-connection")
    assert sources(page)[4].startswith("%kbsql_connect http")
    page.locator(".jp-Notebook .jp-Cell").nth(4).click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    sidebar.locator('.kbsql-Sidebar-kb[data-name="served_only"]').wait_for(timeout=30_000)
    assert connection.inner_text() == f"server {server_url}"
    assert connection.get_attribute("data-source") == "kernel"
    assert sidebar.locator('.kbsql-Sidebar-kb[data-name="notes"]').count() == 0
    assert sidebar.locator(".kbsql-Sidebar-hit").count() == 0  # the hits were the other service's
    page.screenshot(path=str(artifacts / "kbsql-sidebar-kernel-server.png"))

    # ... then to another data directory (%kbsql_connect DIR): that directory's catalog.
    page.keyboard.press("Shift+Enter")
    sidebar.locator('.kbsql-Sidebar-kb[data-name="other_only"]').wait_for(timeout=30_000)
    assert connection.inner_text() == embedded["other"]
    assert sidebar.locator('.kbsql-Sidebar-kb[data-name="served_only"]').count() == 0

    # Another notebook (its own kernel, no %kbsql_connect, not even %load_ext) in a project whose
    # pyproject.toml sets [tool.kbsql] default_connection: the sidebar shows that data directory
    # once the kernel has started; back on the first notebook, its kernel is asked again.
    (root / "proj").mkdir()
    (root / "proj" / "pyproject.toml").write_text('[tool.kbsql]\ndefault_connection = "../team-kb"\n')
    knowledge_base(root / "team-kb", "team_only")
    write_notebook(root / "proj" / "plain.ipynb")
    page.evaluate("path => window.jupyterapp.commands.execute('docmanager:open', {path})",
                  jupyterlab.path("proj/plain.ipynb"))
    sidebar.locator('.kbsql-Sidebar-kb[data-name="team_only"]').wait_for(timeout=60_000)
    assert connection.inner_text() == embedded["team-kb"]
    page.evaluate("path => window.jupyterapp.commands.execute('docmanager:open', {path})",
                  jupyterlab.path("side.ipynb"))
    wait_for(lambda: connection.inner_text() == embedded["other"], "side.ipynb's connection again", 30)
    sidebar.locator('.kbsql-Sidebar-kb[data-name="other_only"]').wait_for(timeout=30_000)
    assert not errors, errors
