"""ChatWidget: conversation, history as contract messages, start over, stop."""

from __future__ import annotations

import threading
import time

import pytest

from kbsql.interface import stream as s
from kbsql.notebook.widgets import ChatWidget
from tests.widgets.streams import scripted_chunks


class Recorder:
    """A stream source that records the history it was given and whether it was closed."""

    def __init__(self, slow_after: int | None = None):
        self.calls: list[tuple[str, list[dict[str, str]]]] = []
        self.closed = threading.Event()
        self.slow_after = slow_after

    def __call__(self, question, history):
        self.calls.append((question, [dict(h) for h in history]))
        return self._gen(question)

    def _gen(self, question):
        try:
            for i, chunk in enumerate(scripted_chunks(answer=f"answer to {question}")):
                if self.slow_after is not None and i >= self.slow_after:
                    time.sleep(0.2)
                yield chunk
        finally:
            self.closed.set()


def test_conversation_sends_history_as_messages():
    source = Recorder()
    chat = ChatWidget(stream=source, agent="support", min_interval=0)
    chat.send("first?", block=True)
    chat.input.value = "second?"
    chat.send_button.click()
    assert chat.wait(10)
    assert source.calls == [("first?", []),
                            ("second?", [{"question": "first?", "answer": "answer to first?"}])]
    assert [t.answer for t in chat.turns] == ["answer to first?", "answer to second?"]
    assert len(chat.conversation.children) == 2
    panel = chat.conversation.children[1]
    assert [acc.get_title(0).split(" · ")[0] for acc in panel.steps_box.children] == ["1. kb_list_tool ✓",
                                                                      "2. kb_query_tool ✓"]
    assert chat.input.value == "" and not chat.send_button.disabled and chat.stop_button.disabled


def test_start_over_clears_history():
    source = Recorder()
    chat = ChatWidget(stream=source, min_interval=0)
    chat.send("first?", block=True)
    chat.reset_button.click()
    assert chat.turns == [] and chat.conversation.children == ()
    chat.send("again?", block=True)
    assert source.calls[-1] == ("again?", [])


def test_stop_freezes_the_answer_and_closes_the_stream():
    source = Recorder(slow_after=2)
    chat = ChatWidget(stream=source, min_interval=0)
    turn = chat.send("slow?")
    deadline = time.monotonic() + 5
    while not turn.panel.state.steps and time.monotonic() < deadline:
        time.sleep(0.02)
    assert chat.running and not chat.stop_button.disabled and chat.send_button.disabled
    chat.stop_button.click()
    assert turn.panel.state.status == "stopped"
    assert chat.wait(5)
    assert source.closed.is_set()
    assert turn.answer is None and "stopped" in turn.panel.status.value
    assert chat.history == []  # a stopped answer is not sent as context


def test_failed_answer_is_shown_and_chat_keeps_working():
    calls = []

    def source(question, history):
        calls.append(question)
        if question == "bad":
            return iter(scripted_chunks(error="agent exploded"))
        return iter([s.start_chunk(question, "t"), s.output_chunk("ok", "t"), s.end_chunk()])

    chat = ChatWidget(stream=source, min_interval=0)
    bad = chat.send("bad", block=True)
    good = chat.send("good", block=True)
    assert bad.panel.state.status == "failed" and "agent exploded" in bad.panel.status.value
    assert good.answer == "ok" and chat.history == [{"question": "good", "answer": "ok"}]


def test_chat_needs_a_source():
    with pytest.raises(ValueError):
        ChatWidget()


def test_chat_and_browse_default_to_the_embedded_engine(tmp_path, monkeypatch):
    """Without magics loaded, `ChatWidget("agent")` / `browse()` use `kbsql.connect()`
    (the data dir from $KBSQL_HOME)."""
    import kbsql
    from kbsql.notebook.widgets import browse

    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))
    with kbsql.connect() as setup:
        setup.knowledge_bases.create("notes")
        setup.agents.create("helper", data={"knowledge_bases": ["mindsdb.notes"]})
    browser = browse()
    assert browser.kb_list.options == ("notes",) and browser.agent_list.options == ("helper",)
    browser.client.close()
    chat = ChatWidget("helper", min_interval=0)
    turn = chat.send("anything in the notes?", block=True)
    assert turn.panel.state.status == "done" and turn.answer
    assert turn.panel.state.steps[0].tool == "kb_list_tool"
    chat.client.close()
