"""The docked agent chat and the sidebar on a served engine, in a real JupyterLab driven by
headless Chromium: the settings point at a real `kbsql serve --token` (the token from
$KBSQL_TOKEN); with a wrong token the sidebar shows the server's one-line 401 sentence, the
right one typed into the settings editor brings the catalog; the chat streams an agent's
steps and answer (growing token by token; Stop keeps what arrived), inserts the answer and a
tool's SQL as cells, keeps the conversation across a reload, starts over, and follows the
dark theme. Neither token ever reaches the page text, the browser console, the Jupyter
server's log or the saved notebook."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

import kbsql
from kbsql.server.process import ServerProcess, spawn
from tests.agents.fakes import FakeLLM, text, tools
from tests.labextension.helpers import (
    is_dark,
    open_notebook,
    save_settings,
    sources,
    wait_for,
    watch_console,
    write_notebook,
)
from tests.labextension.test_lab_routes import TOKEN, seed

QUESTION = "How long do refunds take?"
WRONG = "wrong-7c2a9d-also-secret"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    """A real `kbsql serve` that wants TOKEN (from $KBSQL_TOKEN: not on its command line);
    its agents' scripted model runs on loopback, which a server with a token calls only
    when named (--allow-model-host)."""
    with spawn(tmp_path / "server", env={"KBSQL_TOKEN": TOKEN},
               args=("--allow-model-host", "127.0.0.1")) as server:
        yield server


def show(page, panel: str) -> None:
    """Open a sidebar panel (a click on its tab would close it when the layout restored it open)."""
    page.evaluate("id => window.jupyterapp.shell.activateById(id)", panel)


def assert_no_secret(where: str, content: str) -> None:
    for secret in (TOKEN, WRONG):
        assert secret not in content, f"a token in {where}"


def test_chat_and_sidebar_on_a_served_engine(jupyterlab, browser_page, served, artifacts):
    url, token, root = jupyterlab
    server_url = served.url
    seed(server_url, token=TOKEN)
    save_settings(url, token, "kbsql-labextension:connection", {"serverUrl": server_url, "token": WRONG})
    write_notebook(root / "chat.ipynb")
    page = browser_page
    errors = watch_console(page)
    console: list[str] = []  # every console message, of any level
    page.on("console", lambda msg: console.append(msg.text))
    failed: list[str] = []  # the page's requests that got an error status
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    open_notebook(page, jupyterlab, "chat.ipynb")

    # A wrong token: the sidebar says what the server said (its 401 sentence), in one line.
    show(page, "kbsql-sidebar")
    sidebar = page.locator("#kbsql-sidebar")
    status = sidebar.locator('.kbsql-Sidebar-status[data-state="error"]')
    status.wait_for(timeout=30_000)
    refused = status.inner_text()
    assert refused.startswith(f"{server_url}: Unauthorized: Wrong token"), refused
    assert "\n" not in refused.strip() and "Traceback" not in refused and "Error(" not in refused
    assert sidebar.locator(".kbsql-Sidebar-kb").count() == 0
    assert_no_secret("the page text", page.inner_text("body"))
    page.screenshot(path=str(artifacts / "kbsql-401.png"))

    # The right token, typed into the settings editor (a password field: dots, never text):
    # the sidebar reloads and lists the server's catalog.
    page.evaluate("() => window.jupyterapp.commands.execute('settingeditor:open', {query: 'kbsql'})")
    field = page.locator(".jp-SettingsPanel").get_by_label("Token")
    field.wait_for(timeout=30_000)
    assert field.get_attribute("type") == "password"
    assert field.input_value() == WRONG  # the stored value, masked on screen
    field.fill(TOKEN)
    sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]').wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "kbsql-settings.png"))
    # The refused loads were 400s of the catalog route, which Chromium itself logs as
    # "Failed to load resource" (any error status is); nothing else may have been logged.
    assert failed and all(f.split("?")[0] == f"400 {url}/kbsql/catalog" for f in failed), failed
    assert all(e.startswith("error: Failed to load resource: the server responded with a status of 400")
               for e in errors), errors
    errors.clear()
    failed.clear()
    assert_no_secret("the page text", page.inner_text("body"))
    page.evaluate("() => window.jupyterapp.shell.currentWidget.close()")  # back to the notebook
    page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content?.widgets", timeout=10_000)
    assert sidebar.locator(".kbsql-Sidebar-connection").inner_text() == f"server {server_url}"
    assert "3 rows" in sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]').inner_text()

    # The chat, docked on the right: pick the agent, ask with the keyboard.
    show(page, "kbsql-chat")
    chat = page.locator("#kbsql-chat")
    assert chat.get_by_label("Agent").input_value() == "mindsdb.helper"
    chat.get_by_label("Question").fill(QUESTION)
    chat.get_by_label("Question").press("Enter")
    chat.locator('.kbsql-Chat-status[data-state="done"]').wait_for(timeout=60_000)
    turn = chat.locator(".kbsql-Chat-turn").first
    assert turn.locator(".kbsql-Chat-you").inner_text() == QUESTION
    used = turn.locator(".kbsql-Chat-tool").all_inner_texts()
    assert "kb_query_tool" in used, used
    query = turn.locator(".kbsql-Chat-step").nth(used.index("kb_query_tool"))
    sql = query.locator(".kbsql-Chat-input").inner_text()
    assert sql.startswith("SELECT") and QUESTION in sql
    query.locator("summary").click()  # the observation, folded by default
    # Shown as the %agent panel shows it: a table, not the tool's raw CSV; the metadata
    # column without the engine's bookkeeping keys, the scores to 4 decimals.
    observed = query.locator(".kbsql-Chat-observation table")
    header = observed.locator("th").all_inner_texts()
    assert "chunk_content" in header and "relevance" in header, header
    observation = query.locator(".kbsql-Chat-observation").inner_text()
    assert "five days" in observation and "Output columns:" not in observation
    assert "chunk_index" not in observation and "start_char" not in observation
    assert '"product"' in observation  # the user's own metadata stays
    scores = observed.locator("tbody tr").evaluate_all(
        f"rows => rows.map(r => r.cells[{header.index('relevance')}].innerText)")
    assert scores and all(len(v.split(".")[1]) == 4 for v in scores), scores
    # Readable in the docked panel's default width: each header and score on one line (the
    # box scrolls sideways); fitted to ~230px, they broke letter by letter ("rel / eva / nce").
    lines = observed.locator("th, td").evaluate_all(
        """cells => cells.filter(c => c.tagName === 'TH' || /^[0-9.]+$/.test(c.innerText))
            .map(c => { const r = document.createRange(); r.selectNodeContents(c);
                        return [c.innerText, new Set([...r.getClientRects()].map(b => b.top)).size]; })""")
    assert lines and all(n == 1 for _, n in lines), lines
    assert query.locator(".kbsql-Chat-rowcount").inner_text().endswith(" rows")
    turn.locator('.kbsql-Chat-answerText[data-rendered="markdown"]').wait_for()
    answer = turn.locator(".kbsql-Chat-answerText").inner_text()  # as shown: Markdown rendered
    assert "five days" in answer
    source = page.evaluate("""() => Object.entries(localStorage)
        .filter(([key]) => key.startsWith('kbsql-labextension:chat:') && key.endsWith(':mindsdb.helper'))
        .map(([, value]) => JSON.parse(value))[0][0].answer""")  # the answer's Markdown, as it came
    # Long words wrap: nothing of the answer runs past the panel's edge.
    assert turn.locator(".kbsql-Chat-answerText").evaluate("n => n.scrollWidth <= n.clientWidth")
    assert turn.locator(".kbsql-Chat-status").inner_text().startswith("done · ")

    # Insert as cell: the tool's SQL as a %%kbsql cell, the answer as Markdown.
    page.locator(".jp-Notebook .jp-Cell").first.click()
    query.get_by_role("button", name="Insert SQL as cell").click()
    wait_for(lambda: len(sources(page)) == 2, "the SQL cell")
    assert sources(page)[1] == f"%%kbsql\n{sql}"
    turn.get_by_role("button", name="Insert answer as cell").click()
    wait_for(lambda: len(sources(page)) == 3, "the answer cell")
    assert sources(page)[2] == source  # the Markdown itself, not its rendering
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets[2].model.type") \
        == "markdown"
    page.screenshot(path=str(artifacts / "kbsql-chat.png"))
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    saved = root / "chat.ipynb"
    wait_for(lambda: len(nbformat.read(saved, as_version=4).cells) == 3, "the saved notebook")
    assert_no_secret("the saved notebook", saved.read_text())

    # The conversation survives a reload (per agent), then Start over forgets it.
    page.reload(wait_until="domcontentloaded")
    open_notebook(page, jupyterlab, "chat.ipynb")
    show(page, "kbsql-chat")
    chat.locator('.kbsql-Chat-answerText[data-rendered="markdown"]').wait_for(timeout=30_000)
    assert chat.locator(".kbsql-Chat-answerText").inner_text() == answer
    assert chat.locator(".kbsql-Chat-you").all_inner_texts() == [QUESTION]

    # Stop: a slow agent (a scripted model streaming a long answer) is stopped mid-run; the
    # page says so at once and the agent makes no further model call.
    long_answer = text("word " * 100)  # ~72 stream events, 0.05 s apart
    script = [tools(("kb_list_tool", {})), long_answer, *[tools(("kb_list_tool", {}))] * 5]
    with FakeLLM("openai", script, delay=0.05) as fake:
        with kbsql.connect(server_url, token=TOKEN) as client:
            client.agents.create("slow", data={"knowledge_bases": ["mindsdb.*"]},
                                 model={"provider": "openai", "model_name": "m1", "base_url": fake.base_url})
        page.evaluate("() => window.jupyterapp.commands.execute('kbsql:open-sidebar')")
        chat.get_by_label("Agent").locator('option[value="mindsdb.slow"]').wait_for(state="attached")
        chat.get_by_label("Agent").select_option("mindsdb.slow")
        assert chat.locator(".kbsql-Chat-turn").count() == 0  # its own (empty) conversation
        chat.get_by_label("Question").fill("talk a lot")
        chat.get_by_role("button", name="Ask").click()
        chat.locator(".kbsql-Chat-observation").wait_for(timeout=30_000)  # the first tool ran
        wait_for(lambda: fake.events_sent >= 10, "the long answer streaming")
        # the answer grows as the model writes, rendered as Markdown while it runs
        growing = chat.locator('.kbsql-Chat-turn[data-state="running"] '
                               '.kbsql-Chat-answerText[data-rendered="markdown"]')
        growing.wait_for(timeout=10_000)
        seen = growing.inner_text()
        assert seen.startswith("word"), seen
        wait_for(lambda: len(growing.inner_text()) > len(seen), "the answer growing")
        chat.get_by_role("button", name="Stop").click()
        chat.locator('.kbsql-Chat-status[data-state="stopped"]').wait_for(timeout=5_000)
        assert chat.get_by_role("button", name="Ask").is_enabled()
        kept = chat.locator(".kbsql-Chat-answerText").inner_text()  # what arrived stays
        assert kept.startswith("word") and kept.count("word") < 100, kept
        time.sleep(5)  # longer than the whole long answer would take
        assert fake.chat_calls == 2, "the agent went on after Stop"
        assert chat.locator(".kbsql-Chat-answerText").inner_text() == kept
    chat.get_by_label("Agent").select_option("mindsdb.helper")
    chat.locator(".kbsql-Chat-answerText").wait_for()  # helper's conversation is back

    # Dark theme: the panels take JupyterLab's colours.
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                  "{theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    show(page, "kbsql-sidebar")
    sidebar.locator('.kbsql-Sidebar-kb[data-name="docs"]').wait_for(timeout=30_000)
    wait_for(lambda: is_dark(chat.evaluate("n => getComputedStyle(n).backgroundColor")), "a dark chat")
    assert is_dark(sidebar.evaluate("n => getComputedStyle(n).backgroundColor"))
    assert not is_dark(chat.locator(".kbsql-Chat-answerText").evaluate("n => getComputedStyle(n).color"))
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)  # the theme switch's
    page.screenshot(path=str(artifacts / "kbsql-dark.png"))

    chat.get_by_role("button", name="Start over").click()
    assert chat.locator(".kbsql-Chat-turn").count() == 0
    page.reload(wait_until="domcontentloaded")
    open_notebook(page, jupyterlab, "chat.ipynb")
    show(page, "kbsql-chat")
    chat.get_by_label("Agent").wait_for()
    assert chat.locator(".kbsql-Chat-turn").count() == 0

    # Neither token anywhere the user or a log could see it.
    assert_no_secret("the page text", page.inner_text("body"))
    assert_no_secret("the page's HTML", page.content())  # no settings editor open now
    assert_no_secret("the browser console", "\n".join(console))
    assert_no_secret("the Jupyter server log", jupyterlab.log.read_text())
    assert_no_secret("the saved notebook", (root / "chat.ipynb").read_text())
    assert_no_secret("the kbsql server log", served.log_text())
    assert not errors and not failed, (errors, failed)
