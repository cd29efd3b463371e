"""What every SQL handler shares: one small session object.

The handlers (`kb/`, `agent/`, `databases/`, `tables/`) all take `(session, statement, ctx,
routed)` and are listed in one table (`statements.py`). The session holds the parts they
may touch, and nothing else: the catalog, the registered DataFrames, the uploaded files,
the shared DuckDB connection, the plan cache, the knowledge-base operations, the agent
port, the query log and the background inserts. It is a leaf
(it imports no handler and not the executor), so the handlers never import the executor
back; `SqlExecutor` is a session that also parses and routes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbsql.engine.catalog import Catalog
from kbsql.engine.datasources.frame_store import FrameStore
from kbsql.engine.datasources.upload_store import UploadStore
from kbsql.engine.knowledge.bases import KnowledgeBases
from kbsql.engine.ports import AgentOps
from kbsql.engine.sql.parse.variables import Variables
from kbsql.engine.sql.query_log import QueryLog
from kbsql.engine.sql.tables.duck import DuckSession
from kbsql.engine.sql.tables.plans import PlanCache
from kbsql.interface.errors import NotFound
from kbsql.interface.results import SqlResult

AGENT_JOIN_MAX_ROWS = 100
"""Distinct questions one query may ask an agent it joins (tables/agent_join.py;
setting `agent_join_max_rows`)."""


class Background(Protocol):
    """Background inserts (kb_background.BackgroundInserts), as the handlers see them."""

    def start(self, record: Any, statement: Any, sql: str, using: dict[str, Any],
              ctx: dict[str, Any]) -> SqlResult: ...

    def resume(self, query_id: Any, ctx: dict[str, Any]) -> SqlResult: ...

    def cancel(self, query_id: Any, ctx: dict[str, Any]) -> SqlResult: ...

    def close(self, timeout: float = ...) -> None: ...


@dataclass
class SqlSession:
    catalog: Catalog
    frames: FrameStore
    duck: DuckSession
    plans: PlanCache
    kbs: KnowledgeBases
    agents: AgentOps
    uploads: UploadStore  # the `files` database (uploaded files)
    queries: QueryLog  # information_schema.queries, in the catalog: server-wide
    variables: Variables = field(default_factory=Variables)  # SET @name = ... (this engine's)
    background: Background = field(init=False, repr=False)  # set by the executor
    agent_join_max_rows: int = AGENT_JOIN_MAX_ROWS  # questions a JOIN of an agent may ask
    jobs_created: Callable[[], None] = field(default=lambda: None, repr=False)
    """Called after CREATE JOB: the engine starts its job scheduler (set by `Engine`)."""


@contextmanager
def missing_ok(if_exists: bool) -> Iterator[None]:
    """`DROP ... IF EXISTS`: a `NotFound` inside the block is no error when `if_exists`."""
    try:
        yield
    except NotFound:
        if not if_exists:
            raise
