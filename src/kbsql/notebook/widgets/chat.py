"""ChatWidget: a conversation with one agent, each answer shown with its steps.

Each question becomes an `AgentStreamPanel` in the conversation; the earlier question/answer
pairs go with it as the contract's `messages`. The stream is consumed in a background thread
so the kernel stays free to receive the Stop click; stopping freezes the panel at once and the
thread closes the generator, which cancels the run (embedded) or drops the HTTP stream (remote).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as w

from kbsql.interface.stream import close_stream
from kbsql.notebook.widgets import html as render
from kbsql.notebook.widgets.panel import AgentStreamPanel
from kbsql.notebook.widgets.snapshot import SnapshotDisplay

StreamFn = Callable[[str, list[dict[str, str]]], Iterator[dict[str, Any]]]


@dataclass(repr=False)
class Turn:
    question: str
    panel: AgentStreamPanel

    def __repr__(self) -> str:  # `chat.send(...)` ends cells: say what happened, not the widget tree
        return f"Turn({self.question!r}, {self.panel.state.status_text()})"

    @property
    def answer(self) -> str | None:
        return self.panel.state.answer


class ChatWidget(SnapshotDisplay, w.VBox):
    """`ChatWidget(client, "my_agent")`, or `ChatWidget(stream=fn)` with
    `fn(question, history) -> chunks` for any other source of streams."""

    def __init__(self, client: Any = None, agent: str = "", *, project: str | None = None,
                 stream: StreamFn | None = None, min_interval: float = 0.1, **kwargs: Any):
        if isinstance(client, str) and not agent:  # ChatWidget("support")
            client, agent = None, client
        if stream is None:
            if not agent:
                raise ValueError("ChatWidget needs an agent name (or stream=)")
            if client is None:
                from kbsql.notebook.widgets.browser import default_client

                client = default_client()

            def stream(question: str, history: list[dict[str, str]]) -> Iterator[dict[str, Any]]:
                return client.agents.stream(agent, question, history=history, project=project)

        self._stream = stream
        self.client = client
        self.agent = agent
        self.min_interval = min_interval
        self.turns: list[Turn] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._chunks: Any = None
        self.conversation = w.VBox()
        self.input = w.Text(placeholder=f"Ask {agent or 'the agent'}…",
                            layout=w.Layout(flex="1 1 auto", width="auto"))
        self.send_button = w.Button(description="Send", button_style="primary", icon="paper-plane")
        self.stop_button = w.Button(description="Stop", button_style="warning", icon="stop",
                                    disabled=True)
        self.reset_button = w.Button(description="New chat", icon="refresh")
        self.send_button.on_click(lambda _: self.send(self.input.value))
        self.stop_button.on_click(lambda _: self.stop())
        self.reset_button.on_click(lambda _: self.reset())
        title = w.HTML(f"<b>Chat with {escape(agent)}</b>" if agent else "<b>Agent chat</b>")
        controls = w.HBox([self.input, self.send_button, self.stop_button, self.reset_button])
        super().__init__(children=[title, self.conversation, controls], **kwargs)
        self.add_class("kbsql-chat")
        self.add_class(render.LIVE_CLASS)

    # -- what a saved notebook keeps -------------------------------------------------------
    def snapshot_html(self) -> str:
        """The whole conversation, each turn as its panel's snapshot (steps, answer, status)."""
        title = f"Chat with {escape(self.agent)}" if self.agent else "Agent chat"
        turns = "".join(render.render_html(t.panel.state, snapshot=False) for t in self.turns)
        empty = "" if self.turns else '<div style="color:#57606a;font-style:italic">no questions yet</div>'
        return (f'<div class="kbsql-chat-snapshot {render.SNAPSHOT_CLASS}" style="{render.BOX}">'
                f"<b>{title}</b>{turns}{empty}</div>")

    def snapshot_text(self) -> str:
        title = f"Chat with {self.agent}" if self.agent else "Agent chat"
        return "\n\n".join([title, *(render.render_text(t.panel.state) for t in self.turns)])

    # -- conversation ----------------------------------------------------------------------
    @property
    def history(self) -> list[dict[str, str]]:
        """Earlier turns as contract `messages` items: only turns that got an answer."""
        return [{"question": t.question, "answer": t.answer} for t in self.turns
                if t.answer is not None and t.panel.state.status == "done"]

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def send(self, question: str, *, block: bool = False) -> Turn | None:
        """Ask `question` (ignored when empty or while an answer is running)."""
        question = (question or "").strip()
        if not question or self.running:
            return None
        history = self.history
        panel = AgentStreamPanel(question=question, agent=self.agent, min_interval=self.min_interval)
        turn = Turn(question, panel)
        self.turns.append(turn)
        self.conversation.children = (*self.conversation.children, panel)
        self.input.value = ""
        self._stop.clear()
        self._set_running(True)
        self._thread = threading.Thread(target=self._run, args=(turn, history), daemon=True,
                                        name="kbsql-chat")
        self._thread.start()
        self.refresh_snapshot()
        if block:
            self.wait()
        return turn

    def _run(self, turn: Turn, history: list[dict[str, str]]) -> None:
        chunks: Iterable[dict[str, Any]] | None = None
        try:
            chunks = self._chunks = self._stream(turn.question, history)
            for chunk in chunks:
                if self._stop.is_set():
                    break
                turn.panel.feed(chunk)
                if turn.panel.state.finished:
                    break
        except Exception as exc:  # shown in the panel: a chat must not die on one bad answer
            turn.panel.state.fail(f"{type(exc).__name__}: {exc}")
        finally:
            self._chunks = None
            close_stream(chunks)  # cancels the run / drops the HTTP stream
            turn.panel.state.close_if_open()
            turn.panel.sync(force=True)
            self._set_running(False)
            self.refresh_snapshot()

    def stop(self) -> None:
        """Stop the running answer: the panel shows `stopped` now. The stream is closed from
        here when it allows that across threads (the embedded engine's stream cancels its run
        at once); otherwise the reading thread closes it as soon as the next chunk arrives."""
        if self.turns and self.running:
            self._stop.set()
            self.turns[-1].panel.stop()
            close_stream(self._chunks)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running answer; True when none is running any more."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def reset(self) -> None:
        """Start over: stop what runs and forget the conversation (history goes empty)."""
        self.stop()
        self.wait(5)
        self.turns = []
        self.conversation.children = ()
        self.refresh_snapshot()

    def _set_running(self, running: bool) -> None:
        self.send_button.disabled = running
        self.stop_button.disabled = not running
