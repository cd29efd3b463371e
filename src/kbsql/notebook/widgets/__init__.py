"""Notebook widgets: the agent stream panel, the chat, and the knowledge-base browser.

`show_agent_stream(chunks, question=..., agent=...)` is what `%agent` calls: it renders the
stream live (a widget in Jupyter, updating HTML elsewhere) and leaves a static snapshot.
The heavier pieces (ipywidgets) are imported on first use so `import kbsql` stays light.
"""

from __future__ import annotations

from typing import Any

from kbsql.notebook.widgets.html import render_html, render_text
from kbsql.notebook.widgets.show import frontend_mode, show_agent_stream
from kbsql.notebook.widgets.state import Step, StreamState, parse_observation

_LAZY = {"AgentStreamPanel": "panel", "ChatWidget": "chat", "browse": "browser",
         "KnowledgeBaseBrowser": "browser"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"kbsql.notebook.widgets.{_LAZY[name]}"), name)
    raise AttributeError(name)


__all__ = ["AgentStreamPanel", "ChatWidget", "KnowledgeBaseBrowser", "Step", "StreamState", "browse",
           "frontend_mode", "parse_observation", "render_html", "render_text", "show_agent_stream"]
