"""`show_agent_stream`: render a completion stream live, then leave a static snapshot.

Where it renders decides how: in a Jupyter kernel the live `AgentStreamPanel` widget; with
`KBSQL_WIDGETS=html` (a frontend without widgets) one display updated in place with HTML
and a text fallback; in a terminal, lines printed as the steps arrive. In every case the final
output carries the static HTML snapshot, so a saved and reopened notebook shows the steps.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from typing import Any

from kbsql.notebook.widgets import html as render
from kbsql.notebook.widgets.state import StreamState

WIDGET, HTML, TEXT = "widget", "html", "text"


def frontend_mode() -> str:
    """`widget` in a Jupyter kernel, `text` in a terminal (IPython or not).

    `KBSQL_WIDGETS=0|html` forces the live-HTML fallback in a kernel whose frontend cannot
    render widgets (a kernel cannot tell; e.g. nbconvert, some editors); `KBSQL_WIDGETS=text`
    forces text. A terminal gets text because it would reprint every in-place update."""
    forced = os.environ.get("KBSQL_WIDGETS", "").strip().lower()
    if forced in ("0", "false", "no", HTML):
        return HTML
    if forced == TEXT:
        return TEXT
    try:
        from IPython import get_ipython
    except ImportError:
        return TEXT
    shell = get_ipython()
    if shell is None:
        return TEXT
    if getattr(shell, "kernel", None) is not None:
        return WIDGET
    return TEXT


def snapshot_bundle(state: StreamState) -> dict[str, str]:
    return {"text/html": render.render_html(state), "text/plain": render.render_text(state)}


def show_agent_stream(chunks: Iterable[dict[str, Any]], *, question: str, agent: str,
                      mode: str | None = None, min_interval: float = 0.1) -> str:
    """Render `chunks` live and return the final answer text ("" when there is none).

    A failure (error chunk, or the stream raising) is shown as failed in the panel rather
    than raised; Ctrl-C / interrupting the kernel stops the stream (closing it, which
    cancels the run on the server) and is re-raised after the snapshot is shown."""
    mode = mode or frontend_mode()
    if mode == WIDGET:
        state = _show_widget(chunks, question, agent, min_interval)
    elif mode == HTML:
        state = _show_html(chunks, question, agent, min_interval)
    else:
        state = _show_text(chunks, question, agent)
    return state.answer or ""


def _show_widget(chunks: Iterable[dict[str, Any]], question: str, agent: str,
                 min_interval: float) -> StreamState:
    from IPython.display import display

    from kbsql.notebook.widgets.panel import AgentStreamPanel

    panel = AgentStreamPanel(question=question, agent=agent, min_interval=min_interval)
    display(panel)  # the live panel and its snapshot (a display updated when it finishes)
    try:
        panel.consume(chunks)
    finally:
        panel.refresh_snapshot()
    return panel.state


def _drive(chunks: Iterable[dict[str, Any]], state: StreamState, on_change) -> None:
    """Feed every chunk to `state`, calling `on_change(final)`; failures end as failed."""
    try:
        for chunk in chunks:
            state.feed(chunk)
            on_change(state.finished)
            if state.finished:
                break
    except KeyboardInterrupt:
        state.stop()
        raise
    except Exception as exc:
        state.fail(f"{type(exc).__name__}: {exc}")
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
        state.close_if_open()
        on_change(True)


def _show_html(chunks: Iterable[dict[str, Any]], question: str, agent: str,
               min_interval: float) -> StreamState:
    from IPython.display import display

    state = StreamState(question=question, agent=agent)
    handle = display(snapshot_bundle(state), raw=True, display_id=True)
    last = 0.0

    def on_change(final: bool) -> None:
        nonlocal last
        now = time.monotonic()
        if final or now - last >= min_interval:
            last = now
            handle.update(snapshot_bundle(state), raw=True)

    _drive(chunks, state, on_change)
    return state


def _show_text(chunks: Iterable[dict[str, Any]], question: str, agent: str) -> StreamState:
    """No IPython: print each new line of the text rendering as it appears, and the answer
    token by token as it streams (one growing `A:` line)."""
    state = StreamState(question=question, agent=agent)
    out = _Printer()

    def on_change(final: bool) -> None:
        # every line but the answer and the status line is only ever appended
        out.lines(render.render_text(dataclasses.replace(state, answer=None)).split("\n")[:-1])
        out.answer(state.answer)
        if final:
            out.end(f"[{state.status_text()}]")

    _drive(chunks, state, on_change)
    return state


class _Printer:
    """What a terminal already shows: lines printed, and the answer written so far (its line
    left open while tokens may still come)."""

    def __init__(self) -> None:
        self.printed = 0
        self.said = ""
        self.open = False

    def _close(self) -> None:
        if self.open:
            print(flush=True)
            self.open = False

    def lines(self, lines: list[str]) -> None:
        for line in lines[self.printed:]:
            self._close()
            print(line, flush=True)
        self.printed = max(self.printed, len(lines))

    def answer(self, text: str | None) -> None:
        if text is None or not text.startswith(self.said):  # words before a tool call: a new answer
            self._close()
            self.said = ""
        if text and text != self.said:
            print(("A: " if not self.said else "") + text[len(self.said):], end="", flush=True)
            self.said, self.open = text, True

    def end(self, status: str) -> None:
        self._close()
        print(status, flush=True)
