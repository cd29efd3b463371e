"""AgentStreamPanel (the live widget) and show_agent_stream's fallbacks."""

from __future__ import annotations

import time

import ipywidgets as w

from kbsql.interface import stream as s
from kbsql.notebook.widgets import AgentStreamPanel, show_agent_stream
from kbsql.notebook.widgets.show import frontend_mode
from tests.widgets.streams import KB_SQL, TRACE, scripted_chunks


def titles(panel: AgentStreamPanel) -> list[str]:
    """Accordion titles without the input preview."""
    return [acc.get_title(0).split(" · ")[0] for acc in panel.steps_box.children]


def test_panel_widgets_after_each_chunk(chunks):
    panel = AgentStreamPanel(question="What is the refund policy?", agent="support", min_interval=0)
    assert 'data-status="waiting"' in panel.status.value
    expected_titles = [[], ["1. kb_list_tool …"], ["1. kb_list_tool ✓"],
                       ["1. kb_list_tool ✓", "2. kb_query_tool …"],
                       ["1. kb_list_tool ✓", "2. kb_query_tool ✓"],
                       ["1. kb_list_tool ✓", "2. kb_query_tool ✓"],
                       ["1. kb_list_tool ✓", "2. kb_query_tool ✓"]]
    for chunk, want in zip(chunks, expected_titles, strict=True):
        panel.feed(chunk)
        assert titles(panel) == want
    assert panel.steps_box.children[1].get_title(0) == "2. kb_query_tool ✓ · " + KB_SQL  # input preview
    assert TRACE in panel.header.value and "support" in panel.header.value
    list_body, query_body = (acc.children[0].value for acc in panel.steps_box.children)
    assert "(no input)" in list_body and "[&quot;docs&quot;]" in list_body
    assert "refund policy" in query_body and "SELECT</span>" in query_body  # highlighted SQL
    assert "<table" in query_body and "2 rows" in query_body and "Refunds are accepted" in query_body
    assert "<strong>30 days</strong>" in panel.answer.value
    assert 'data-status="done"' in panel.status.value and "done in" in panel.status.value
    assert all(isinstance(acc, w.Accordion) for acc in panel.steps_box.children)  # collapsible


def test_panel_error_chunk_shows_failed():
    panel = AgentStreamPanel(min_interval=0)
    answer = panel.consume(iter(scripted_chunks(error="provider timed out")))
    assert answer is None
    assert 'data-status="failed"' in panel.status.value and "provider timed out" in panel.status.value
    assert titles(panel) == ["1. kb_list_tool ✓", "2. kb_query_tool ✓"]


def test_stream_that_raises_shows_failed_not_traceback():
    def broken():
        yield from scripted_chunks()[:3]
        raise ConnectionError("server went away")

    panel = AgentStreamPanel(min_interval=0)
    panel.consume(broken())
    assert panel.state.status == "failed"
    assert "server went away" in panel.status.value


def test_updates_are_throttled_but_the_end_always_shows():
    panel = AgentStreamPanel(min_interval=60)
    changes = []
    panel.status.observe(lambda ch: changes.append(ch["new"]), names="value")
    act = s.action("kb_query_tool", KB_SQL)
    stream = [s.start_chunk("q", "t")]
    for i in range(200):
        stream += [s.actions_chunk([act], "t"), s.steps_chunk(act, f"obs {i}", "t")]
    for chunk in stream:
        panel.feed(chunk)
    assert len(changes) <= 2  # start only (forced), not 400 updates
    assert panel.pending and len(panel.steps_box.children) == 0
    panel.feed(s.output_chunk("fi", "t"))  # the first token shows at once
    assert len(panel.steps_box.children) == 200 and "fi" in panel.answer.value
    panel.feed(s.output_chunk("ne", "t"))  # later tokens wait for the interval
    assert panel.pending and "fine" not in panel.answer.value
    panel.feed(s.end_chunk())
    assert "fine" in panel.answer.value and 'data-status="done"' in panel.status.value


def test_a_quiet_stream_still_flushes_the_last_update():
    panel = AgentStreamPanel(min_interval=0.2)
    chunks = scripted_chunks()
    panel.feed(chunks[0])
    panel.feed(chunks[1])  # inside the interval: deferred
    assert titles(panel) == []
    deadline = time.monotonic() + 5
    while titles(panel) == [] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert titles(panel) == ["1. kb_list_tool …"]


def test_show_agent_stream_text_fallback_prints_steps(capsys, chunks):
    answer = show_agent_stream(iter(chunks), question="What is the refund policy?", agent="support",
                               mode="text")
    assert answer == "Refunds: **30 days**."
    out = capsys.readouterr().out
    assert out.index("1. kb_list_tool") < out.index("2. kb_query_tool") < out.index("A: Refunds")
    assert "2 rows" in out and "[done in" in out


def test_frontend_mode_without_ipython_and_forced(monkeypatch):
    monkeypatch.delenv("KBSQL_WIDGETS", raising=False)
    assert frontend_mode() == "text"  # pytest runs without an IPython shell
    monkeypatch.setenv("KBSQL_WIDGETS", "html")
    assert frontend_mode() == "html"


def test_show_agent_stream_html_fallback_updates_one_display(monkeypatch, chunks):
    """The live-HTML fallback updates one display in place and ends as the snapshot."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    published = []
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, metadata=None, **kw: published.append((data, kw)))
    try:
        assert frontend_mode() == "text"  # a terminal shell: in-place updates would reprint
        answer = show_agent_stream(iter(chunks), question="q", agent="support", min_interval=0,
                                   mode="html")
    finally:
        InteractiveShell.clear_instance()
    assert answer == "Refunds: **30 days**."
    assert len(published) >= 3
    first, *_, last = published
    assert first[1].get("update") in (False, None) and last[1].get("update") is True
    assert {kw["transient"]["display_id"] for _, kw in published} == {first[1]["transient"]["display_id"]}
    assert "kbsql-snapshot" in last[0]["text/html"] and 'data-status="done"' in last[0]["text/html"]
    assert "kb_query_tool" in last[0]["text/plain"]


def test_running_status_ticks_without_chunks(monkeypatch):
    from kbsql.notebook.widgets import panel as panel_module

    monkeypatch.setattr(panel_module, "HEARTBEAT", 0.05)
    panel = AgentStreamPanel(min_interval=0)
    panel.feed(scripted_chunks()[0])
    first = panel.status.value
    deadline = time.monotonic() + 5
    while panel.status.value == first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert panel.status.value != first and "running (" in panel.status.value
    panel.stop()
    assert "stopped after" in panel.status.value


def test_kbsql_widgets_is_a_short_alias():
    import kbsql.widgets as kw
    from kbsql.notebook.widgets import browser, chat, panel

    assert kw.browse is browser.browse and kw.ChatWidget is chat.ChatWidget
    assert kw.AgentStreamPanel is panel.AgentStreamPanel and kw.show_agent_stream is show_agent_stream
