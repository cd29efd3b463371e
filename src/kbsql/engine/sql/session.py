"""What every SQL handler shares: one small session object.

The handlers (`kb/`, `agent/`, `databases/`, `tables/`) all take `(session, statement, ctx,
routed)` and are listed in one table (`statements.py`). The session holds the parts they
may touch, and nothing else: the catalog, the registered DataFrames, the shared DuckDB
connection, the plan cache, the knowledge-base operations and the agent port. It is a leaf
(it imports no handler and not the executor), so the handlers never import the executor
back; `SqlExecutor` is a session that also parses and routes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kbsql.engine.catalog import Catalog
from kbsql.engine.datasources.frame_store import FrameStore
from kbsql.engine.knowledge.bases import KnowledgeBases
from kbsql.engine.ports import AgentOps
from kbsql.engine.sql.parse.variables import Variables
from kbsql.engine.sql.query_log import QueryLog
from kbsql.engine.sql.tables.duck import DuckSession
from kbsql.engine.sql.tables.plans import PlanCache
from kbsql.interface.errors import NotFound


@dataclass
class SqlSession:
    catalog: Catalog
    frames: FrameStore
    duck: DuckSession
    plans: PlanCache
    kbs: KnowledgeBases
    agents: AgentOps
    variables: Variables = field(default_factory=Variables)  # SET @name = ... (this engine's)
    queries: QueryLog = field(default_factory=QueryLog)  # information_schema.queries


@contextmanager
def missing_ok(if_exists: bool) -> Iterator[None]:
    """`DROP ... IF EXISTS`: a `NotFound` inside the block is no error when `if_exists`."""
    try:
        yield
    except NotFound:
        if not if_exists:
            raise
