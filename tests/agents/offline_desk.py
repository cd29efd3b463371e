"""An offline agent over a small knowledge base, for the offline agent's tests: the knowledge
base (hash-256) and its agent made in one call, a question's final answer, its cited sentences."""

from __future__ import annotations

import re
from typing import Any

from kbsql.interface.stream import chunk_kind


def desk(client: Any, kb: str, entries: list[tuple[str, str]], model: str | None = "hash-256") -> str:
    """Knowledge base `kb` holding `entries` (id, content), embedded by kbsql's `model` (None: the
    bundled model), and an offline agent over it: its name."""
    if model is None:
        client.knowledge_bases.create(kb)
    else:
        client.knowledge_bases.create(kb, embedding_model={"provider": "kbsql", "model_name": model})
    client.knowledge_bases.insert(kb, [{"id": i, "content": c} for i, c in entries])
    agent = f"{kb}_desk"
    client.agents.create(agent, data={"knowledge_bases": [f"mindsdb.{kb}"]})
    return agent


def answer(client: Any, agent: str, question: str) -> str:
    return [c["output"] for c in client.agents.stream(agent, question) if chunk_kind(c) == "output"][-1]


def cited(text: str) -> list[str]:
    """The cited sentences of an answer (before its Sources line)."""
    body = text.split("\n\nSources:", 1)[0]
    return [s.strip() for s in re.split(r"\s*\[[^\]]+\]\s*", body) if s.strip()]
