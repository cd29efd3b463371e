"""Compiled SELECTs and their cache.

A compiled query that reads only stable tables (attached files, registered DataFrames) is
cached per (text, project) and re-checked cheaply on reuse, so a repeated query skips both
parsers. The check is handed in as a function (table parts -> scan), which keeps this module
a leaf under the SQL session.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbsql.engine.datasources.scans import FileScan, Scan
from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    from kbsql.engine.sql.tables.source_columns import ColumnLineage, SourceItem

PLAN_CACHE_SIZE = 256
PLAN_CACHE_MAX_TEXT = 64 * 1024
"""A longer query text is not cached: 256 plans of 1 MB texts (a pasted id list) would keep
~0.5 GB (the text and its compiled SQL); such a query pays its own compile each time."""
PLAN_FRAME_BYTES = 1024 * 1024
"""A plan holds the frames it reads: one reading more is not kept (256 kept plans would
otherwise keep up to 256 tables of a shared catalog in memory for good)."""


@dataclass(frozen=True)
class FrameUse:
    """A frame the plan reads under `name`: `slot` (source, table) for a cached frame, whose
    name stays while its rows do not change; None for one registered for this run only."""

    name: str
    slot: tuple[Any, ...] | None
    frame: Any


@dataclass
class Compiled:
    """DuckDB SQL, the frames it reads (registered on the cursor that runs it) and the
    files it reads (`__kbsql_file_N__` in the text: opened and checked at each run)."""

    sql: str
    frames: list[FrameUse] = field(default_factory=list)
    files: list[FileScan] = field(default_factory=list)
    checks: list[tuple[list[str], Scan]] = field(default_factory=list)
    cacheable: bool = True
    kb_metadata: bool = False  # a knowledge base's `metadata` (JSON text in DuckDB) is read
    views: int = 0  # views read (inlined as subqueries; select.MAX_VIEWS bounds them)
    agent_questions: int = 0  # questions its agent joins asked (agent_join_max_rows bounds them)
    query: bool = True  # False: a write (source_writes), run at once rather than bound first
    sources: list[SourceItem] = field(default_factory=list)  # FROM items reading a source's table
    lineage: list[ColumnLineage] = field(default_factory=list)  # output columns that are source columns


class PlanCache:
    """(query text, project) -> compiled SQL, valid while its tables resolve the same way."""

    def __init__(self, size: int = PLAN_CACHE_SIZE):
        self.size = size
        self._plans: OrderedDict[tuple[str, str], Compiled] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, query: str, db: str, resolve: Callable[[list[str], str], Scan | None]) -> Compiled | None:
        """The plan for (query, db), if every table it read still resolves (`resolve(parts,
        db)` gives the scan) to what it was compiled against."""
        with self._lock:
            plan = self._plans.get((query, db))
        if plan is None:
            return None
        try:
            for parts, scan in plan.checks:
                if resolve(parts, db) != scan:
                    raise LookupError
        except (LookupError, SqlError):
            with self._lock:
                self._plans.pop((query, db), None)
            return None
        return plan

    def put(self, query: str, db: str, plan: Compiled) -> None:
        temps = any(f.slot is None for f in plan.frames)
        held = sum(getattr(f.frame, "nbytes", 0) for f in plan.frames)
        if plan.cacheable and not temps and held <= PLAN_FRAME_BYTES and len(query) <= PLAN_CACHE_MAX_TEXT:
            with self._lock:
                self._plans[(query, db)] = plan
                while len(self._plans) > self.size:
                    self._plans.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
