"""Agent runtime (placeholder until the agents issue lands)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kbsql.engine.catalog import AgentRecord
from kbsql.interface.errors import BadRequest

if TYPE_CHECKING:
    from kbsql.engine.engine import Engine


class AgentRuntime:
    def __init__(self, engine: Engine):
        self.engine = engine

    def check_model(self, model: dict[str, Any]) -> None:
        """Raise ProviderError when the agent's model cannot be reached."""

    def complete(self, record: AgentRecord, messages: list[dict[str, Any]]) -> dict[str, Any]:
        raise BadRequest("Agent completions are not available yet")

    def stream(self, record: AgentRecord, messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        raise BadRequest("Agent completions are not available yet")
