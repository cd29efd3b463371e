"""The catalog's records (what `Catalog` reads back) and its timestamp form."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def json_or_empty(row: Any, key: str) -> dict[str, Any]:
    """A JSON column that a catalog of an earlier version (opened read-only, so never
    upgraded) may not have."""
    value = row[key] if key in row.keys() else None
    return json.loads(value) if value else {}


def now() -> str:
    """A timestamp in the interface's form `YYYY-MM-DD HH:MM:SS.ffffff` (UTC)."""
    return datetime.now(UTC).strftime(TIMESTAMP_FORMAT)


@dataclass
class ProjectRecord:
    id: int
    name: str
    created_at: str


@dataclass
class _Stored:
    """What every named record of a project has."""

    id: int
    project_id: int
    project_name: str
    name: str
    created_at: str
    updated_at: str


@dataclass
class KbRecord(_Stored):
    """A knowledge base as stored. `spec` keys: vector_database, vector_database_table,
    embedding_model, reranking_model, metadata_columns, content_columns, id_column,
    preprocessing, params, query_id."""

    spec: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, key: str) -> Any:  # spec keys read as attributes
        spec = self.__dict__.get("spec")
        if spec is not None and key in _KB_SPEC_KEYS:
            return spec.get(key)
        raise AttributeError(key)


_KB_SPEC_KEYS = frozenset({
    "vector_database", "vector_database_table", "embedding_model", "reranking_model",
    "metadata_columns", "content_columns", "id_column", "preprocessing", "params", "query_id",
})


@dataclass
class AgentRecord(_Stored):
    model: dict[str, Any] | None
    data: dict[str, Any]
    prompt_template: str | None
    params: dict[str, Any] = field(default_factory=dict)
    """MindsDB's agent `params` beyond model, data and prompt (`timeout`, `mode`)."""


@dataclass
class DatasourceRecord:
    id: int
    name: str
    engine: str
    parameters: dict[str, Any]
    created_at: str
