"""`kbsql.widgets`: short alias for the notebook widgets (`kbsql.widgets.browse(client)`)."""

from kbsql.notebook.widgets import (
    AgentStreamPanel,
    ChatWidget,
    KnowledgeBaseBrowser,
    StreamState,
    browse,
    show_agent_stream,
)

__all__ = ["AgentStreamPanel", "ChatWidget", "KnowledgeBaseBrowser", "StreamState", "browse",
           "show_agent_stream"]
