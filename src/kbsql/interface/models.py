"""Resource shapes of the interface: model descriptor, storage, knowledge base, agent.

Every object keeps the exact JSON it was built from in `raw`, so a client never loses a
field the server sent (even one this version does not know), and `to_json()` gives back
exactly what came in. Typed attributes are read from `raw`, not stored beside it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from kbsql.interface.secrets import MASK, mask_secret, mask_url  # noqa: F401 (re-exported)

T = TypeVar("T")


class _Key(Generic[T]):
    """A typed read of one key of an object's `raw` JSON (None when the key is absent)."""

    def __init__(self, key: str):
        self.key = key

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Key[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else obj.raw.get(self.key)


@dataclass(frozen=True)
class ModelDescriptor:
    """`{provider, model_name, api_key}` plus any provider options (base_url, ...)."""

    raw: dict[str, Any] = field(default_factory=dict)

    provider = _Key[str | None]("provider")
    model_name = _Key[str | None]("model_name")
    api_key = _Key[str | None]("api_key")

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ModelDescriptor | None:
        return None if data is None else cls(dict(data))

    def masked(self) -> dict[str, Any]:
        """The JSON with the api key replaced by asterisks."""
        out = dict(self.raw)
        if "api_key" in out:
            out["api_key"] = mask_secret(out["api_key"])
        return out

    def to_json(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)

    def __repr__(self) -> str:  # never print a key by accident
        return f"ModelDescriptor({self.masked()!r})"


@dataclass(frozen=True)
class Storage:
    """Request-only `{database, table}`: where the vectors of a knowledge base live."""

    database: str
    table: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Storage:
        return cls(database=str(data["database"]), table=str(data["table"]))

    def to_json(self) -> dict[str, Any]:
        return {"database": self.database, "table": self.table}


def lifted_params(body: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """`body` with `fields` sent inside `params` moved beside it: MindsDB's agent and
    knowledge base records keep them in `params` and its REST bodies may send them there
    (knowledge_bases_test.py alters `params.embedding_model`); read only beside `params`,
    they would be ignored without a word. The fields sent beside `params` win."""
    params = body.get("params")
    if not isinstance(params, dict) or not set(params) & set(fields):
        return body
    params = dict(params)
    moved = {k: params.pop(k) for k in fields if k in params}
    return {**{k: v for k, v in moved.items() if v is not None},
            **{k: v for k, v in body.items() if v is not None or k not in moved}, "params": params}


class _Resource:
    """Shared behaviour of resources: typed reads over the raw JSON."""

    raw: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def to_json(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)

    @property
    def id(self) -> int:
        return self.raw["id"]

    @property
    def name(self) -> str:
        return self.raw["name"]

    project_id = _Key[int | None]("project_id")
    created_at = _Key[str | None]("created_at")
    updated_at = _Key[str | None]("updated_at")


@dataclass(frozen=True, repr=False)
class KnowledgeBase(_Resource):
    """A knowledge base as the service shows it (contract: "Knowledge base")."""

    raw: dict[str, Any]

    FIELDS = (
        "id", "name", "project_id", "project_name", "vector_database", "vector_database_table",
        "created_at", "updated_at", "query_id", "embedding_model", "reranking_model",
        "metadata_columns", "content_columns", "id_column", "params",
    )
    PARAMS_FIELDS = ("embedding_model", "reranking_model", "content_columns", "metadata_columns",
                     "id_column", "preprocessing")
    """Fields a create or PUT body may also send inside `params` (`lifted_params`); the
    fields MindsDB's PUT alters from `params` (its `allowed_keys`)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KnowledgeBase:
        return cls(dict(data))

    project_name = _Key[str | None]("project_name")
    vector_database = _Key[str | None]("vector_database")
    vector_database_table = _Key[str | None]("vector_database_table")

    @property
    def embedding_model(self) -> ModelDescriptor | None:
        return ModelDescriptor.from_json(self.raw.get("embedding_model"))

    @property
    def reranking_model(self) -> ModelDescriptor | None:
        return ModelDescriptor.from_json(self.raw.get("reranking_model"))

    metadata_columns = _Key[list[str] | None]("metadata_columns")
    content_columns = _Key[list[str] | None]("content_columns")
    id_column = _Key[str | None]("id_column")

    @property
    def params(self) -> dict[str, Any]:
        return self.raw.get("params") or {}

    def __repr__(self) -> str:
        return f"KnowledgeBase(name={self.name!r}, project={self.project_name!r}, id={self.id})"


@dataclass(frozen=True, repr=False)
class Agent(_Resource):
    """An agent as the service shows it (contract: "Agent"). Its api_key is not masked."""

    raw: dict[str, Any]

    FIELDS = ("id", "name", "project_id", "created_at", "updated_at", "model", "data",
              "prompt_template")
    PARAMS_FIELDS = ("data", "prompt_template", "model")
    """Fields a create or update body may also send inside `params` (`lifted_params`)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Agent:
        return cls(dict(data))

    @property
    def model(self) -> ModelDescriptor | None:
        return ModelDescriptor.from_json(self.raw.get("model"))

    @property
    def data(self) -> dict[str, list[str]]:
        return self.raw.get("data") or {}

    prompt_template = _Key[str | None]("prompt_template")

    @property
    def params(self) -> dict[str, Any]:
        """MindsDB's agent `params` beyond the contract's fields (`timeout`, `mode`); present
        in the JSON only when set, as MindsDB answers it."""
        return self.raw.get("params") or {}

    def __repr__(self) -> str:  # repr masks the key: reprs end up in notebook outputs
        model = self.model.masked() if self.model else None
        return f"Agent(name={self.name!r}, id={self.id}, model={model!r})"
