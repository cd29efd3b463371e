"""The service's operations as one Python protocol.

The local engine implements it in-process; `kbsql.client.http.HttpApi` implements it over
HTTP. The client wraps either, so embedded and remote use give the same objects and the
same errors (the chromadb pattern). Bodies are the *inner* objects of the contract
(`{"name": ...}`, not `{"knowledge_base": {"name": ...}}`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from kbsql.interface.models import Agent, KnowledgeBase
from kbsql.interface.results import SqlResult

DEFAULT_PROJECT = "mindsdb"


class ServiceApi(Protocol):
    def status(self) -> dict[str, Any]: ...

    def list_projects(self) -> list[dict[str, Any]]: ...

    def get_project(self, name: str) -> dict[str, Any]: ...

    # knowledge bases (contract endpoints 1-4, plus the reference's PUT for rows)
    def create_knowledge_base(self, project: str, body: dict[str, Any]) -> KnowledgeBase: ...

    def get_knowledge_base(self, project: str, name: str) -> KnowledgeBase: ...

    def list_knowledge_bases(self, project: str) -> list[KnowledgeBase]: ...

    def delete_knowledge_base(self, project: str, name: str) -> None: ...

    def insert_knowledge_base_rows(
        self, project: str, name: str, rows: list[dict[str, Any]]
    ) -> dict[str, Any]: ...

    # agents (contract endpoints 5-6, plus get/list/delete)
    def create_agent(self, project: str, body: dict[str, Any]) -> Agent: ...

    def get_agent(self, project: str, name: str) -> Agent: ...

    def list_agents(self, project: str) -> list[Agent]: ...

    def update_agent(self, project: str, name: str, body: dict[str, Any]) -> Agent: ...

    def delete_agent(self, project: str, name: str) -> None: ...

    # SQL (endpoint 7) and completions (endpoint 8)
    def query(self, query: str, context: dict[str, Any] | None = None) -> SqlResult: ...

    def complete(self, project: str, agent: str, messages: list[dict[str, Any]]) -> dict[str, Any]: ...

    def stream(
        self, project: str, agent: str, messages: list[dict[str, Any]]
    ) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...
