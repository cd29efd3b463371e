"""The narrow interfaces the engine's parts use to reach each other.

SQL and agents call each other (the domain has it: `SELECT answer FROM agent` asks an agent,
an agent's tools run SQL). Neither part imports the other or `Engine`: each receives one of
these ports, and `Engine.__init__` (the composition root) is the only place that builds both
and connects them. This module imports nothing from the engine, so it can sit under every
part without closing a cycle.
"""

from __future__ import annotations

from typing import Any, Protocol

from kbsql.interface.models import Agent
from kbsql.interface.results import SqlResult


class RunsSql(Protocol):
    """Something that runs one SQL statement in a context (`{"db": project}`), never raising
    for a bad statement: failures come back as an `ErrorResult`."""

    def query(self, query: str, context: dict[str, Any] | None = None) -> SqlResult: ...


class AgentOps(Protocol):
    """What SQL needs from agents: create and drop them (CREATE/DROP AGENT go through the same
    validation as the REST routes) and ask one a question (`SELECT answer FROM agent`)."""

    def create_agent(self, project: str, body: dict[str, Any]) -> Agent: ...

    def delete_agent(self, project: str, name: str) -> None: ...

    def complete(self, project: str, agent: str,
                 messages: list[dict[str, Any]]) -> dict[str, Any]: ...
