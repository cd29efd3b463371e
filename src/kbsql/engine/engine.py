"""The local engine: the whole service as a plain Python object.

`Engine` implements `kbsql.interface.ServiceApi`. It owns the catalog and composes three
parts that each have one job: the knowledge service (chunking, embeddings, vectors), the
SQL executor (parsing and routing statements) and the agent runtime. It knows nothing of
HTTP, IPython or widgets; the server and the client are adapters over it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kbsql import __version__
from kbsql.engine import validate
from kbsql.engine.agents.runtime import AgentRuntime
from kbsql.engine.catalog import AgentRecord, Catalog, KbRecord
from kbsql.engine.config import EngineConfig
from kbsql.engine.knowledge.service import KnowledgeService
from kbsql.engine.sql.executor import SqlExecutor
from kbsql.engine.views import agent, knowledge_base, knowledge_base_json
from kbsql.interface.errors import BadRequest
from kbsql.interface.models import Agent, KnowledgeBase
from kbsql.interface.results import SqlResult

DEFAULT_VECTOR_DATABASE = "kbsql_faiss"


class Engine:
    """Projects, knowledge bases, agents and SQL over a data directory."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None,
                 config: EngineConfig | None = None):
        self.config = config or EngineConfig.load(data_dir)
        self.data_dir: Path = self.config.data_dir
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(self.data_dir / "catalog.sqlite")
        self.knowledge = KnowledgeService(self.data_dir, self.config)
        self.sql = SqlExecutor(self)
        self.agents = AgentRuntime(self)
        self._closed = threading.Event()

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self.sql.close()
            self.knowledge.close()
            self.catalog.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # status and projects ------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {"version": __version__, "environment": "local", "engine": "kbsql",
                "auth": {"http_auth_enabled": False}}

    def list_projects(self) -> list[dict[str, Any]]:
        return [{"name": p.name} for p in self.catalog.projects()]

    def get_project(self, name: str) -> dict[str, Any]:
        project = self.catalog.project(name)
        return {"name": project.name}

    # knowledge bases ----------------------------------------------------------------------
    def create_knowledge_base(self, project: str, body: dict[str, Any]) -> KnowledgeBase:
        record = self._create_knowledge_base(project, body)
        return knowledge_base(record, "create")

    def _create_knowledge_base(self, project: str, body: dict[str, Any],
                               if_not_exists: bool = False) -> KbRecord:
        """Validate everything, check the models answer, then store: nothing half-made."""
        body = validate.require_object(body, "knowledge_base")
        name = validate.name(body.get("name"), "knowledge base")
        self.catalog.project(project)  # 404 before any provider call
        existing = self.catalog.find_knowledge_base(project, name)
        if existing is not None and if_not_exists:
            return existing
        self.catalog.check_name_free(project, name, "knowledge base")  # before provider calls
        store = validate.storage(body.get("storage"))
        spec = {
            "vector_database": store["database"] if store else DEFAULT_VECTOR_DATABASE,
            "vector_database_table": store["table"] if store else name,
            "embedding_model": validate.model(body.get("embedding_model"), "embedding_model"),
            "reranking_model": validate.model(body.get("reranking_model"), "reranking_model"),
            "metadata_columns": validate.string_list(body.get("metadata_columns"), "metadata_columns"),
            "content_columns": validate.string_list(body.get("content_columns"), "content_columns"),
            "id_column": validate.optional_string(body.get("id_column"), "id_column"),
            "preprocessing": validate.preprocessing(body.get("preprocessing")),
            "query_id": None,
            "params": {"created_embedding_model": f"kb_embedding_{name}",
                       "default_vector_storage": DEFAULT_VECTOR_DATABASE},
        }
        if existing is None:  # a duplicate is a 409 from the catalog; skip the provider call
            self.knowledge.check_models(spec)
        record = self.catalog.create_knowledge_base(project, name, spec)
        self.knowledge.create_storage(record)
        return record

    def get_knowledge_base(self, project: str, name: str) -> KnowledgeBase:
        return knowledge_base(self.catalog.knowledge_base(project, name), "get")

    def list_knowledge_bases(self, project: str) -> list[KnowledgeBase]:
        return [knowledge_base(r, "list") for r in self.catalog.knowledge_bases(project)]

    def delete_knowledge_base(self, project: str, name: str) -> None:
        record = self.catalog.knowledge_base(project, name)
        self.catalog.delete_knowledge_base(record)  # atomic; files go after, ids never reused
        self.knowledge.drop_storage(record)

    def insert_knowledge_base_rows(self, project: str, name: str,
                                   rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The REST insert. Answers the knowledge base (get view) plus `inserted_rows`, the
        rows actually stored (rows without content are skipped), so a remote client can
        report the same count as an embedded one."""
        record = self.catalog.knowledge_base(project, name)
        stored = self.insert_rows(record, validate.rows(rows))
        return {**knowledge_base_json(self.catalog.knowledge_base(project, name), "get"),
                "inserted_rows": stored}

    def knowledge_base_vectors(self, project: str, name: str, limit: int = 5000,
                               query: str | None = None) -> dict[str, Any]:
        """In-process only (the HTTP API never sends vectors): the first `limit` chunks'
        ids, metadata and embeddings, and the embedding of `query`, for a notebook's 2-D map
        of a knowledge base (`%kbsql_plot map`)."""
        import json

        import numpy as np

        record = self.catalog.knowledge_base(project, name)
        store = self.knowledge.handle(record).store
        dim = store.dim()
        rows = store.query("SELECT chunk_id, metadata, embedding FROM chunks ORDER BY seq LIMIT ?",
                           (int(limit),)) if dim else []
        vectors = (np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(-1, dim)
                   if rows else np.zeros((0, dim or 0), np.float32))
        query_vector = None
        if query is not None and dim:
            query_vector = np.asarray(self.knowledge.embedder(record.spec).embed([query])[0], np.float32)
        return {"chunk_ids": [r[0] for r in rows], "metadata": [json.loads(r[1]) for r in rows],
                "vectors": vectors, "query_vector": query_vector}

    def insert_rows_local(self, project: str, name: str, rows: Any,
                          progress: bool | None = None) -> int:
        """In-process insert used by the embedded client: rows (DataFrame or dicts) go to
        the knowledge service in one call, which batches them itself."""
        return self.insert_rows(self.catalog.knowledge_base(project, name), rows, progress)

    def insert_rows(self, record: KbRecord, rows: Any, progress: bool | None = None) -> int:
        """Insert rows (list of dicts or a DataFrame) into a knowledge base; returns the count."""
        count = self.knowledge.insert(record, rows, progress=progress)
        self.catalog.update_knowledge_base(record)
        return count

    # agents -------------------------------------------------------------------------------
    def create_agent(self, project: str, body: dict[str, Any]) -> Agent:
        body = validate.require_object(body, "agent")
        name = validate.name(body.get("name"), "agent")
        self.catalog.project(project)
        # no model: store None, meaning "the configured default", resolved at run time, so
        # the server's own key is never copied into the agent (nor shown, nor kept stale)
        model = validate.model(body.get("model"), "model")
        data = validate.agent_data(body.get("data"))
        prompt = validate.prompt_template(body.get("prompt_template"))
        self.catalog.check_name_free(project, name, "agent")  # before the model call
        self.agents.check_model(model or self.config.default_model)
        return self._agent(self.catalog.create_agent(project, name, model, data, prompt))

    def _agent(self, record: AgentRecord) -> Agent:
        return agent(record, self.config.default_model)

    def get_agent(self, project: str, name: str) -> Agent:
        return self._agent(self.catalog.agent(project, name))

    def list_agents(self, project: str) -> list[Agent]:
        return [self._agent(r) for r in self.catalog.agents(project)]

    def update_agent(self, project: str, name: str, body: dict[str, Any]) -> Agent:
        body = validate.require_object(body, "agent")
        record = self.catalog.agent(project, name)
        new_name = validate.name(body["name"], "agent") if body.get("name") else record.name
        model = validate.model(body.get("model"), "model") if "model" in body else record.model
        data = validate.agent_data(body["data"]) if "data" in body else record.data
        prompt = (validate.prompt_template(body["prompt_template"]) if "prompt_template" in body
                  else record.prompt_template)
        self.catalog.check_name_free(project, new_name, "agent", record.id)
        if model != record.model:
            self.agents.check_model(model or self.config.default_model)
        return self._agent(self.catalog.update_agent(record, new_name, model, data, prompt))

    def delete_agent(self, project: str, name: str) -> None:
        self.catalog.delete_agent(self.catalog.agent(project, name))

    # SQL and completions ------------------------------------------------------------------
    def query(self, query: str, context: dict[str, Any] | None = None) -> SqlResult:
        if not isinstance(query, str) or not query.strip():
            raise BadRequest("'query' must be a non-empty SQL string", title="Missing parameter")
        return self.sql.execute(query, context)

    def complete(self, project: str, agent: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        validate.messages(messages)  # the same check for HTTP routes and embedded callers
        return self.agents.complete(self.catalog.agent(project, agent), messages)

    def stream(self, project: str, agent: str,
               messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        validate.messages(messages)
        return self.agents.stream(self.catalog.agent(project, agent), messages)

    # registered DataFrames (the built-in data source `df`) ---------------------------------
    def register_dataframe(self, name: str, frame: Any) -> int:
        """Make `frame` (pandas or Arrow) the table `df.<name>`, stored as Parquet in the data
        directory so it survives a restart; returns its row count."""
        return self.sql.register_frame(name, frame)

    def register_file(self, name: str, raw: bytes, content_type: str = "") -> int:
        """Register an uploaded Parquet (or CSV) file as the table `df.<name>`."""
        from kbsql.engine.datasources.frames import read_uploaded

        return self.register_dataframe(name, read_uploaded(raw, content_type))

    def unregister_dataframe(self, name: str) -> bool:
        return self.sql.frames.unregister(name)
