"""AgentStreamPanel: the live ipywidgets view of one completion stream.

Plain ipywidgets (no custom JavaScript) so it renders wherever the standard widget manager
runs: JupyterLab, Notebook 7, VS Code, Colab. Each step is its own Accordion, so updating one
step sends one small message and a step the user opened stays open while others arrive.
Updates are throttled: a fast stream changes the model on every chunk but the frontend is
synced at most every `min_interval` seconds (and always at the end).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import ipywidgets as w

from kbsql.notebook.widgets import html as render
from kbsql.notebook.widgets.snapshot import SnapshotDisplay
from kbsql.notebook.widgets.state import StreamState

MIN_INTERVAL = 0.1
HEARTBEAT = 1.0
"""While running, the status line's elapsed time ticks this often even when no chunk comes
(a model thinking for seconds should not look frozen)."""
MAX_HEARTBEATS = 3600


class AgentStreamPanel(SnapshotDisplay, w.VBox):
    """Feed it chunks (`feed`, `consume`); it shows header, steps, answer and status."""

    def __init__(self, *, question: str = "", agent: str = "", min_interval: float = MIN_INTERVAL,
                 **kwargs: Any):
        self.state = StreamState(question=question, agent=agent)
        self.min_interval = min_interval
        self._last_sync = 0.0
        self._dirty = False
        self._timer: threading.Timer | None = None
        self._heartbeat: threading.Timer | None = None
        self._beats = 0
        self._lock = threading.RLock()
        self.header = w.HTML()
        self.notes = w.HTML()
        self.steps_box = w.VBox()
        self.answer = w.HTML()
        self.status = w.HTML()
        self._step_views: list[tuple[w.Accordion, w.HTML]] = []
        super().__init__(children=[self.header, self.notes, self.steps_box, self.answer, self.status],
                         **kwargs)
        self.add_class(render.LIVE_CLASS)
        self.add_class("kbsql-panel")
        self.layout = w.Layout(border="1px solid #d0d7de", padding="6px 10px", margin="4px 0")
        self.sync(force=True)

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, chunk: dict[str, Any]) -> str:
        """Apply one chunk to the model; the view follows, throttled."""
        with self._lock:
            waiting = self.state.answer is None
            kind = self.state.feed(chunk)
            self._dirty = True
        # the first token shows at once (then tokens are batched every `min_interval`)
        first_token = kind == "output" and waiting
        self.sync(force=self.state.finished or kind == "start" or first_token)
        return kind

    def consume(self, chunks: Iterable[dict[str, Any]]) -> str | None:
        """Feed a whole stream; returns the final answer. An exception from the stream shows
        as failed (and is re-raised only for KeyboardInterrupt, which means "stop")."""
        try:
            for chunk in chunks:
                self.feed(chunk)
                if self.state.finished:
                    break
        except KeyboardInterrupt:
            self.stop()
            raise
        except Exception as exc:  # the stream broke: the panel says so instead of a traceback
            self.state.fail(f"{type(exc).__name__}: {exc}")
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        self.state.close_if_open()
        self.sync(force=True)
        return self.state.answer

    def stop(self) -> None:
        with self._lock:
            self.state.stop()
        self.sync(force=True)

    # -- rendering -------------------------------------------------------------------------
    def sync(self, *, force: bool = False) -> bool:
        """Push the model to the widgets if forced or `min_interval` has passed."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_sync < self.min_interval:
                self._schedule_flush()
                return False
            self._last_sync = now
            self._dirty = False
            self._render()
            if self.state.finished:
                self.refresh_snapshot()  # the saved notebook keeps the final state
            return True

    def _schedule_flush(self) -> None:
        """A skipped update must still reach the screen if the stream then goes quiet
        (the model thinking for seconds): flush it once the interval has passed."""
        if self._timer is not None and self._timer.is_alive():
            return
        self._timer = threading.Timer(self.min_interval, self._flush)
        self._timer.daemon = True
        self._timer.start()

    def _flush(self) -> None:
        if self._dirty:
            self.sync(force=True)

    def _render(self) -> None:
        state = self.state
        _set(self.header, render.header_html(state))
        _set(self.notes, render.notes_html(state))
        for i, step in enumerate(state.steps):
            if i >= len(self._step_views):
                body = w.HTML()
                acc = w.Accordion(children=[body])
                acc.layout = w.Layout(margin="2px 0")
                self._step_views.append((acc, body))
                self.steps_box.children = (*self.steps_box.children, acc)
            acc, body = self._step_views[i]
            _set(body, render.step_body_html(step))
            title = render.step_title(i, step)
            if acc.get_title(0) != title:
                acc.set_title(0, title)
        _set(self.answer, render.answer_html(state))
        _set(self.status, render.status_html(state))
        if state.status == "running":
            self._schedule_heartbeat()

    def _schedule_heartbeat(self) -> None:
        if (self._heartbeat is not None and self._heartbeat.is_alive()) or self._beats >= MAX_HEARTBEATS:
            return
        self._heartbeat = threading.Timer(HEARTBEAT, self._beat)
        self._heartbeat.daemon = True
        self._heartbeat.start()

    def _beat(self) -> None:
        with self._lock:
            self._beats += 1
            if self.state.status != "running" or self.comm is None:  # finished or widget closed
                return
            _set(self.status, render.status_html(self.state))
            self._heartbeat = None
            self._schedule_heartbeat()

    @property
    def pending(self) -> bool:
        """True when the model changed after the last sync (a throttled update is due)."""
        return self._dirty

    def snapshot_html(self) -> str:
        return render.render_html(self.state)

    def snapshot_text(self) -> str:
        return render.render_text(self.state)

    def snapshot(self) -> dict[str, str]:
        return {"text/html": self.snapshot_html(), "text/plain": self.snapshot_text()}


def _set(widget: w.HTML, value: str) -> None:
    """Only send a message when the value really changed."""
    if widget.value != value:
        widget.value = value
