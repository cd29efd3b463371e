"""How catalog records become the contract's JSON objects.

The contract shows a knowledge base three slightly different ways (create, get, list);
those differences live here and nowhere else. The field order comes from
`KnowledgeBase.FIELDS` / `Agent.FIELDS` (the interface declares it once); this module only
says where each field's value comes from.
"""

from __future__ import annotations

from typing import Any, Literal

from kbsql.engine.catalog import AgentRecord, KbRecord
from kbsql.interface.models import Agent, KnowledgeBase, ModelDescriptor

KbView = Literal["create", "get", "list"]

_CREATE_DROPS = frozenset({"project_name"})  # the create answer has no project_name
_CREATE_PARAMS = ("created_embedding_model",)  # ... and only this key in params


def _masked(model: dict[str, Any] | None) -> dict[str, Any] | None:
    descriptor = ModelDescriptor.from_json(model)
    return descriptor.masked() if descriptor else None


def _kb_value(record: KbRecord, key: str, view: KbView) -> Any:
    """The value of one contract field: record columns first, then the stored spec."""
    if key in ("embedding_model", "reranking_model"):
        return _masked(record.spec.get(key))
    if key == "params":
        params = dict(record.spec.get("params") or {})
        if view == "create":
            params = {k: params.get(k) for k in _CREATE_PARAMS}
        elif record.spec.get("preprocessing"):  # MindsDB keeps it in params: an ALTER is seen there
            params["preprocessing"] = record.spec["preprocessing"]
        return params
    if key in ("id", "name", "project_id", "project_name", "created_at", "updated_at"):
        return getattr(record, key)
    return record.spec.get(key)


def knowledge_base_json(record: KbRecord, view: KbView = "get") -> dict[str, Any]:
    """Create: no project_name, params holds created_embedding_model only.
    Get and list: project_name and the full params (with default_vector_storage)."""
    return {key: _kb_value(record, key, view) for key in KnowledgeBase.FIELDS
            if not (view == "create" and key in _CREATE_DROPS)}


def knowledge_base(record: KbRecord, view: KbView = "get") -> KnowledgeBase:
    return KnowledgeBase.from_json(knowledge_base_json(record, view))


def agent_json(record: AgentRecord, default_model: dict[str, Any] | None = None) -> dict[str, Any]:
    """The agent object. The contract returns an api_key *as sent*; an agent created without
    a model runs on the configured default, which is shown with its key masked: that key
    came from the server's configuration, not from the caller."""
    out = {key: getattr(record, key) for key in Agent.FIELDS}
    if record.params:  # MindsDB's as_dict: `params` only when there are any
        out["params"] = dict(record.params)
    if record.model is None and default_model is not None:
        out["model"] = ModelDescriptor(dict(default_model)).masked()
    return out


def agent(record: AgentRecord, default_model: dict[str, Any] | None = None) -> Agent:
    return Agent.from_json(agent_json(record, default_model))
