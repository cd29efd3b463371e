"""JupyterLab for real: a notebook whose cell streams the offline agent into the panel is run in
headless Chromium; the finished panel (rendered by JupyterLab's widget manager) is checked in
the DOM and screenshotted into the test's tmp dir."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.jupyterlab_fixtures import needs_chromium
from tests.widgets.notebooks import write_demo_notebook

pytestmark = needs_chromium


def shutdown_kernels(url: str, token: str) -> None:
    """Close the notebook's session the way closing it does: the kernel and its widgets go."""
    params = {"token": token}
    for session in httpx.get(f"{url}/api/sessions", params=params, timeout=10).json():
        httpx.delete(f"{url}/api/sessions/{session['id']}", params=params, timeout=30)


def test_jupyterlab_renders_the_finished_panel(jupyterlab, browser_page, tmp_path: Path):
    url, token, root = jupyterlab
    write_demo_notebook(root / "demo.ipynb", tmp_path / "data", chat=True)
    shot, chat_shot = tmp_path / "jupyterlab-panel.png", tmp_path / "jupyterlab-chat.png"
    reopened_shot = tmp_path / "jupyterlab-reopened.png"
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 1400})
    page.goto(jupyterlab.page_url("demo.ipynb"), wait_until="domcontentloaded")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
        timeout=90_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    panel = page.locator(".jupyter-widgets.kbsql-live.kbsql-panel").first  # the chat's are later
    panel.locator('.kbsql-status[data-status="done"]').wait_for(timeout=120_000)
    printed = page.locator(".jp-OutputArea-output pre", has_text="ANSWER:")
    printed.wait_for(timeout=30_000)

    text = panel.inner_text()
    assert "1. kb_list_tool ✓" in text and "2. kb_query_tool ✓" in text
    assert "support" in text and "What is the refund policy?" in text
    assert "done in" in text
    answer = printed.inner_text().split("ANSWER:", 1)[1].strip()
    assert answer and answer.splitlines()[0][:40] in text  # the answer, in the panel
    # The snapshots are in the outputs too (the panel's, the chat's), hidden while the
    # live widgets show.
    assert page.locator(".kbsql-snapshot").count() == 2
    assert not page.locator(".kbsql-snapshot").first.is_visible()
    assert not page.locator(".kbsql-chat-snapshot").is_visible()
    # Steps are collapsible: open the query step and its SQL input appears.
    panel.get_by_text("2. kb_query_tool ✓").click()
    step = panel.locator('.kbsql-step[data-tool="kb_query_tool"]')
    step.wait_for(state="visible", timeout=10_000)
    assert "SELECT" in step.inner_text()
    panel.scroll_into_view_if_needed()
    page.screenshot(path=str(shot), full_page=True)

    # The chat: typed question, Send clicked in the browser, answered from a thread.
    chat = page.locator(".jupyter-widgets.kbsql-chat")
    chat.wait_for(timeout=30_000)
    chat.locator("input[type=text]").fill("How long does shipping take?")
    chat.get_by_role("button", name="Send").click()
    chat.locator('.kbsql-status[data-status="done"]').wait_for(timeout=60_000)
    assert "Shipping takes five business days" in chat.inner_text()
    chat.locator("input[type=text]").fill("And refunds?")
    chat.get_by_role("button", name="Send").click()
    page.wait_for_function(
        "() => document.querySelectorAll('.kbsql-chat .kbsql-status[data-status=\"done\"]')"
        ".length === 2", timeout=60_000)
    chat.scroll_into_view_if_needed()
    page.screenshot(path=str(chat_shot), full_page=True)

    # Saved, kernel gone, reopened: the widgets are dead, the snapshot shows the steps.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    shutdown_kernels(url, token)
    page.reload(wait_until="domcontentloaded")
    snapshot = page.locator(".kbsql-panel.kbsql-snapshot")
    snapshot.wait_for(state="visible", timeout=60_000)
    text = snapshot.inner_text()
    assert "1. kb_list_tool ✓" in text and "2. kb_query_tool ✓" in text and "done in" in text
    assert answer.splitlines()[0][:40] in text
    outputs = page.locator(".jp-OutputArea", has=page.locator(".kbsql-snapshot"))
    for dead_text in ("Loading widget...", "Error displaying widget"):  # the dead live panel
        dead = outputs.get_by_text(dead_text)
        assert all(not dead.nth(i).is_visible() for i in range(dead.count()))
    # The chat was answered from button clicks after its cell ran; its snapshot (updated
    # by display id) kept both turns.
    chat_snapshot = page.locator(".kbsql-chat-snapshot")
    chat_snapshot.scroll_into_view_if_needed(timeout=30_000)
    chat_text = chat_snapshot.inner_text()
    assert "How long does shipping take?" in chat_text and "And refunds?" in chat_text
    assert "Shipping takes five business days" in chat_text
    page.screenshot(path=str(reopened_shot), full_page=True)
    assert shot.exists() and shot.stat().st_size > 10_000
    assert chat_shot.exists() and chat_shot.stat().st_size > 10_000
    assert reopened_shot.exists() and reopened_shot.stat().st_size > 10_000
