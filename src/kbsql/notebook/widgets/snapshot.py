"""Static snapshots of live widgets: what a saved notebook keeps of a widget.

A widget's output is only a model id: reopened without its kernel, on GitHub or in
`jupyter nbconvert --to html`, it shows "Loading widget..." or a bare Python repr
(`ChatWidget(children=(HTML(...`) and the conversation is lost. So each kbsql widget, when
displayed, emits two outputs: the widget itself (without a `text/plain` fallback, so no stray
repr line appears where widgets do not render) and a static HTML snapshot of its state with a
display id. The widget updates that snapshot whenever its state settles (an answer finished,
a knowledge base picked, a search ran), so what is saved is the last state the user saw.

Updates go out as `update_display_data` messages, which JupyterLab, Notebook 7, VS Code and
nbclient apply to the output wherever it is, even when the update comes from a button click
long after the displaying cell finished. While the live widget renders, a CSS rule
(`html.HIDE_REDUNDANT_CSS`) hides the snapshot next to it; once the widget is dead, the rule
hides the dead widget output instead.
"""

from __future__ import annotations

import threading
from typing import Any

from kbsql.notebook.widgets import html as render

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def snapshot_bundle(html_fragment: str, text: str) -> dict[str, str]:
    """A display bundle of a snapshot: self-contained HTML (the hiding rule included) + text."""
    css = f"<style>{render.HIDE_REDUNDANT_CSS}</style>"
    return {"text/html": css + html_fragment, "text/plain": text}


class SnapshotDisplay:
    """Mixin for an ipywidgets widget: display = the widget + its updatable snapshot.

    Subclasses implement `snapshot_html()` (one element carrying `render.SNAPSHOT_CLASS`) and
    `snapshot_text()`, and call `refresh_snapshot()` when their state settles."""

    _snapshot_handles: list[Any]

    def snapshot_html(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def snapshot_text(self) -> str:
        return ""

    def snapshot(self) -> dict[str, str]:
        return snapshot_bundle(self.snapshot_html(), self.snapshot_text())

    def _widget_bundle(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if isinstance(bundle, dict):
            bundle = dict(bundle)
            bundle.pop("text/plain", None)  # the snapshot is the fallback, not a repr line
        return bundle

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return self._widget_bundle(**kwargs)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        bundle = self._widget_bundle()
        if bundle:
            display(bundle, raw=True)
        handle = display(self.snapshot(), raw=True, display_id=True)
        if handle is not None:
            self._handles().append(handle)

    def _handles(self) -> list[Any]:
        if not hasattr(self, "_snapshot_handles"):
            self._snapshot_handles = []
            self._snapshot_lock = threading.Lock()
        return self._snapshot_handles

    def refresh_snapshot(self) -> None:
        """Replace every displayed snapshot of this widget by its current state."""
        handles = self._handles()
        if not handles:
            return
        bundle = self.snapshot()
        with self._snapshot_lock:
            for handle in handles:
                handle.update(bundle, raw=True)
