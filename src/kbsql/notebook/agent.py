"""`%agent`: one question to an agent, streamed live, with the conversation kept per agent.

The conversation lives on the connection (keyed by project and agent), so two agents or
two servers never share history; each follow-up sends the earlier question/answer pairs as
the contract's `messages`. The renderer is the widgets part's `show_agent_stream` (an
ipywidgets panel in Jupyter, live-updating HTML/text elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kbsql.interface.errors import KbsqlError
from kbsql.interface.stream import chunk_kind
from kbsql.notebook.connections import Connection

Renderer = Callable[..., str]


class AgentError(KbsqlError):
    """The agent's stream reported an error (the service's message)."""


class AgentAnswer(str):
    """The final answer. The cell already showed it live, so the display hook does not
    print it a second time; `print(answer)` or `display(answer)` later still shows it."""

    _shown_live = True

    def _ipython_display_(self) -> None:
        if self._shown_live:
            self._shown_live = False
            return
        from IPython.display import Markdown, display

        display(Markdown(str(self)))


def renderer() -> Renderer:
    from kbsql.notebook.widgets import show_agent_stream  # imported on first use: ipywidgets is heavy

    return show_agent_stream


def _watch(chunks: Iterable[dict[str, Any]], errors: list[Any]) -> Iterator[dict[str, Any]]:
    """Pass the chunks on, noting failures: an error chunk (the engine's way) or the stream
    raising (a server answers an unknown agent with 404 before any chunk). The renderer shows
    either as a failed panel; `ask` then fails the cell the same way in both cases."""
    try:
        for chunk in chunks:
            if chunk_kind(chunk) == "error":
                errors.append(str(chunk.get("content") or "the agent failed"))
            yield chunk
    except KbsqlError as exc:
        errors.append(exc)
        raise


def ask(conn: Connection, agent: str, question: str, *, project: str | None = None,
        new: bool = False, render: Renderer | None = None) -> AgentAnswer | None:
    """Stream `question` to `agent`, render it, remember the pair and return the answer."""
    key = (project or conn.client.project, agent)
    if new:
        conn.history.pop(key, None)
    if not question:
        if new:
            print(f"New conversation with {agent}.")
            return None
        raise KbsqlError(f"No question for {agent} (%agent {agent} your question)")
    history = conn.history.get(key, [])
    errors: list[str] = []
    chunks = conn.client.agents.stream(agent, question, history=history, project=key[0])
    try:
        answer = (render or renderer())(_watch(chunks, errors), question=question, agent=agent)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # an interrupted cell stops the run on the server
    if errors:  # words that streamed before the error stay in the panel; the cell fails
        raise errors[0] if isinstance(errors[0], KbsqlError) else AgentError(errors[0])
    conn.history[key] = [*history, {"question": question, "answer": answer}]
    return AgentAnswer(answer)
