"""How the engine's parts are built from its config and connected: the composition root's
working half (`Engine` holds what this builds and answers the service's calls with it).

Each function turns settings into one part's narrow arguments, so no part reads the whole
config, and `build_parts` connects the parts that need the SQL and vector stack. SQL and
agents need each other; each gets the other as a port (`engine/ports.py`), and the loop is
closed in `build_parts` and nowhere else.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbsql.engine import outbound
from kbsql.engine.catalog import Catalog
from kbsql.engine.config import EngineConfig
from kbsql.engine.knowledge.storage import StorageBackend
from kbsql.engine.models.providers import ModelProviders
from kbsql.engine.plugins import Registry
from kbsql.engine.ports import AgentOps, RunsSql
from kbsql.interface.results import SqlResult

if TYPE_CHECKING:
    from kbsql.engine.agents.agent_service import AgentService
    from kbsql.engine.datasources.frame_store import FrameStore
    from kbsql.engine.datasources.upload_store import UploadStore
    from kbsql.engine.knowledge.bases import KnowledgeBases
    from kbsql.engine.knowledge.service import KnowledgeService
    from kbsql.engine.sql.executor import SqlExecutor
    from kbsql.engine.sql.tables.duck_settings import DuckSettings


class _LateSql:
    """The `RunsSql` port handed to agents before the executor exists (the executor needs
    the agents first); `build_parts` sets `target` once both are built."""

    target: RunsSql

    def query(self, query: str, context: dict[str, Any] | None = None) -> SqlResult:
        return self.target.query(query, context)


def load_parsers() -> None:
    """Import the two SQL parsers (pure Python: 25 MB, ~0.3 s) as the engine opens, so the
    first statement pays only for DuckDB and Arrow (native, ~70 MB: those load on first use).
    Here and not in a background thread: sqlglot's modules import each other, and a request
    importing them while such a thread did deadlocked the import system (`_DeadlockError`)."""
    if "sqlglot.dialects.duckdb" not in sys.modules:
        import mindsdb_sql_parser.parser  # noqa: F401
        import sqlglot.dialects.duckdb  # noqa: F401


@dataclass(frozen=True)
class Parts:
    """The parts that need the SQL and vector stack (DuckDB, Arrow, the SQL parsers, FAISS),
    built together on first use (`Engine._wired`): an idle `kbsql serve` or a client that
    only lists knowledge bases never loads them (issue #33 item 6)."""

    knowledge: KnowledgeService
    kbs: KnowledgeBases
    agents: AgentService
    uploads: UploadStore
    sql: SqlExecutor


def build_parts(config: EngineConfig, catalog: Catalog, models: ModelProviders,
                storage: Registry[StorageBackend], jobs_created: Callable[[], None]) -> Parts:
    """The knowledge service, knowledge bases, agents, uploads and SQL executor, connected;
    `jobs_created` is called when a CREATE JOB makes the first job (the engine's scheduler)."""
    from kbsql.engine.agents.agent_service import AgentService
    from kbsql.engine.datasources.confine import PathPolicy
    from kbsql.engine.datasources.registry import data_source_engines
    from kbsql.engine.datasources.upload_store import UploadStore
    from kbsql.engine.knowledge.bases import KnowledgeBases
    from kbsql.engine.knowledge.service import KnowledgeService
    from kbsql.engine.sql.executor import SqlExecutor
    from kbsql.engine.sql.parse.variables import Variables

    knowledge = KnowledgeService(config.data_dir, config, models, storage, catalog.find_datasource)
    kbs = KnowledgeBases(catalog, knowledge)
    sql_port = _LateSql()
    agents = AgentService(catalog, config, sql_port, models)
    agent_port: AgentOps = agents
    uploads = UploadStore(catalog, frame_store(config, catalog, "uploads"))
    sql = SqlExecutor(catalog, frame_store(config, catalog), kbs, agent_port, uploads,
                      PathPolicy(config), config.background_inserts,
                      sql_settings(config), data_source_engines(), config.agent_join_max_rows,
                      Variables(config.max_variables, config.max_variables_mb * 2**20,
                                f"{config.note('max_variables')}, {config.note('max_variables_mb')}"))
    sql_port.target = sql  # the mutual recursion, closed here and only here
    sql.jobs_created = jobs_created  # CREATE JOB starts the engine's scheduler
    return Parts(knowledge, kbs, agents, uploads, sql)


def sql_settings(c: EngineConfig) -> DuckSettings:
    """The SQL engine's bounds from the config; spills go to data_dir/tmp."""
    from kbsql.engine.sql.tables.duck_settings import DuckSettings
    from kbsql.engine.sql.tables.value_caps import CheckBounds

    return DuckSettings(memory_limit_mb=c.sql_memory_mb or None, spill_mb=c.sql_spill_mb,
                        threads=c.sql_threads, temp_dir=c.data_dir / "tmp",
                        statement_timeout=c.statement_timeout or None,
                        limit_note=c.note("sql_memory_mb"), timeout_note=c.note("statement_timeout"),
                        spill_note=c.note("sql_spill_mb") + (
                            "" if c.sql_spill_mb is not None or c.disk_reserve_mb <= 0
                            else f", at most what leaves {c.note('disk_reserve_mb')} free"),
                        disk_reserve_mb=c.disk_reserve_mb,
                        read_only_sources=c.read_only_sources,
                        read_only_note=c.note("read_only_sources"),
                        long_statement_tokens=c.long_statement_tokens,
                        long_statement_slots=c.long_statement_slots,
                        long_statement_note=c.note("long_statement_slots"),
                        checks=CheckBounds(c.value_check_nodes, c.note("value_check_nodes"),
                                           c.edit_distance_cells, c.note("edit_distance_cells")))


def outbound_policy(c: EngineConfig) -> outbound.Policy:
    """Where the engine's model calls may go, how many at once, for how long
    (engine/outbound.py; held by its `ModelHttp`): the operator's hosts plus those of its
    own default models; anywhere unless the config confines it."""
    allowed = c.allowed_model_hosts
    if allowed is not None:
        own = [m.get("base_url") or m.get("api_base")
               for m in (c.default_model, c.default_embedding_model or {})]
        # HOST:PORT, never the bare host: the operator's loopback model opens its own port only
        entries = {outbound.host_port(str(u)) for u in own if u}
        allowed = (*allowed, *(e for e in entries if e))
    return outbound.Policy(allowed=allowed, confined=allowed is not None,
                           timeout=c.model_timeout or None, answer_mb=c.model_answer_mb,
                           concurrency=c.model_concurrency or outbound.DEFAULT_CONCURRENCY,
                           served=c.served)


def frame_store(config: EngineConfig, catalog: Catalog, place: str = "frames") -> FrameStore:
    """Registered DataFrames (`place` "frames") or the pages of uploaded files
    ("uploads"): Parquet files in the data directory, or rows of the shared catalog's
    database (a frame registered through one server is a table for all)."""
    if catalog.shared_url:
        from kbsql.engine.postgres.frame_store_pg import PgFrameStore

        return PgFrameStore(catalog.shared_url, place)
    from kbsql.engine.datasources.frame_store import FrameStore

    return FrameStore(config.data_dir, place, reserve=config.disk_reserve_mb * 2**20)
