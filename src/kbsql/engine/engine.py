"""The local engine: the whole service as a plain Python object.

`Engine` implements `kbsql.interface.ServiceApi`. `Engine.__init__` and `wiring.py` (which
it calls) are the composition root: the only place that knows every part and connects them.
The parts never see `Engine`:

- `ModelProviders` (the model-provider registries, one pooled outbound HTTP client, the
  loaded models) and the storage-backend registry (`plugins.Registry`), built here: the
  engine owns them, nothing about them is process-global;
- `Catalog` (projects, knowledge-base and agent records, data sources);
- `KnowledgeService` (chunks, embeddings, vectors) and `KnowledgeBases` (create / insert /
  delete across catalog and service);
- `SqlExecutor` (parses and routes statements; reaches agents through the `AgentOps` port);
- `AgentService` (agent CRUD and runs; runs tool SQL through the `RunsSql` port).

SQL and agents need each other; each gets the other as a port (`engine/ports.py`). The
methods below are thin: they turn records into interface views. The engine knows nothing
of HTTP, IPython or widgets; the server and the client are adapters over it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbsql._version import __version__
from kbsql.engine import validate, wiring
from kbsql.engine.catalog import Catalog, KbRecord
from kbsql.engine.config import OFFLINE_PROVIDER, EngineConfig
from kbsql.engine.engine_tables import TableSurface
from kbsql.engine.fair_slots import FairSlots
from kbsql.engine.knowledge.storage import StorageBackend
from kbsql.engine.models.model_context import ProviderContext
from kbsql.engine.models.model_http import ModelHttp
from kbsql.engine.models.providers import BUILTINS, ModelProviders
from kbsql.engine.plugins import STORAGE, Registry
from kbsql.engine.views import knowledge_base, knowledge_base_json
from kbsql.interface.api import (
    INSERT_BATCH_ROWS,
    DefaultModels,
    InsertCounts,
    KnowledgeBaseEditing,
    KnowledgeBaseVectors,
)
from kbsql.interface.control import Stopped
from kbsql.interface.errors import ServiceError
from kbsql.interface.models import Agent, KnowledgeBase
from kbsql.interface.progress import OnProgress
from kbsql.interface.results import SqlResult
from kbsql.interface.secrets import mask_secrets

if TYPE_CHECKING:
    from kbsql.engine.agents.agent_service import AgentService
    from kbsql.engine.datasources.upload_store import UploadStore
    from kbsql.engine.jobs.scheduler import JobScheduler
    from kbsql.engine.knowledge.bases import KnowledgeBases
    from kbsql.engine.knowledge.service import KnowledgeService
    from kbsql.engine.sql.executor import SqlExecutor

__all__ = ["Engine"]


class Engine(TableSurface, KnowledgeBaseEditing, KnowledgeBaseVectors, DefaultModels):
    """Projects, knowledge bases, agents and SQL over a data directory: `ServiceApi`, plus
    the optional capabilities it declares (DataFrames and files as tables, MindsDB's
    databases, knowledge-base editing, chunk vectors for a notebook's map)."""

    embedded = True

    def __init__(self, data_dir: str | os.PathLike[str] | None = None,
                 config: EngineConfig | None = None, catalog_url: str | None = None, *,
                 models: ModelProviders | None = None, settings: Mapping[str, Any] | None = None):
        """`settings`: engine settings by name (engine/settings_table.py), which beat the
        environment and config.json (`kbsql.connect(settings=...)`); an unknown name or a
        wrong type is a `SettingError`. `models`: model providers whose loaded models
        (weights) this engine shares, to load a model once for several engines of one
        process. The engine still makes its model calls through its own HTTP client under
        its own outbound policy (from `config`), and closing it closes only that client."""
        self.config = config or EngineConfig.load(data_dir, catalog_url, settings=settings)
        self.data_dir: Path = self.config.data_dir
        # 0700: the catalog holds API keys; nobody but the owner may even list the files
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # a read-only directory (a read-only mount, a snapshot) still serves reads
        self.config.read_only = not os.access(self.data_dir, os.W_OK)
        # a postgresql:// URL: the state shared by several servers (catalog_pg.py)
        self.catalog = Catalog(self.config.catalog_url or self.data_dir / "catalog.sqlite",
                               read_only=self.config.read_only)
        loaded = models.context if models is not None else ProviderContext()
        self.models = ModelProviders(loaded.with_http(ModelHttp(policy=wiring.outbound_policy(self.config))))
        self.models.context.llm_log.keep(self.config.llm_log_rows)
        self.storage = Registry[StorageBackend]("storage backend", STORAGE, BUILTINS[STORAGE], instances=True)
        self._parts: wiring.Parts | None = None
        self._wiring = threading.Lock()
        self._closed = threading.Event()
        # uploaded PDFs read at once, each in a process taking a core (datasources/pdf_text.py)
        self._pdf_slots = FairSlots(self.config.pdf_workers)  # shared fairly between users
        # uploads parsed at once, each in a process of its own (datasources/parse_process.py)
        self._parse_slots = FairSlots(self.config.upload_processes) if self.config.upload_processes else None
        # jobs (CREATE JOB) run in this process's own thread (a notebook kernel's, `kbsql
        # serve`'s), made only once there is a job to run (engine/jobs/)
        self._jobs: JobScheduler | None = None
        wiring.load_parsers()
        self._start_jobs_if_any()

    def _wired(self) -> wiring.Parts:
        """Build the knowledge service, agents, uploads and SQL executor once, on first use,
        and connect them: the composition root's second half. SQL and agents need each
        other; each gets the other as a port (`engine/ports.py`)."""
        parts = self._parts
        if parts is not None:
            return parts
        with self._wiring:
            if self._parts is None:
                if self._closed.is_set():  # a call racing close(): nothing new to leave open
                    raise ServiceError("This kbsql engine is closed", status=503)
                self._parts = wiring.build_parts(self.config, self.catalog, self.models, self.storage,
                                                 self._start_jobs)
            return self._parts

    @property
    def knowledge(self) -> KnowledgeService:
        return self._wired().knowledge

    @property
    def kbs(self) -> KnowledgeBases:
        return self._wired().kbs

    @property
    def agents(self) -> AgentService:
        return self._wired().agents

    @property
    def uploads(self) -> UploadStore:
        return self._wired().uploads

    @property
    def sql(self) -> SqlExecutor:
        return self._wired().sql

    @property
    def jobs(self) -> JobScheduler:
        """This engine's job scheduler, made on first use; its thread runs only once started
        (`_start_jobs`); `kbsql jobs run` calls its `run_due` without one."""
        from kbsql.engine.jobs.job_store import JobStore
        from kbsql.engine.jobs.scheduler import JobScheduler

        with self._wiring:
            if self._jobs is None:
                self._jobs = JobScheduler(JobStore(self.catalog, self.config.jobs_history_rows),
                                          lambda: self.sql,
                                          self.config.jobs_poll_s or 0.0, self.config.jobs_time_scale,
                                          self.config.job_workers)
            return self._jobs

    def _start_jobs_if_any(self) -> None:
        """On open: start the scheduler if the catalog holds a job, or may get one from
        another server (a shared PostgreSQL catalog); an engine without jobs starts no thread."""
        if not self.config.jobs_poll_s or self.config.read_only:
            return
        from kbsql.engine.jobs.job_store import JobStore

        if self.catalog.shared_url is not None or JobStore(self.catalog).any():
            self._start_jobs()

    def _start_jobs(self) -> None:
        """Run this engine's jobs in a thread of its own, from now until close() (once)."""
        if self.config.jobs_poll_s and not self.config.read_only and not self._closed.is_set():
            self.jobs.start()

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            with self._wiring:  # parts never built hold nothing to close or save
                parts, jobs = self._parts, self._jobs
            if jobs is not None:  # first: a run in flight is stopped and recorded
                jobs.close()
            if parts is not None:
                parts.sql.close()
                parts.knowledge.close(self._knowledge_base_ids())
            self.models.close()
            self.catalog.close()

    def _knowledge_base_ids(self) -> set[int] | None:
        """The ids of the knowledge bases that still exist, so closing saves only their
        indexes (another process may have dropped one); None when the catalog cannot say."""
        try:
            return {kb.id for kb in self.catalog.knowledge_bases()}
        except Exception:  # a catalog that is down: save them all, as before
            return None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def location(self) -> str:
        return str(self.data_dir)

    # status and projects ------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """MindsDB's status fields, plus whether the catalog database answers right now
        (`catalog.ok`: with a shared catalog, whether PostgreSQL does; see Catalog.health)."""
        return {"version": __version__, "environment": "local", "engine": "kbsql",
                "auth": {"http_auth_enabled": False}, "catalog": self.catalog.health()}

    def list_projects(self) -> list[dict[str, Any]]:
        return [{"name": p.name} for p in self.catalog.projects()]

    def get_project(self, name: str) -> dict[str, Any]:
        project = self.catalog.project(name)
        return {"name": project.name}

    def default_models(self) -> dict[str, Any]:
        """`DefaultModels`: the agents' and knowledge bases' defaults (settings default_model and
        default_embedding_model) as MindsDB's config names them, the bundled embedder when none
        is set; a key or password is masked (MindsDB shows it)."""
        from kbsql.engine.models.minilm import MODEL_NAME  # numpy: not at the engine's import

        embedding = self.config.default_embedding_model or {"provider": OFFLINE_PROVIDER,
                                                            "model_name": MODEL_NAME}
        return {"default_llm": mask_secrets(self.config.default_model),
                "default_embedding_model": mask_secrets(embedding)}

    # knowledge bases ----------------------------------------------------------------------
    def create_knowledge_base(self, project: str, body: dict[str, Any]) -> KnowledgeBase:
        return knowledge_base(self.kbs.create(project, body), "create")

    def get_knowledge_base(self, project: str, name: str) -> KnowledgeBase:
        return knowledge_base(self.catalog.knowledge_base(project, name), "get")

    def list_knowledge_bases(self, project: str) -> list[KnowledgeBase]:
        return [knowledge_base(r, "list") for r in self.catalog.knowledge_bases(project)]

    def delete_knowledge_base(self, project: str, name: str) -> None:
        self.kbs.delete(project, name)

    def insert_knowledge_base_rows(self, project: str, name: str,
                                   rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The REST insert. Answers the knowledge base (get view) plus `inserted_rows`, the
        rows actually stored (rows without content are skipped), so a remote client can
        report the same count as an embedded one. The view is the record the insert
        stored: the catalog is read once per batch, to find the knowledge base. The insert
        keeps the statement deadline and the request's client (a 17 MB PUT ran 45 s with
        neither): past either, nothing is stored and the error says so."""
        record = self.catalog.knowledge_base(project, name)
        _check_placed(validate.rows(rows), record)
        try:
            with self.sql.deadline():  # a statement's time, checked between batches (issue 39)
                stored, record = self.kbs.insert(record, rows)
        except Stopped as exc:
            raise Stopped(f"{exc.reason}. Send the rows in several PUTs (kbsql's client sends "
                          f"{INSERT_BATCH_ROWS:,} rows a PUT)") from None
        return {**knowledge_base_json(record, "get"), "inserted_rows": stored}

    def knowledge_base_vectors(self, project: str, name: str, limit: int = 5000,
                               query: str | None = None) -> dict[str, Any]:
        """In-process only (the HTTP API never sends vectors): the first `limit` chunks'
        ids, metadata and embeddings, and the embedding of `query`, for a notebook's 2-D map
        of a knowledge base (`%kbsql_plot map`)."""
        from kbsql.engine.models.embeddings import embed_query

        record = self.catalog.knowledge_base(project, name)
        chunk_ids, metadata, vectors = self.knowledge.handle(record).sample(limit)
        query_vector = None
        if query is not None and vectors.shape[1]:
            query_vector = embed_query(self.knowledge.embedder(record.spec), query)
        return {"chunk_ids": chunk_ids, "metadata": metadata, "vectors": vectors,
                "query_vector": query_vector}

    def alter_knowledge_base(self, project: str, name: str, changes: dict[str, Any]) -> KnowledgeBase:
        """`KnowledgeBaseEditing`: ALTER KNOWLEDGE_BASE with these fields (`kb_changes`)."""
        from kbsql.engine.sql.kb import kb_changes

        kb_changes.alter(self.sql.run, project, name, changes)
        return self.get_knowledge_base(project, name)

    def insert_query_into_knowledge_base(self, project: str, name: str, query: str,
                                         options: dict[str, Any] | None = None) -> int:
        """`KnowledgeBaseEditing`: INSERT INTO kb <query> [USING options] (`kb_changes`)."""
        from kbsql.engine.sql.kb import kb_changes

        return kb_changes.insert_query(self.sql.run, project, name, query, options)

    def insert_into_knowledge_base(self, project: str, name: str, rows: Any, *,
                                   batch_size: int = INSERT_BATCH_ROWS,
                                   progress: OnProgress | None = None) -> InsertCounts:
        """`ServiceApi.insert_into_knowledge_base`: the rows (DataFrame or dicts) go to the
        knowledge service in one call, which batches them itself (`batch_size` is for HTTP)
        and reports its phases to `progress`."""
        sent = len(rows) if hasattr(rows, "__len__") else None
        record = self.catalog.knowledge_base(project, name)
        _check_placed(rows, record)
        return InsertCounts(sent, self.kbs.insert_rows(record, rows, progress))

    def insert_rows(self, record: KbRecord, rows: Any, progress: OnProgress | None = None) -> int:
        """Insert rows (list of dicts or a DataFrame) into the knowledge base of `record`."""
        return self.kbs.insert_rows(record, rows, progress)

    # agents -------------------------------------------------------------------------------
    def create_agent(self, project: str, body: dict[str, Any]) -> Agent:
        return self.agents.create_agent(project, body)

    def get_agent(self, project: str, name: str) -> Agent:
        return self.agents.get_agent(project, name)

    def list_agents(self, project: str) -> list[Agent]:
        return self.agents.list_agents(project)

    def update_agent(self, project: str, name: str, body: dict[str, Any]) -> Agent:
        return self.agents.update_agent(project, name, body)

    def delete_agent(self, project: str, name: str) -> None:
        self.agents.delete_agent(project, name)

    # SQL and completions ------------------------------------------------------------------
    def query(self, query: str, context: dict[str, Any] | None = None,
              params: dict[str, Any] | list[Any] | None = None,
              progress: OnProgress | None = None) -> SqlResult:
        """One SQL statement; `params` bind its `:name` / `?` placeholders (rest/sql.mdx);
        `progress` receives the events of its long work."""
        return self.sql.query(query, context, params, progress)

    def complete(self, project: str, agent: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return self.agents.complete(project, agent, messages)

    def stream(self, project: str, agent: str,
               messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        return self.agents.stream(project, agent, messages)


def _check_placed(rows: Any, record: KbRecord) -> None:
    """Rows sent to a knowledge base name each of their columns: one it has no place for is
    a 400 in one line, as in SQL (knowledge/ingest.unplaced_column), never a dropped value."""
    from kbsql.engine.knowledge.ingest import unplaced_column
    from kbsql.interface.errors import InvalidParameter

    if hasattr(rows, "columns"):  # a DataFrame
        names: list[Any] = list(rows.columns)
    else:
        names = list(dict.fromkeys(key for row in rows if isinstance(row, dict) for key in row))
    refusal = unplaced_column(names, record.spec)
    if refusal is not None:
        raise InvalidParameter(refusal)
