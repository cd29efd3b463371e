"""The system prompt: a fixed text about the tools, then the agent's prompt_template, then
the data it is connected to (resolved at question time)."""

from __future__ import annotations

from kbsql.engine.agents.scope import Scope
from kbsql.engine.models.chat.base import Message

BASE_PROMPT = """You are a data assistant. Answer the user's question from the data you are \
connected to, using the tools; do not invent facts.
- Knowledge bases: call kb_list_tool to see them, kb_info_tool for their columns, and \
kb_query_tool with an SQL SELECT to search them, e.g. \
SELECT * FROM my_kb WHERE content = 'search text' LIMIT 5; rows come best match first.
- Tables: call sql_db_list_tables, sql_db_schema, then sql_db_query with an SQL SELECT naming \
tables as <data_source>.<table>.
Observations list the output columns, then rows as CSV. Only the data listed below can be \
read; other queries are refused. When you have enough, answer briefly and cite the chunk_id \
of the knowledge-base rows you used."""


def system_prompt(prompt_template: str | None, scope: Scope) -> str:
    parts = [BASE_PROMPT]
    if prompt_template:
        parts.append(prompt_template.strip())
    data = []
    if scope.has_kb_entries:
        names = ", ".join(scope.kb_label(r) for r in scope.knowledge_bases) or "none yet"
        data.append(f"Knowledge bases: {names}.")
    if scope.has_table_entries:
        data.append(f"Tables: {', '.join(scope.tables) or 'none yet'}.")
    parts.append("Connected data:\n" + ("\n".join(data) if data else "none."))
    return "\n\n".join(parts)


def conversation(pairs: list[dict[str, str]]) -> list[Message]:
    """Question/answer pairs -> messages; the last question is the one asked now."""
    messages: list[Message] = []
    for i, pair in enumerate(pairs):
        messages.append(Message("user", pair["question"]))
        if pair["answer"] and i < len(pairs) - 1:
            messages.append(Message("assistant", pair["answer"]))
    return messages
