"""Small helpers shared by the labextension browser tests."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat

from tests.jupyterlab_fixtures import Lab, free_port  # noqa: F401 - free_port re-exported for the tests

SOURCES_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .map(cell => cell.model.sharedModel.getSource())"""


def write_notebook(path: Path) -> None:
    """A Python notebook with one empty code cell (language_info set: cells are IPython)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3}}
    nb.cells.append(nbformat.v4.new_code_cell(""))
    nbformat.write(nb, path)


def open_notebook(page, lab: Lab, name: str) -> None:
    """Open `name` (in the test's folder) in the test's JupyterLab workspace and check that the
    extension's plugins are active."""
    page.goto(lab.page_url(name), wait_until="domcontentloaded")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && document.querySelector('.jp-Notebook .jp-Cell .cm-content')", timeout=30_000)
    plugins = [f"kbsql-labextension:{name}" for name in ("highlight", "insert-cell", "connection", "sidebar",
                                                         "chat")]
    active = page.evaluate("ids => ids.map(id => window.jupyterapp.isPluginActivated(id))", plugins)
    assert all(active), f"kbsql-labextension is not installed ({active}): pip install ./labextension"


def sources(page) -> list[str]:
    return page.evaluate(SOURCES_JS)


def wait_for(check, what: str, timeout: float = 15.0):
    """Poll `check` until it returns something truthy (the page updates asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def watch_console(page) -> list[str]:
    """Collect the page's console errors, uncaught exceptions, and warnings about kbsql or a
    settings schema (JupyterLab's own warnings are not ours to fix); the list fills as they come."""
    errors: list[str] = []

    def seen(msg) -> None:
        ours = msg.type == "warning" and any(w in msg.text.lower() for w in ("kbsql", "schema"))
        if msg.type == "error" or ours:
            errors.append(f"{msg.type}: {msg.text}")

    page.on("console", seen)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    return errors


def save_settings(url: str, token: str, plugin: str, values: dict) -> None:
    """Store JupyterLab user settings of `plugin` (what the settings editor saves)."""
    import json

    import httpx

    answer = httpx.put(f"{url}/lab/api/settings/{plugin}", json={"raw": json.dumps(values)},
                       headers={"Authorization": f"token {token}"}, timeout=30)
    assert answer.status_code == 204, answer.text


def is_dark(rgb: str) -> bool:
    """A CSS `rgb(r, g, b)` colour with low luminance."""
    r, g, b = (int(v) for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 90
