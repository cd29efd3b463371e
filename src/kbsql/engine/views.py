"""How catalog records become the contract's JSON objects.

The contract shows a knowledge base three slightly different ways (create, get, list);
those differences live here and nowhere else.
"""

from __future__ import annotations

from typing import Any, Literal

from kbsql.engine.catalog import AgentRecord, KbRecord
from kbsql.interface.models import Agent, KnowledgeBase, ModelDescriptor

KbView = Literal["create", "get", "list"]


def _masked(model: dict[str, Any] | None) -> dict[str, Any] | None:
    descriptor = ModelDescriptor.from_json(model)
    return descriptor.masked() if descriptor else None


def knowledge_base_json(record: KbRecord, view: KbView = "get") -> dict[str, Any]:
    """Create: no project_name, params holds created_embedding_model only.
    Get and list: project_name and the full params (with default_vector_storage)."""
    spec = record.spec
    params = dict(spec.get("params") or {})
    if view == "create":
        params = {"created_embedding_model": params.get("created_embedding_model")}
    out: dict[str, Any] = {"id": record.id, "name": record.name, "project_id": record.project_id}
    if view != "create":
        out["project_name"] = record.project_name
    out.update({
        "vector_database": spec.get("vector_database"),
        "vector_database_table": spec.get("vector_database_table"),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "query_id": spec.get("query_id"),
        "embedding_model": _masked(spec.get("embedding_model")),
        "reranking_model": _masked(spec.get("reranking_model")),
        "metadata_columns": spec.get("metadata_columns"),
        "content_columns": spec.get("content_columns"),
        "id_column": spec.get("id_column"),
        "params": params,
    })
    return out


def knowledge_base(record: KbRecord, view: KbView = "get") -> KnowledgeBase:
    return KnowledgeBase.from_json(knowledge_base_json(record, view))


def agent_json(record: AgentRecord) -> dict[str, Any]:
    """The agent object; the contract returns its api_key as sent."""
    return {
        "id": record.id,
        "name": record.name,
        "project_id": record.project_id,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "model": record.model,
        "data": record.data,
        "prompt_template": record.prompt_template,
    }


def agent(record: AgentRecord) -> Agent:
    return Agent.from_json(agent_json(record))
