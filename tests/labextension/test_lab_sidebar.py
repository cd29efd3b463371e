"""The kbsql sidebar: a real `kbsql serve` with a knowledge base and an agent, listed through
the Jupyter server's /kbsql/catalog route and clicked into `%%kbsql` cells in JupyterLab."""

from __future__ import annotations

import httpx
import pytest

import kbsql
from tests.labextension.helpers import free_port, open_notebook, sources, wait_for, write_notebook


@pytest.fixture
def catalog_server(server_url: str) -> str:
    """A kbsql server holding one knowledge base and one agent."""
    with kbsql.connect(server_url) as client:
        client.knowledge_bases.create("docs", content_columns=["body"], metadata_columns=["product"])
        client.agents.create("helper", data={"knowledge_bases": ["mindsdb.docs"]})
    return server_url


def test_catalog_route_lists_names_only_and_reports_errors(jupyterlab, catalog_server):
    url, token, _root = jupyterlab
    route = f"{url}/kbsql/catalog"
    auth = {"Authorization": f"token {token}"}

    answer = httpx.get(route, params={"url": catalog_server}, headers=auth, timeout=30)
    assert answer.status_code != 404, "the kbsql_labextension server extension is not installed: " \
        "pip install ./labextension"
    assert answer.status_code == 200, answer.text
    (project,) = [p for p in answer.json()["projects"] if p["name"] == "mindsdb"]
    assert project["knowledge_bases"] == [
        {"name": "docs", "content_columns": ["body"], "metadata_columns": ["product"]}]
    assert project["agents"] == [{"name": "helper", "knowledge_bases": ["mindsdb.docs"], "tables": []}]
    assert "model" not in answer.text  # descriptors (which may carry api keys) stay on the server

    # Not logged in: Jupyter's own authentication refuses.
    assert httpx.get(route, params={"url": catalog_server}, timeout=30).status_code == 403
    # Not an HTTP URL: a 400 with the problem fields.
    bad = httpx.get(route, params={"url": "file:///etc/passwd"}, headers=auth, timeout=30)
    assert bad.status_code == 400 and bad.json()["title"] == "Bad request"
    assert "http://" in bad.json()["detail"]
    # Nobody listening: a 502 naming the URL.
    dead = f"http://127.0.0.1:{free_port()}"
    down = httpx.get(route, params={"url": dead}, headers=auth, timeout=30)
    assert down.status_code == 502 and dead in down.json()["detail"]


def test_sidebar_lists_the_server_and_inserts_queries(jupyterlab, browser_page, catalog_server, tmp_path):
    url, token, root = jupyterlab
    write_notebook(root / "side.ipynb")
    page = browser_page
    open_notebook(page, url, token, "side.ipynb")

    page.locator('.jp-SideBar [data-id="kbsql-sidebar"]').click()
    sidebar = page.locator("#kbsql-sidebar")
    sidebar.get_by_label("kbsql server URL").fill(catalog_server)
    sidebar.get_by_role("button", name="Refresh").click()
    kb = sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]')
    kb.wait_for(timeout=15_000)
    assert "body, product" in kb.inner_text()
    agent = sidebar.locator('.kbsql-Sidebar-agent[data-name="helper"]')
    assert "mindsdb.docs" in agent.inner_text()

    # A knowledge base: a semantic-search cell, the cursor between the quotes.
    page.locator(".jp-Notebook .jp-Cell").first.click()
    kb.click()
    wait_for(lambda: len(sources(page)) == 2, "the knowledge-base cell")
    page.keyboard.type("refund policy")
    assert sources(page)[1] == "%%kbsql\nSELECT * FROM mindsdb.docs WHERE content = 'refund policy' LIMIT 10"
    # An agent: a question cell.
    agent.click()
    wait_for(lambda: len(sources(page)) == 3, "the agent cell")
    page.keyboard.type("How long do refunds take?")
    assert sources(page)[2] == ("%%kbsql\nSELECT answer FROM mindsdb.helper "
                                "WHERE question = 'How long do refunds take?'")
    page.screenshot(path=str(tmp_path / "kbsql-sidebar.png"))

    # A server that is down: the sidebar says so instead of showing stale names.
    sidebar.get_by_label("kbsql server URL").fill(f"http://127.0.0.1:{free_port()}")
    sidebar.get_by_role("button", name="Refresh").click()
    page.locator('.kbsql-Sidebar-status[data-state="error"]').wait_for(timeout=15_000)
    assert sidebar.locator(".kbsql-Sidebar-item").count() == 0
